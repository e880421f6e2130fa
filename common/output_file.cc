#include "common/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
  // errno's text beside what failed; errno read at once, before building the message could change it.
  auto failed = [](int err, absl::string_view what) {
    return absl::InternalError(absl::StrCat(what, err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  };
  // A link is followed: the file it names is replaced, the link stays.
  std::string target = path;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  // A device or a pipe (/dev/null, /dev/stdout) is written in place: it cannot be replaced.
  bool in_place = exists && !S_ISREG(st.st_mode);
  std::string temp;
  int fd = -1;
  if (!in_place) {
    // The new contents go to a file beside the target that replaces it only once whole: a failed
    // write (a full disk) leaves the old report as it was and no part of the new one.
    static std::atomic<uint64_t> next{0};
    temp = absl::StrCat(target, ".tmp.", ::getpid(), ".", next.fetch_add(1));
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? (st.st_mode & 07777) : 0666);
    if (fd < 0) {
      const int err = errno;
      // A writable file in a directory that is not: written in place, as before there was a temp file.
      if (!(exists && (err == EACCES || err == EPERM || err == EROFS))) {
        return failed(err, absl::StrCat("cannot open '", path, "' for writing"));
      }
      in_place = true;
    } else if (exists) {
      // open's mode passes through the umask; the replaced file's own mode is kept.
      ::fchmod(fd, st.st_mode & 07777);
    }
  }
  if (in_place) {
    fd = ::open(target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return failed(err, absl::StrCat("cannot open '", path, "' for writing"));
    }
  }
  size_t done = 0;
  int write_err = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && write_err == 0) write_err = errno;
  if (write_err == 0 && !in_place && ::rename(temp.c_str(), target.c_str()) != 0) write_err = errno;
  if (write_err != 0) {
    if (!in_place) ::unlink(temp.c_str());
    return failed(write_err, absl::StrCat("failed writing '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace chronoserve
