// One TCP connect with a bound: what the client's connect probe (why a target cannot be reached)
// and the server's metrics shutdown (waking CivetWeb's listener) both make.
#ifndef CHRONOSERVE_COMMON_TCP_CONNECT_H_
#define CHRONOSERVE_COMMON_TCP_CONNECT_H_

#include <netdb.h>

namespace chronoserve {

// Connects to one resolved address, giving up after `timeout_ms`; closes the socket either way.
// 0 when it connected, else the errno (ETIMEDOUT past the bound).
int ConnectWithin(const addrinfo& address, int timeout_ms);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TCP_CONNECT_H_
