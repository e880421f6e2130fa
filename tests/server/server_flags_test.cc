// The real binary refuses out-of-range integer flags at start, with exit code 2 (as its other flag
// errors) and a message naming the flag, the value and the range; profile's flags too. --help and
// --version exit 0. A start that cannot bind its port exits 1, naming the address, without gRPC's
// noise about completion queues.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/client/subprocess.h"
#include "tests/server/held_port.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

TEST(ServerFlagsTest, BinaryRefusesOutOfRangeIntegersWithExitTwoNamingTheRange) {
  testing::TempDir repo("cs_flags");
  const std::vector<std::vector<std::string>> rows = {
      {"--warmup-runs", "0", "--warmup-runs: '0' is not an integer from 1 to 1000000"},
      {"--grpc-port", "70000", "--grpc-port: '70000' is not an integer from 0 to 65535"},
      {"--exit-timeout-secs", "-1", "--exit-timeout-secs: '-1' is not an integer from 0 to 86400"},
      {"--metrics-port", "0x50", "--metrics-port: '0x50' is not an integer from 0 to 65535"},
      {"--max-queue-mib", "2000000000", "--max-queue-mib: '2000000000' is not an integer from 0 to 1073741824"},
      {"--max-stream-unsent-mib", "-1", "--max-stream-unsent-mib: '-1' is not an integer from 0 to 1073741824"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row[0] + " " + row[1]);
    // Any port and no metrics endpoint first (the row's flag comes later and wins): were a bad value
    // ever accepted, the server started would bind no default port.
    auto refused = testing::RunProgram({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port", "0",
                                        "--allow-metrics", "false", row[0], row[1]},
                                       absl::Seconds(60));
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->first, 2);
    EXPECT_THAT(refused->second, ::testing::HasSubstr(row[2]));
  }
  auto profile = testing::RunProgram({CHRONOSERVE_BIN, "profile", repo.path(), "--repetitions", "0"}, absl::Seconds(60));
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->first, 2);
  EXPECT_THAT(profile->second, ::testing::HasSubstr("--repetitions: '0' is not an integer from 10 to 1000000"));
  auto version = testing::RunProgram({CHRONOSERVE_BIN, "--version"}, absl::Seconds(60));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->first, 0);
  EXPECT_THAT(version->second, ::testing::MatchesRegex("chronoserve [0-9.]+ with LibTorch [0-9.a-z+]+ \\((CPU|CUDA)\\)\n"));
  auto help = testing::RunProgram({CHRONOSERVE_BIN, "--help"}, absl::Seconds(60));
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_EQ(help->first, 0);
  EXPECT_THAT(help->second, ::testing::HasSubstr("--exit-timeout-secs"));
}

// The log of a start that failed says why and nothing misleading: gRPC logged "CompletionQueue
// shutdown being shutdown before its server" as the server stopped, as if the shutdown had been
// done in the wrong order.
TEST(ServerFlagsTest, APortInUseExitsOneNamingItWithoutCompletionQueueNoise) {
  testing::TempDir repo("cs_taken");
  testing::HeldPort held;
  ASSERT_GT(held.port, 0);
  auto refused = testing::RunProgram({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port",
                                      std::to_string(held.port), "--metrics-port", "0"},
                                     absl::Seconds(60));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->first, 1) << refused->second;
  EXPECT_THAT(refused->second, ::testing::HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(held.port) +
                                                    ": Address already in use"));
  EXPECT_THAT(refused->second, ::testing::Not(::testing::HasSubstr("CompletionQueue"))) << refused->second;
}

// --log-format and --log-info reach the binary's whole log, gRPC's own lines included: the same
// failed start, in ISO8601 and without its INFO lines, says only why it failed, every line Triton's
// ISO8601 line (gRPC's bind error was its own format before).
TEST(ServerFlagsTest, LogFlagsShapeTheBinarysLog) {
  testing::TempDir repo("cs_logflags");
  testing::HeldPort held;
  ASSERT_GT(held.port, 0);
  auto refused = testing::RunProgram({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port",
                                      std::to_string(held.port), "--metrics-port", "0", "--log-format", "ISO8601",
                                      "--log-info", "false"},
                                     absl::Seconds(60));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->first, 1) << refused->second;
  EXPECT_THAT(refused->second,
              ::testing::MatchesRegex("([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z [WE] [0-9]+ [a-z0-9_]+\\.cc:[0-9]+\\] "
                                      "[^\n]*\n)+"));
  EXPECT_THAT(refused->second, ::testing::HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(held.port)));
  EXPECT_THAT(refused->second, ::testing::HasSubstr("Z E ")) << "an error line";
  EXPECT_THAT(refused->second, ::testing::HasSubstr(" chttp2_server.cc:")) << "gRPC's, in our format";
  EXPECT_THAT(refused->second, ::testing::Not(::testing::HasSubstr("Z I "))) << "no INFO line";
}

}  // namespace
}  // namespace chronoserve
