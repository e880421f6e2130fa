// Why a gRPC target cannot be reached, found the way gRPC would reach it (one plain connect), since
// gRPC's C++ API tells only that a channel failed, not why: a target whose connection is refused
// (nothing listening on a TCP port, no socket file at a Unix path) is told apart from one that is
// merely slow, so a client can fail at once with the reason.
#ifndef CHRONOSERVE_CLIENT_CONNECT_PROBE_H_
#define CHRONOSERVE_CLIENT_CONNECT_PROBE_H_

#include <string>

namespace chronoserve::client {

struct ConnectProbe {
  bool refused = false;    // nothing listens there (ECONNREFUSED; ENOENT for a Unix socket path)
  bool connected = false;  // a plain connect succeeded: something listens there
  std::string reason;    // errno's text or the resolver's; empty when it connected or was not probed
};

// `target`: "HOST:PORT", "[V6]:PORT", "dns:///HOST:PORT", "unix:PATH" or "unix://PATH". Any
// other of gRPC's forms (ipv4:, ipv6:, unix-abstract:, an unbracketed IPv6 address) is not probed:
// an empty reason, not refused. Gives up on a TCP connect after `timeout_ms`; resolving a name
// is the system resolver's, unbounded here.
ConnectProbe ProbeConnect(const std::string& target, int timeout_ms);

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_CONNECT_PROBE_H_
