// The report files a long run writes at its end (chronobench, chronoserve profile): checked before
// the run naming the flag and what is wrong, written with errno's text on failure, and two paths
// told apart from two names of one file.
#include "common/output_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"

namespace chronoserve {
namespace {

// Report paths are checked before the run: a missing directory or a directory where a file should
// go is named with its flag; an existing file or a new one in an existing directory is fine, and
// checking creates nothing.
TEST(OutputFileTest, CheckWritableNamesTheFlagAndWhatIsWrong) {
  char dir_template[] = "/tmp/cb_writable_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string fresh = dir + "/report.json";
  EXPECT_TRUE(CheckWritable("--json", fresh).ok());
  struct stat st;
  EXPECT_NE(::stat(fresh.c_str(), &st), 0) << "checking must not create the file";
  ASSERT_TRUE(WriteFile(fresh, "{}\n").ok());
  // A write that fails says why (errno's text), beside the path.
  const absl::Status unwritable = WriteFile(dir + "/no/such/dir/r.json", "{}\n");
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("No such file or directory"), std::string::npos) << unwritable;
  EXPECT_TRUE(CheckWritable("--json", fresh).ok()) << "an existing file is replaced";

  const absl::Status missing = CheckWritable("--csv", dir + "/no/such/dir/r.csv");
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), absl::StrCat("--csv '", dir, "/no/such/dir/r.csv': directory '", dir,
                                            "/no/such/dir' does not exist"));
  const absl::Status directory = CheckWritable("--html", dir);
  EXPECT_EQ(directory.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(directory.message(), absl::StrCat("--html '", dir, "': is a directory"));
  const absl::Status file_as_dir = CheckWritable("--json", fresh + "/r.json");
  EXPECT_EQ(file_as_dir.code(), absl::StatusCode::kInvalidArgument) << "a file is no directory";
  EXPECT_EQ(file_as_dir.message(), absl::StrCat("--json '", fresh, "/r.json': '", fresh, "' is not a directory"));
  EXPECT_TRUE(CheckWritable("--json", "relative-report.json").ok()) << "the working directory";

  // One file by two names: existing (a link to it), or not yet (`..` in the path).
  const std::string link = dir + "/link.json";
  ASSERT_EQ(::symlink(fresh.c_str(), link.c_str()), 0);
  EXPECT_TRUE(SameFile(fresh, link));
  const std::string leaf = std::filesystem::path(dir).filename().string();
  EXPECT_TRUE(SameFile(dir + "/new.csv", dir + "/../" + leaf + "/./new.csv"));
  EXPECT_FALSE(SameFile(dir + "/new.csv", dir + "/new.html"));
  EXPECT_FALSE(SameFile(fresh, dir + "/new.html"));
  EXPECT_FALSE(SameFile("/dev/null", "/dev/null")) << "reports discarded on purpose";

  ::unlink(link.c_str());
  ::unlink(fresh.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace chronoserve
