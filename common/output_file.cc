#include "common/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace chronoserve {
namespace {

// Where a path leads when its last link names no file yet (where WriteFile will create it), read
// link by link; `path` itself when it is no link. Only for checking and comparing ahead of a
// write: the write itself lets the kernel follow the links.
std::string DanglingTarget(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, ec)) && !ec; ++hops) {
    const fs::path to = fs::read_symlink(at, ec);
    if (ec) break;
    at = to.is_absolute() ? to : at.parent_path() / to;
  }
  return at.string();
}

}  // namespace

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
  const int err = errno;
  struct stat link;
  const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (err != ENOENT && err != ENOTDIR) {
    // A link loop, a link the kernel will not follow (protected_symlinks), a directory that
    // cannot be searched: the write would fail the same way.
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", std::strerror(err)));
  }
  // A link that names no file yet: the file is created where it points.
  const std::string why = WhyCannotCreateIn(is_link ? DanglingTarget(path) : path, "file");
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
    const std::filesystem::path absolute = std::filesystem::absolute(DanglingTarget(path), ec);
    if (ec) return std::nullopt;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, ec);
    if (ec) return std::nullopt;
    return canonical;
  };
  const std::optional<std::filesystem::path> pa = resolved(a), pb = resolved(b);
  return pa.has_value() && pb.has_value() && *pa == *pb;
}

namespace {

// Writes all of `contents` to `fd`; 0, or the errno of the write that failed. A descriptor left
// non-blocking (a pipe, a terminal another program set so) is waited for, not given up on.
int WriteAll(int fd, const std::string& contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd room = {fd, POLLOUT, 0};
        if (::poll(&room, 1, -1) >= 0 || errno == EINTR) continue;
      }
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

// The process's descriptor `path` stands for: /dev/stdout and /dev/stderr, /dev/fd/N and
// /proc/self/fd/N by name, and any path (a link to /dev/stdout, the file stdout is redirected to)
// naming the very file that descriptor 1 or 2 is open on (`st`, the path's file). -1 for none.
int DescriptorFor(const std::string& path, const struct stat* st) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (absl::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!absl::StartsWith(path, prefix)) continue;
    const absl::string_view digits = absl::string_view(path).substr(prefix.size());
    int fd = -1;
    if (!digits.empty() && digits.size() <= 9 && std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) &&
        absl::SimpleAtoi(digits, &fd) && ::fcntl(fd, F_GETFD) >= 0) {
      return fd;
    }
  }
  if (st == nullptr) return -1;
  for (int fd : {1, 2}) {
    struct stat open_on;
    if (::fstat(fd, &open_on) == 0 && open_on.st_dev == st->st_dev && open_on.st_ino == st->st_ino) return fd;
  }
  return -1;
}

}  // namespace

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  // errno's text beside what failed; errno read at once, before building the message could change it.
  auto failed = [](int err, absl::string_view what) {
    return absl::InternalError(absl::StrCat(what, err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  };
  // Links are followed by the kernel alone (so its protections for links in shared directories
  // hold): the path's file as the kernel reaches it.
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  // The process's own output (/dev/stdout, whether a terminal, a pipe or a file): written through
  // its descriptor, after what was written there before (stdio's buffers first), never truncated
  // or replaced.
  if (const int fd = DescriptorFor(path, exists ? &st : nullptr); fd >= 0) {
    std::fflush(nullptr);
    int err = WriteAll(fd, contents);
    // A regular file not opened for appending (`3<>report.json`): what an older, longer report left
    // past the new one's end goes. (Stdout redirected with > is at its end already.)
    struct stat on;
    const int fl = ::fcntl(fd, F_GETFL);
    if (err == 0 && ::fstat(fd, &on) == 0 && S_ISREG(on.st_mode) && fl >= 0 && (fl & O_APPEND) == 0) {
      const off_t at = ::lseek(fd, 0, SEEK_CUR);
      if (at >= 0 && at < on.st_size && ::ftruncate(fd, at) != 0) err = errno;
    }
    return err == 0 ? absl::OkStatus() : failed(err, absl::StrCat("failed writing '", path, "'"));
  }
  // In place: the file truncated (a regular one) and written, created if need be (through a
  // dangling link, the file it names).
  auto write_in_place = [&]() -> absl::Status {
    // O_CREAT only for a file not there yet: on one that is, in a shared sticky directory, the
    // kernel's protected_regular refuses it even where a plain open for writing is allowed.
    const int flags = O_WRONLY | O_CLOEXEC | (!exists ? O_TRUNC | O_CREAT : S_ISREG(st.st_mode) ? O_TRUNC : 0);
    const int fd = ::open(path.c_str(), flags, 0666);
    if (fd < 0) {
      const int err = errno;
      return failed(err, absl::StrCat("cannot open '", path, "' for writing"));
    }
    int err = WriteAll(fd, contents);
    if (::close(fd) != 0 && err == 0) err = errno;
    return err == 0 ? absl::OkStatus() : failed(err, absl::StrCat("failed writing '", path, "'"));
  };
  struct stat link;
  const bool dangling = !exists && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  // Written in place, where replacing the file would change what the path is: a device or a pipe
  // (/dev/null); a file with other hard links (they would keep the old contents) or of another
  // owner (the new file would be ours); a link that names no file yet (the file is created where
  // it points, and the link stays).
  if (dangling || (exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1 || st.st_uid != ::geteuid()))) {
    return write_in_place();
  }
  // A link to a file: that file is replaced, the link stays.
  std::string target = path;
  if (exists) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }

  // The new contents go to a file beside the target that replaces it only once whole: a failed
  // write (a full disk) leaves the old report as it was and no part of the new one.
  static std::atomic<uint64_t> next{0};
  const std::string temp = absl::StrCat(target, ".tmp.", ::getpid(), ".", next.fetch_add(1));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? (st.st_mode & 07777) : 0666);
  if (fd < 0) {
    const int err = errno;
    // A writable file in a directory that is not, or a name too long for the temporary's suffix:
    // written in place, as before there was a temporary file.
    if ((exists && (err == EACCES || err == EPERM || err == EROFS)) || err == ENAMETOOLONG) return write_in_place();
    return failed(err, absl::StrCat("cannot open '", path, "' for writing"));
  }
  // open's mode passes through the umask; the replaced file's own mode is kept.
  if (exists) ::fchmod(fd, st.st_mode & 07777);
  int err = WriteAll(fd, contents);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return failed(err, absl::StrCat("failed writing '", path, "'"));
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    // The file cannot be replaced (a file bind-mounted alone, a sticky directory's file of another
    // user, another filesystem): the report is written into it instead.
    ::unlink(temp.c_str());
    return write_in_place();
  }
  return absl::OkStatus();
}

}  // namespace chronoserve
