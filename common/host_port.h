// HostPort: "HOST:PORT" for a listening address or a target, an IPv6 host (one holding a colon) in
// brackets ("[::1]:8001"), as gRPC and CivetWeb read them and as logs should show them.
#ifndef CHRONOSERVE_COMMON_HOST_PORT_H_
#define CHRONOSERVE_COMMON_HOST_PORT_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace chronoserve {

// "[::1]" -> "::1": a host as HostPort wrote it, for a resolver; any other host unchanged.
inline std::string UnbracketedHost(const std::string& host) {
  return host.size() >= 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
}

inline std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_HOST_PORT_H_
