#include "server/listen_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/output_file.h"

namespace chronoserve::server {

std::string WhyTcpListenFails(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::StrCat("cannot resolve '", host, "' (", gai_strerror(rc), ")");
  }
  std::string why;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = absl::StrCat("socket: ", std::strerror(errno));
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as gRPC does: TIME_WAIT is no conflict
    const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0;
    const int error = errno;
    close(fd);
    if (bound) {
      why.clear();
      break;
    }
    why = error == EADDRINUSE ? absl::StrCat(std::strerror(error), " (another process listens there)")
          : error == EADDRNOTAVAIL ? absl::StrCat(std::strerror(error), " (not an address of this machine)")
                                   : std::strerror(error);
  }
  freeaddrinfo(found);
  return why;
}

std::string WhyUnixListenFails(const std::string& path) {
  if (std::string why = WhyCannotCreateIn(path, "socket"); !why.empty()) return why;
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
    return "a file that is not a socket is at that path (it is left alone: remove it or choose another path)";
  }
  return "";
}

}  // namespace chronoserve::server
