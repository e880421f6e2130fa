// The report files a long run writes at its end (chronobench, chronoserve profile): checked before
// the run naming the flag and what is wrong, written with errno's text on failure, and two paths
// told apart from two names of one file.
#include "common/output_file.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Names in `dir`, to see that no temporary file is left behind.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A report is replaced whole or not at all: a write that fails part way (here the file-size limit,
// as a full disk would) leaves the old report as it was and no temporary file beside it.
TEST(OutputFileTest, AFailedWriteLeavesTheOldFileWhole) {
  char dir_template[] = "/tmp/cb_atomic_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string report = dir + "/report.json";
  const std::string old_report = "{\"requests\": 17}\n";
  ASSERT_TRUE(WriteFile(report, old_report).ok());
  ASSERT_EQ(ReadAll(report), old_report);

  // Past RLIMIT_FSIZE a write fails with EFBIG (SIGXFSZ ignored) after its first bytes are on disk.
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*saved_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string big(64 * 1024, 'x');
  const absl::Status failed = WriteFile(report, big);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_NE(failed.message().find("failed writing '" + report + "'"), std::string::npos) << failed;
  EXPECT_NE(failed.message().find("File too large"), std::string::npos) << failed;
  EXPECT_EQ(ReadAll(report), old_report) << "the old report must survive a failed write";
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"report.json"}) << "no temporary file is left";

  // A whole write replaces it and leaves nothing else.
  ASSERT_TRUE(WriteFile(report, big).ok());
  EXPECT_EQ(ReadAll(report), big);
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"report.json"});
  std::filesystem::remove_all(dir);
}

// Replacing keeps what the path is: a link stays a link (its file gets the contents), the replaced
// file keeps its mode, and /dev/null is written, not replaced.
TEST(OutputFileTest, ReplacingKeepsLinksModesAndDevices) {
  char dir_template[] = "/tmp/cb_replace_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string real = dir + "/real.csv";
  const std::string link = dir + "/link.csv";
  ASSERT_TRUE(WriteFile(real, "a,b\n1,2\n").ok());
  ASSERT_EQ(::chmod(real.c_str(), 0640), 0);
  ASSERT_EQ(::symlink("real.csv", link.c_str()), 0);

  ASSERT_TRUE(WriteFile(link, "a,b\n3,4\n").ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link must stay a link";
  EXPECT_EQ(ReadAll(real), "a,b\n3,4\n");
  ASSERT_EQ(::stat(real.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u) << "the replaced file keeps its mode";
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"link.csv", "real.csv"}));

  ASSERT_TRUE(WriteFile("/dev/null", "discarded\n").ok());
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null must stay a device";
  std::filesystem::remove_all(dir);
}

// What replacing would change is written in place instead: a dangling link gets its file created
// (the link stays), a file with another hard link keeps it, and a name too long for the
// temporary's suffix is still written.
TEST(OutputFileTest, DanglingLinksHardLinksAndLongNamesAreWrittenNotReplaced) {
  char dir_template[] = "/tmp/cb_inplace_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  struct stat st;

  ASSERT_TRUE(std::filesystem::create_directory(dir + "/real"));
  const std::string link = dir + "/link.json";
  ASSERT_EQ(::symlink("real/target.json", link.c_str()), 0);
  ASSERT_TRUE(WriteFile(link, "{\"a\": 1}\n").ok());
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the dangling link stays a link";
  EXPECT_EQ(ReadAll(dir + "/real/target.json"), "{\"a\": 1}\n") << "its file is created";

  const std::string a = dir + "/a.json", b = dir + "/b.json";
  ASSERT_TRUE(WriteFile(a, "old\n").ok());
  ASSERT_EQ(::link(a.c_str(), b.c_str()), 0);
  ASSERT_TRUE(WriteFile(a, "new\n").ok());
  EXPECT_EQ(ReadAll(b), "new\n") << "the other hard link sees the new contents";
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u);

  const std::string long_name = dir + "/" + std::string(250, 'r') + ".j";  // 252 bytes: + ".tmp.PID.N" is too long
  ASSERT_TRUE(WriteFile(long_name, "first\n").ok());
  ASSERT_TRUE(WriteFile(long_name, "second\n").ok());
  EXPECT_EQ(ReadAll(long_name), "second\n");

  std::filesystem::remove_all(dir);
}

// A file that cannot be renamed over (here a file bind-mounted onto the report's path, in a mount
// namespace of the test's own child) is written in place: the new contents reach it, and the
// temporary file is removed. Skipped where the test may not make a mount namespace.
TEST(OutputFileTest, AFileThatCannotBeRenamedOverIsWrittenInPlace) {
  char dir_template[] = "/tmp/cb_bindmount_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string report = dir + "/report.json", mounted = dir + "/mounted.json";
  ASSERT_TRUE(WriteFile(report, "{\"old\": 1}\n").ok());
  ASSERT_TRUE(WriteFile(mounted, "{\"mounted\": 2}\n").ok());
  // The child's exit status: 0 written in place, 1 not, 2 no mount namespace, 3 no bind mount.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(2);
    if (::mount(mounted.c_str(), report.c_str(), nullptr, MS_BIND, nullptr) != 0) ::_exit(3);
    const std::string renamed_over = dir + "/probe";
    std::ofstream(renamed_over) << "x";
    if (::rename(renamed_over.c_str(), report.c_str()) == 0) ::_exit(1);  // the bind mount must refuse it
    ::unlink(renamed_over.c_str());
    const absl::Status written = WriteFile(report, "{\"new\": 3}\n");
    ::_exit(written.ok() && ReadAll(report) == "{\"new\": 3}\n" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  if (WEXITSTATUS(status) == 2 || WEXITSTATUS(status) == 3) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "this process may not bind-mount a file in a mount namespace of its own (exit "
                 << WEXITSTATUS(status) << ")";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the bound file must get the new report in place";
  EXPECT_EQ(ReadAll(mounted), "{\"new\": 3}\n") << "written into the file mounted there";
  EXPECT_EQ(ReadAll(report), "{\"old\": 1}\n") << "outside the child's namespace the path is its own file";
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"mounted.json", "report.json"})) << "no temporary file is left";
  std::filesystem::remove_all(dir);
}

// The process's own output (/dev/stdout, /dev/fd/N, /proc/self/fd/N, or a link to one) is written
// through its descriptor, after what was written there before: a pipe gets the bytes (the path names
// no file a temporary could go beside), and a file stdout is redirected to keeps its earlier output
// and its inode.
TEST(OutputFileTest, TheProcesssOwnOutputIsWrittenThroughItsDescriptor) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  ASSERT_TRUE(WriteFile("/proc/self/fd/" + std::to_string(ends[1]), "into the pipe\n").ok());
  ASSERT_TRUE(WriteFile("/dev/fd/" + std::to_string(ends[1]), "again\n").ok());
  ::close(ends[1]);
  std::string piped(64, '\0');
  const ssize_t got = ::read(ends[0], piped.data(), piped.size());
  ::close(ends[0]);
  ASSERT_GT(got, 0);
  piped.resize(static_cast<size_t>(got));
  EXPECT_EQ(piped, "into the pipe\nagain\n");

  char dir_template[] = "/tmp/cb_stdout_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string out = dir + "/out.txt";
  ASSERT_TRUE(WriteFile(out, "summary\n").ok());
  struct stat before;
  ASSERT_EQ(::stat(out.c_str(), &before), 0);
  // stdout redirected to the file (>>), reached through a link of the user's to /dev/stdout.
  const int file = ::open(out.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const std::string link = dir + "/report.json";
  ASSERT_EQ(::symlink("/dev/stdout", link.c_str()), 0);
  std::fflush(stdout);
  const int saved = ::dup(1);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(file, 1), 1);
  const absl::Status through_link = WriteFile(link, "{\"json\": 1}\n");
  const absl::Status by_name = WriteFile("/dev/stdout", "after\n");
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  ::close(file);
  ASSERT_TRUE(through_link.ok()) << through_link;
  ASSERT_TRUE(by_name.ok()) << by_name;
  EXPECT_EQ(ReadAll(out), "summary\n{\"json\": 1}\nafter\n") << "earlier output kept, nothing truncated";
  struct stat now;
  ASSERT_EQ(::stat(out.c_str(), &now), 0);
  EXPECT_EQ(now.st_ino, before.st_ino) << "the file stdout is open on must not be replaced";
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));

  // A descriptor on a regular file not appending (`3<>report.json`): a shorter report leaves no
  // tail of the longer one before it. "/dev/fd/ N" is no descriptor's name.
  const std::string report = dir + "/report3.json";
  ASSERT_TRUE(WriteFile(report, "{\"old\": \"a much longer previous report\"}\n").ok());
  const int rw = ::open(report.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(rw, 0);
  ASSERT_TRUE(WriteFile("/dev/fd/" + std::to_string(rw), "{\"new\": 1}\n").ok());
  ::close(rw);
  EXPECT_EQ(ReadAll(report), "{\"new\": 1}\n");
  EXPECT_FALSE(WriteFile("/dev/fd/ 1", "x").ok()) << "a path that names no file";
  std::filesystem::remove_all(dir);
}

// Ahead of a run, a link that names no file yet is checked and compared where it points.
TEST(OutputFileTest, ADanglingLinkIsCheckedAndComparedWhereItPoints) {
  char dir_template[] = "/tmp/cb_dangling_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string bad = dir + "/bad.json";
  ASSERT_EQ(::symlink("/nonexistent-cb-dir/r.json", bad.c_str()), 0);
  const absl::Status checked = CheckWritable("--json", bad);
  EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(checked.message().find("directory '/nonexistent-cb-dir' does not exist"), std::string::npos) << checked;
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/real"));
  const std::string link = dir + "/l.json";
  ASSERT_EQ(::symlink("real/t.json", link.c_str()), 0);
  EXPECT_TRUE(CheckWritable("--json", link).ok());
  EXPECT_TRUE(SameFile(link, dir + "/real/t.json")) << "--json l.json --csv real/t.json would collide";
  // A link loop is refused before the run, as the write would be.
  ASSERT_EQ(::symlink("loop2", (dir + "/loop1").c_str()), 0);
  ASSERT_EQ(::symlink("loop1", (dir + "/loop2").c_str()), 0);
  const absl::Status loop = CheckWritable("--json", dir + "/loop1");
  EXPECT_EQ(loop.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loop.message().find(std::strerror(ELOOP)), std::string::npos) << loop;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chronoserve
