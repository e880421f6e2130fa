// Why a listener could not be bound (server/listen_check.h): each cause named, and nothing named
// where a listener would bind. The server's own messages are tested in failed_model_test.cc and
// unix_socket_test.cc.
#include "server/listen_check.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/held_port.h"
#include "tests/server/test_repository.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;
using testing::HeldPort;

TEST(ListenCheckTest, NamesWhyATcpAddressCannotBeListenedOn) {
  HeldPort held;
  ASSERT_GT(held.port, 0);
  EXPECT_THAT(WhyTcpListenFails("127.0.0.1", held.port), HasSubstr("Address already in use (another process listens there)"));
  EXPECT_THAT(WhyTcpListenFails("nosuchhost.invalid", 8001), HasSubstr("cannot resolve 'nosuchhost.invalid'"));
  // TEST-NET-1, never a local address; a host with net.ipv4.ip_nonlocal_bind=1 binds it anyway.
  std::ifstream nonlocal("/proc/sys/net/ipv4/ip_nonlocal_bind");
  int nonlocal_bind = 0;
  nonlocal >> nonlocal_bind;
  if (nonlocal_bind == 0) {
    EXPECT_THAT(WhyTcpListenFails("192.0.2.1", 8001), HasSubstr("not an address of this machine"));
  }
  EXPECT_EQ(WhyTcpListenFails("127.0.0.1", 0), "") << "a free port binds";
}

TEST(ListenCheckTest, NamesWhyAUnixSocketCannotBeMade) {
  testing::TempDir dir("cs_listen_check");
  EXPECT_EQ(WhyUnixListenFails(dir.path() + "/no/such/dir/s.sock"),
            "directory '" + dir.path() + "/no/such/dir' does not exist");
  const std::string file = dir.path() + "/plain";
  std::ofstream(file) << "not a socket";
  EXPECT_THAT(WhyUnixListenFails(file), HasSubstr("a file that is not a socket is at that path"));
  EXPECT_THAT(WhyUnixListenFails(file + "/s.sock"), HasSubstr("is not a directory"));
  EXPECT_EQ(WhyUnixListenFails(dir.path() + "/fresh.sock"), "") << "nothing in the way";
}

}  // namespace
}  // namespace chronoserve::server
