// Why a listener could not be bound. gRPC's ServerBuilder::BuildAndStart fails with no reason (it
// only logs one), so after a failure the server probes the addresses itself, the way gRPC binds
// them, and names what it finds: an address in use, one that is not this machine's, a host name that
// does not resolve, a Unix socket's directory missing or read-only, a file that is not a socket.
#ifndef CHRONOSERVE_SERVER_LISTEN_CHECK_H_
#define CHRONOSERVE_SERVER_LISTEN_CHECK_H_

#include <string>

namespace chronoserve::server {

// Why TCP `host`:`port` cannot be listened on (host without brackets; port 0 = any): "cannot resolve
// 'h' (...)" or the bind's error ("Address already in use"); "" when a probe socket binds there.
std::string WhyTcpListenFails(const std::string& host, int port);

// Why a Unix socket cannot be made at `path`: its directory missing, not a directory or not
// writable, or a file that is not a socket already there; "" when none of those.
std::string WhyUnixListenFails(const std::string& path);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_LISTEN_CHECK_H_
