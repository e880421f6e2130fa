// ProbeConnect against real sockets on 127.0.0.1: a port bound but not listening refuses, a
// listening one connects, a Unix path with no socket refuses; and chronobench, given a port where
// nothing listens, fails at once saying so instead of waiting out its 10 s, and given one that
// accepts but never speaks gRPC, says so after them.
#include "client/connect_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "tests/client/subprocess.h"

namespace chronoserve::client {
namespace {
using ::testing::HasSubstr;

// A TCP socket bound to a free port on 127.0.0.1 (listening when asked); closed with the object.
class BoundPort {
 public:
  explicit BoundPort(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || (listening && ::listen(fd_, 4) != 0)) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~BoundPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ConnectProbeTest, TellsARefusalFromAListener) {
  BoundPort closed(/*listening=*/false);
  ASSERT_GT(closed.port(), 0);
  const ConnectProbe refused = ProbeConnect("127.0.0.1:" + std::to_string(closed.port()), 1000);
  EXPECT_TRUE(refused.refused);
  EXPECT_EQ(refused.reason, "Connection refused");

  BoundPort open(/*listening=*/true);
  ASSERT_GT(open.port(), 0);
  for (const std::string& target : {"127.0.0.1:" + std::to_string(open.port()),
                                    "dns:///127.0.0.1:" + std::to_string(open.port())}) {
    const ConnectProbe ok = ProbeConnect(target, 1000);
    EXPECT_FALSE(ok.refused) << target;
    EXPECT_TRUE(ok.connected) << target;
    EXPECT_EQ(ok.reason, "") << target;
  }
}

TEST(ConnectProbeTest, AUnixPathWithNoSocketIsRefused) {
  for (const std::string& target : {"unix:/nonexistent-chronoserve-dir/s.sock", "unix:///nonexistent-chronoserve-dir/s.sock"}) {
    const ConnectProbe probe = ProbeConnect(target, 1000);
    EXPECT_TRUE(probe.refused) << target;
    EXPECT_EQ(probe.reason, "No such file or directory") << target;
  }
}

TEST(ConnectProbeTest, GrpcsOtherFormsAreNotProbed) {
  for (const char* target : {"ipv4:127.0.0.1:1", "ipv6:[::1]:1", "unix-abstract:x", "dns://8.8.8.8/localhost:1", "::1",
                             "dns:///"}) {
    const ConnectProbe probe = ProbeConnect(target, 1000);
    EXPECT_FALSE(probe.refused) << target;
    EXPECT_FALSE(probe.connected) << target;
    EXPECT_EQ(probe.reason, "") << target;
  }
}

TEST(ConnectProbeTest, NoPortIsNoRefusal) {
  const ConnectProbe no_port = ProbeConnect("localhost", 1000);
  EXPECT_FALSE(no_port.refused);
  EXPECT_THAT(no_port.reason, HasSubstr("no port"));
}

TEST(ConnectProbeTest, ChronobenchFailsAtOnceWhereNothingListens) {
  BoundPort closed(/*listening=*/false);
  ASSERT_GT(closed.port(), 0);
  const absl::Time start = absl::Now();
  auto run = testing::RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", "127.0.0.1:" + std::to_string(closed.port())},
                                 absl::Seconds(30));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->first, 1) << run->second;
  EXPECT_THAT(run->second, HasSubstr(": Connection refused (is chronoserve running and listening there?)"));
  // Not the 10 s a slow server is given (that path says "within 10 s"): found by the probe, in
  // milliseconds; 9 s leaves a busy box room for the process's start.
  EXPECT_THAT(run->second, ::testing::Not(HasSubstr("within 10 s"))) << "the refusal was found by the probe";
  EXPECT_LT(absl::Now() - start, absl::Seconds(9)) << "not the 10 s a slow server is given";
}

// A port that accepts the connection (the kernel does, from the backlog) but never speaks keeps
// gRPC connecting without a failure: chronobench still says after its 10 s that a plain connect
// works there, so it is no gRPC port (or a stuck one), not merely "cannot connect".
TEST(ConnectProbeTest, ChronobenchNamesAPortThatAcceptsButNeverSpeaksGrpc) {
  BoundPort silent(/*listening=*/true);
  ASSERT_GT(silent.port(), 0);
  auto run = testing::RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", "127.0.0.1:" + std::to_string(silent.port())},
                                 absl::Seconds(40));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->first, 1) << run->second;
  EXPECT_THAT(run->second, HasSubstr("within 10 s (a plain connect there succeeds, but gRPC's connection does not: "
                                     "not a gRPC port, one that never answers the HTTP/2 handshake"));
}

}  // namespace
}  // namespace chronoserve::client
