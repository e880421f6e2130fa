// HeldPort: a listening TCP socket on 127.0.0.1 (a port the kernel picks), closed with the object,
// for tests of a server that must fail to bind it.
#ifndef CHRONOSERVE_TESTS_SERVER_HELD_PORT_H_
#define CHRONOSERVE_TESTS_SERVER_HELD_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chronoserve::testing {

struct HeldPort {
  int fd = -1;
  int port = 0;  // 0: the socket could not be bound
  HeldPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0) return;
    socklen_t length = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
    port = ntohs(addr.sin_port);
  }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  ~HeldPort() { close(fd); }
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_HELD_PORT_H_
