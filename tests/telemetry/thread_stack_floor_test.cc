// The stack floor (server/telemetry/thread_stack_floor.h) in a process with more static TLS than
// CivetWeb's 100 KiB thread stacks hold, as a process linked with CUDA LibTorch has: this test binary
// carries 512 KiB of its own (kBigTls). pthread_attr_setstacksize here is the floor's; a thread made
// with a small asked-for stack starts and has its stack; and /metrics starts and answers a scrape
// (CivetWeb's threads could not start before the floor).
#include "server/telemetry/thread_stack_floor.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <cstring>
#include <memory>
#include <string>

#include "server/telemetry/telemetry.h"
#include "tests/telemetry/metrics_scrape.h"

namespace chronoserve::server::telemetry {
namespace {

// Static TLS of this executable: more than a 100 KiB stack can hold.
constexpr size_t kBigTlsBytes = 512 * 1024;
thread_local char kBigTls[kBigTlsBytes];

TEST(ThreadStackFloorTest, CountsTheStaticTlsAndAddsItToTheSizeAsked) {
  kBigTls[0] = 1;  // odr-used: the array stays in this executable's TLS segment
  EXPECT_GE(StaticTlsBytes(), kBigTlsBytes);
  const size_t asked = 100 * 1024;  // CivetWeb's
  EXPECT_GE(StackSizeFor(asked), asked + StaticTlsBytes());
  EXPECT_EQ(StackSizeFor(asked) % 4096, 0u);
  EXPECT_EQ(StackSizeFor(1), 1u) << "below PTHREAD_STACK_MIN: passed through, refused as before";
  EXPECT_EQ(StackSizeFor(~size_t{0} - 10), ~size_t{0} - 10) << "no overflow";

  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, asked), 0);
  size_t set = 0;
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &set), 0);
  EXPECT_EQ(set, StackSizeFor(asked)) << "this process's pthread_attr_setstacksize is the floor's";
  EXPECT_EQ(pthread_attr_setstacksize(&attr, 1), EINVAL) << "too small is still refused";

  // A thread with the stack asked for: it starts (glibc takes the TLS from the stack) and has the
  // asked-for room left, its TLS its own.
  pthread_t thread;
  auto body = [](void*) -> void* {
    volatile char room[64 * 1024];
    std::memset(const_cast<char*>(room), 7, sizeof room);
    kBigTls[kBigTlsBytes - 1] = room[100];
    return reinterpret_cast<void*>(static_cast<intptr_t>(kBigTls[kBigTlsBytes - 1] + kBigTls[0]));
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, nullptr), 0) << "a 100 KiB stack beside 512 KiB of TLS";
  void* result = nullptr;
  ASSERT_EQ(pthread_join(thread, &result), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(result), 7) << "the thread's own TLS (kBigTls[0] is 0 there)";
  pthread_attr_destroy(&attr);
}

TEST(ThreadStackFloorTest, TheMetricsEndpointStartsBesideLargeStaticTls) {
  kBigTls[0] = 1;
  TelemetryOptions options;
  options.metrics.host = "127.0.0.1";
  options.metrics.port = 0;
  options.gpu.enabled = false;
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  ASSERT_TRUE((*telemetry)->Start().ok());
  const int port = (*telemetry)->metrics_port();
  ASSERT_GT(port, 0) << "CivetWeb's threads did not start: /metrics is off";
  EXPECT_NE(testing::ScrapeMetrics(port).find("# TYPE"), std::string::npos);
  (*telemetry)->Shutdown();
}

}  // namespace
}  // namespace chronoserve::server::telemetry
