// --host-policy values (Triton's NAME,SETTING=VALUE form) and which CPUs a worker is pinned to.
#include "server/core/host_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chronoserve::server {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(HostPolicyTest, ParsesPoliciesAndCpuListsWithCommas) {
  auto policies = ParseHostPolicies({"gpu_0,cpu-cores=14-15", "fast, cpu-cores = 0-1,8, nice=-7", "cpu,cpu-cores=3",
                                     "gpu_1,nice= 5", "gpu_1,cpu-cores=2"});
  ASSERT_TRUE(policies.ok()) << policies.status();
  ASSERT_EQ(policies->size(), 4u);
  EXPECT_THAT(policies->at("gpu_0").cpu_cores, ElementsAre(14, 15));
  EXPECT_EQ(policies->at("gpu_0").nice, std::nullopt);
  EXPECT_THAT(policies->at("fast").cpu_cores, ElementsAre(0, 1, 8)) << "the CPU list ends at the next SETTING=";
  EXPECT_EQ(policies->at("fast").nice, -7);
  EXPECT_THAT(policies->at("cpu").cpu_cores, ElementsAre(3));
  EXPECT_THAT(policies->at("gpu_1").cpu_cores, ElementsAre(2)) << "one policy over two flags";
  EXPECT_EQ(policies->at("gpu_1").nice, 5);
  auto none = ParseHostPolicies({});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
}

TEST(HostPolicyTest, RejectsBadValuesNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    const char* message;
  };
  const Case cases[] = {
      {{"gpu_0"}, "'gpu_0': no setting"},
      {{",cpu-cores=1"}, "no policy name"},
      {{"cpu-cores=1"}, "no policy name"},
      {{"gpu_0,numa-node=0"}, "numa-node is not supported"},
      {{"gpu_0,cores=1"}, "unknown setting 'cores'"},
      {{"gpu_0,1-2"}, "'1-2' is not SETTING=VALUE"},
      {{"gpu_0,cpu-cores="}, "empty CPU list"},
      {{"gpu_0,cpu-cores=2-1"}, "the range ends below its start"},
      {{"gpu_0,cpu-cores=1", "gpu_0,cpu-cores=2"}, "cpu-cores given twice"},
      {{"gpu_0,nice=-21"}, "nice '-21' is not a whole number from -20 to 19"},
      {{"gpu_0,nice=20"}, "nice '20' is not a whole number from -20 to 19"},
      {{"gpu_0,nice=high"}, "nice 'high' is not"},
      {{"gpu_0,nice="}, "nice '' is not"},
      {{"gpu_0,nice=1", "gpu_0,nice=2"}, "nice given twice"},
  };
  for (const Case& c : cases) {
    auto policies = ParseHostPolicies(c.flags);
    ASSERT_FALSE(policies.ok()) << c.flags.back();
    EXPECT_EQ(policies.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(policies.status().message()), HasSubstr(c.message)) << c.flags.back();
    EXPECT_THAT(std::string(policies.status().message()), HasSubstr("--host-policy '")) << c.flags.back();
  }
}

TEST(HostPolicyTest, WorkersTakeTheirGroupsPolicyOrTheDevicesDefault) {
  auto policies = ParseHostPolicies({"gpu_1,cpu-cores=6-7", "cpu,cpu-cores=0", "fast,cpu-cores=3,nice=-5"});
  ASSERT_TRUE(policies.ok()) << policies.status();
  EXPECT_EQ(DefaultHostPolicyName(-1), "cpu");
  EXPECT_EQ(DefaultHostPolicyName(1), "gpu_1");
  auto cpus = [&](const std::string& configured, int gpu) {
    auto result = WorkerHostPolicy(*policies, configured, gpu, "m");
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->cpu_cores : std::vector<int>{-1};
  };
  EXPECT_THAT(cpus("", 1), ElementsAre(6, 7));
  EXPECT_THAT(cpus("", -1), ElementsAre(0));
  EXPECT_THAT(cpus("", 0), IsEmpty()) << "no gpu_0 policy: not pinned";
  EXPECT_THAT(cpus("fast", 1), ElementsAre(3)) << "the group's policy wins over the default";
  EXPECT_EQ(WorkerHostPolicy(*policies, "fast", 1, "m")->nice, -5);
  EXPECT_EQ(WorkerHostPolicy(*policies, "", 1, "m")->nice, std::nullopt);
  auto unknown = WorkerHostPolicy(*policies, "fastest", 0, "policy_net");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("model 'policy_net': instance_group host_policy 'fastest' names no --host-policy"));
}

}  // namespace
}  // namespace chronoserve::server
