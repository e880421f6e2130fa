#include "client/connect_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"
#include "common/tcp_connect.h"

namespace chronoserve::client {
namespace {

ConnectProbe Connected() {
  ConnectProbe p;
  p.connected = true;
  return p;
}

ConnectProbe FromErrno(int err) {
  ConnectProbe p;
  p.refused = err == ECONNREFUSED || err == ENOENT;
  p.reason = std::strerror(err);
  return p;
}

ConnectProbe ProbeUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return ConnectProbe{false, false, "the socket path is too long"};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  // Non-blocking: a frozen server's full backlog answers EAGAIN at once instead of holding the probe.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return FromErrno(errno);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  ::close(fd);
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS) return Connected();  // someone listens
  return FromErrno(err);
}

ConnectProbe ProbeTcp(absl::string_view target, int timeout_ms) {
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return ConnectProbe{false, false, "no port in the target (HOST:PORT)"};
  // (ProbeConnect has left out an IPv6 address without brackets, which gRPC reads otherwise.)
  const std::string host = UnbracketedHost(std::string(target.substr(0, colon)));
  const std::string port(target.substr(colon + 1));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return ConnectProbe{false, false, absl::StrCat("cannot resolve '", host, "': ", ::gai_strerror(rc))};
  }
  // As gRPC: every address the name resolves to; refused only when each one refused, or could not
  // be reached at all, and at least one refused (an unreachable network alone may come back).
  bool all_refused = true;
  bool any_refused = false;
  int last = 0;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    last = ConnectWithin(*ai, timeout_ms);
    if (last == 0) {
      ::freeaddrinfo(found);
      return Connected();
    }
    // An address of a family this host cannot reach (::1 without IPv6) refuses nothing.
    const bool unreachable = last == EAFNOSUPPORT || last == EADDRNOTAVAIL || last == ENETUNREACH;
    any_refused |= last == ECONNREFUSED;
    if (!unreachable) all_refused = all_refused && last == ECONNREFUSED;
  }
  ::freeaddrinfo(found);
  const bool refused = all_refused && any_refused;
  // Refused: reported as the refusal, not as the error of an address family skipped after it.
  ConnectProbe result = FromErrno(refused ? ECONNREFUSED : last);
  result.refused = refused;
  return result;
}

}  // namespace

ConnectProbe ProbeConnect(const std::string& target, int timeout_ms) {
  absl::string_view t = target;
  if (absl::ConsumePrefix(&t, "unix://") || absl::ConsumePrefix(&t, "unix:")) return ProbeUnix(std::string(t));
  absl::ConsumePrefix(&t, "dns:///");
  if (t.empty()) return ConnectProbe{};
  // Another of gRPC's schemes (ipv4:, ipv6:, unix-abstract:, dns://AUTHORITY/): not probed.
  if (absl::StrContains(t, "/") || (t.find(':') != t.rfind(':') && t.front() != '[') ||
      absl::StartsWith(t, "ipv4:") || absl::StartsWith(t, "ipv6:") || absl::StartsWith(t, "unix-abstract:") ||
      absl::StartsWith(t, "dns:")) {
    return ConnectProbe{};
  }
  return ProbeTcp(t, timeout_ms);
}

}  // namespace chronoserve::client
