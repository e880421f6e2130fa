// The real binary raises its soft open-file limit to the hard one at start-up, saying so: each
// registered shared-memory region holds a descriptor, and a soft limit of 1024 would refuse
// registrations long before the machine runs short.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "tests/client/subprocess.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

TEST(OpenFileLimitTest, TheServerRaisesItsSoftLimitToTheHardOne) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max <= 256) GTEST_SKIP() << "hard limit " << saved.rlim_max;
  rlimit low = saved;
  low.rlim_cur = 256;  // inherited by the child
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0) << std::strerror(errno);
  absl::Cleanup restore = [&saved] { ::setrlimit(RLIMIT_NOFILE, &saved); };
  testing::TempDir repo("cs_nofile");
  auto process = testing::Subprocess::Start({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port", "0",
                                             "--allow-metrics", "false", "--gpu-monitor-interval-ms", "0"});
  std::move(restore).Invoke();
  ASSERT_TRUE(process.ok()) << process.status();
  auto& server = **process;
  const std::string hard = saved.rlim_max == RLIM_INFINITY ? "" : std::to_string(saved.rlim_max);
  EXPECT_TRUE(server.WaitForOutput(absl::StrCat("open-file limit raised from 256 to ", hard), absl::Seconds(60)).ok())
      << server.output();
  EXPECT_TRUE(server.WaitForOutput("server READY", absl::Seconds(60)).ok()) << server.output();
  server.Signal(SIGTERM);
  const auto code = server.WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << server.output();
}

}  // namespace
}  // namespace chronoserve
