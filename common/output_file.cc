#include "common/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

absl::Status CheckWritable(const std::string& flag, const std::string& path) {
  const std::string what = absl::StrCat(flag, " '", path, "'");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(what, ": is a directory"));
    if (::access(path.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": cannot be overwritten (", std::strerror(errno), ")"));
    }
    return absl::OkStatus();
  }
  const std::string why = WhyCannotCreateIn(path, "file");
  return why.empty() ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

std::string WhyCannotCreateIn(const std::string& path, const std::string& kind) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return err == ENOENT ? absl::StrCat("directory '", dir, "' does not exist")
                         : absl::StrCat("directory '", dir, "': ", std::strerror(err));
  }
  if (!S_ISDIR(st.st_mode)) return absl::StrCat("'", dir, "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return absl::StrCat("cannot create a ", kind, " in '", dir, "' (", std::strerror(err), ")");
  }
  return "";
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    // Only files: two reports into /dev/null (discarded on purpose) collide with nothing.
    return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  auto resolved = [](const std::string& path) -> std::optional<std::filesystem::path> {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    if (ec) return std::nullopt;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, ec);
    if (ec) return std::nullopt;
    return canonical;
  };
  const std::optional<std::filesystem::path> pa = resolved(a), pb = resolved(b);
  return pa.has_value() && pb.has_value() && *pa == *pb;
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  // errno's text when the stream's failure set one.
  // errno read at once, before building the message could change it.
  auto failed = [](int err, absl::string_view what) {
    return absl::InternalError(absl::StrCat(what, err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  };
  errno = 0;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    const int err = errno;
    return failed(err, absl::StrCat("cannot open '", path, "' for writing"));
  }
  file << contents;
  file.close();
  if (!file) {
    const int err = errno;
    return failed(err, absl::StrCat("failed writing '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace chronoserve
