// --host-policy and --host-keep-warm-ms on the real server: a worker is pinned to its policy's CPUs and runs at its nice
// value (seen in /proc, as an operator would check it) and still answers correctly; a model naming an unknown policy, or CPUs
// that cannot be used, fails alone with a message that says so; the binary refuses a bad flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "client/inference_client.h"
#include "common/cpu_set.h"
#include "common/tensor_data.h"
#include "tests/client/subprocess.h"
#include "tests/server/proc_threads.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;
using ::testing::HasSubstr;
using testing::CpusAllowedList;
using testing::StatField;
using testing::ThreadDirs;

constexpr absl::Duration kWait = absl::Seconds(60);

// Cpus_allowed_list of every thread of this process named `name`.
std::vector<std::string> ThreadCpuLists(const std::string& name) {
  std::vector<std::string> lists;
  for (const std::string& task : ThreadDirs(name)) lists.push_back(CpusAllowedList(task));
  return lists;
}

// The nice value (field 19 of /proc/.../stat) of every thread of this process named `name`.
std::vector<int> ThreadNiceValues(const std::string& name) {
  std::vector<int> values;
  for (const std::string& task : ThreadDirs(name)) {
    int nice = 100;
    if (absl::SimpleAtoi(StatField(task, 19), &nice)) values.push_back(nice);
  }
  return values;
}

Tensor MlpInput(int items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor{"INPUT__0", DataType::kFp32, {items, 64}, RandomTensorBytes(DataType::kFp32, items * 64, rng)};
}

server::ServerOptions Options(const std::string& repo, const std::vector<std::string>& flags) {
  server::ServerOptions options = testing::TestServerOptions(repo);
  options.serving_warmup_requests = 0;
  auto policies = server::ParseHostPolicies(flags);
  EXPECT_TRUE(policies.ok()) << policies.status();
  if (policies.ok()) options.host_policies = *policies;
  return options;
}

TEST(HostPolicyServerTest, PinsWorkersByTheirDevicesDefaultPolicyAndServes) {
  const std::vector<int> allowed = CurrentThreadCpus();
  ASSERT_FALSE(allowed.empty());
  const int target = allowed.back();
  testing::TempDir repo("cs_host_policy");
  examples::ModelOptions cpu;
  cpu.instance_kind = "KIND_CPU";
  cpu.instance_count = 2;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", cpu).ok());
  auto server = testing::StartServer(Options(repo.path(), {"cpu,cpu-cores=" + std::to_string(target)}));
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(ThreadCpuLists("cs-worker"),
              ::testing::ElementsAre(std::to_string(target), std::to_string(target)))
      << "both workers of the KIND_CPU group take the 'cpu' policy";
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = MlpInput(3, 41);
  auto a = c->Infer("mlp", {input});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->outputs.size(), 1u);
  EXPECT_EQ(a->outputs[0].shape, (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/mlp/1/model.pt", {input}, a->outputs), "");
  auto b = c->Infer("mlp", {input});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->outputs[0].data, b->outputs[0].data);
  server->Shutdown();
}

TEST(HostPolicyServerTest, WorkersRunAtTheirPolicysNiceValue) {
  testing::TempDir repo("cs_host_policy_nice");
  examples::ModelOptions cpu;
  cpu.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", cpu).ok());
  const int nice = std::min(CurrentThreadNice() + 4, 19);  // lowering needs no privilege
  auto server = testing::StartServer(Options(repo.path(), {"cpu,nice=" + std::to_string(nice)}));
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(ThreadNiceValues("cs-worker"), ::testing::ElementsAre(nice));
  EXPECT_THAT(ThreadCpuLists("cs-worker"), ::testing::ElementsAre(FormatCpuList(CurrentThreadCpus())))
      << "nice alone does not pin";
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = MlpInput(2, 17);
  auto a = c->Infer("mlp", {input});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->outputs.size(), 1u);
  EXPECT_EQ(a->outputs[0].shape, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/mlp/1/model.pt", {input}, a->outputs), "");
  server->Shutdown();
}

TEST(HostPolicyServerTest, NoPolicyLeavesWorkersUnpinned) {
  testing::TempDir repo("cs_host_policy_none");
  examples::ModelOptions cpu;
  cpu.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", cpu).ok());
  // A policy for a GPU this model does not use changes nothing for its CPU worker.
  auto server = testing::StartServer(Options(repo.path(), {"gpu_0,cpu-cores=0"}));
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(ThreadCpuLists("cs-worker"), ::testing::ElementsAre(FormatCpuList(CurrentThreadCpus())));
  server->Shutdown();
}

TEST(HostPolicyServerTest, UnknownPolicyOrUnusableCpusFailTheModelAlone) {
  testing::TempDir repo("cs_host_policy_bad");
  examples::ModelOptions good;
  good.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "good", good).ok());
  examples::ModelOptions named = good;
  named.instance_kind = "KIND_CPU host_policy: \"fastest\"";  // the group line takes it verbatim
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "named", named).ok());
  examples::ModelOptions far = good;
  far.instance_kind = "KIND_CPU host_policy: \"far\"";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "far", far).ok());
  auto server = testing::StartServer(Options(repo.path(), {"far,cpu-cores=1022-1023"}));
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const auto good_ready = c->ModelReady("good");
  ASSERT_TRUE(good_ready.ok()) << good_ready.status();
  EXPECT_TRUE(*good_ready);
  // Counted before any request runs on a worker: LibTorch's OpenMP threads, started from a worker
  // thread on its first forward, inherit the name cs-worker (16 CPUs: more than one).
  EXPECT_THAT(ThreadCpuLists("cs-worker"), ::testing::SizeIs(1)) << "only the good model's worker runs";
  const Tensor good_input = MlpInput(1, 3);
  auto good_answer = c->Infer("good", {good_input});
  ASSERT_TRUE(good_answer.ok()) << good_answer.status();
  EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/good/1/model.pt", {good_input}, good_answer->outputs), "");
  auto unknown = c->Infer("named", {MlpInput(1, 3)});
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("model 'named': instance_group host_policy 'fastest' names no --host-policy"));
  auto unusable = c->Infer("far", {MlpInput(1, 3)});
  if (CurrentThreadCpus().back() < 1022) {
    ASSERT_EQ(unusable.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(unusable.status().message()),
                HasSubstr("model 'far' worker 0: pinning a thread to CPUs 1022-1023 failed"));
  }
  server->Shutdown();
}

// --host-keep-warm-ms: the spinners start parked, spin from a client's request on, and are gone
// after Shutdown; a negative value is refused.
TEST(HostKeepWarmServerTest, RequestsStartTheSpinnersAndShutdownStopsThem) {
  testing::TempDir repo("cs_host_keep_warm");
  examples::ModelOptions cpu;
  cpu.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", cpu).ok());
  server::ServerOptions options = Options(repo.path(), {});
  options.host_keep_warm_ms = 60000;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const server::HostKeepWarm* warm = server->host_keep_warm();
  ASSERT_NE(warm, nullptr);
  const std::vector<int> cpus = CurrentThreadCpus();
  EXPECT_EQ(warm->cpus(), cpus) << "every CPU the server may run on";
  EXPECT_EQ(warm->spinning(), 0) << "no request yet (serving warm-up off)";
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = MlpInput(2, 29);
  auto a = c->Infer("mlp", {input});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->outputs.size(), 1u);
  EXPECT_EQ(a->outputs[0].shape, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/mlp/1/model.pt", {input}, a->outputs), "");
  EXPECT_TRUE(warm->WaitForSpinning(static_cast<int>(cpus.size()), kWait)) << "a request set them spinning";
  EXPECT_THAT(ThreadDirs("cs-spin-" + std::to_string(cpus.front())), ::testing::SizeIs(1));
  server->Shutdown();
  EXPECT_EQ(server->host_keep_warm(), nullptr);
  EXPECT_THAT(ThreadDirs("cs-spin-" + std::to_string(cpus.front())), ::testing::IsEmpty()) << "joined at shutdown";

  options.host_keep_warm_ms = -1;
  auto refused = server::Server::Create(options);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--host-keep-warm-ms -1 is negative"));
}

TEST(HostPolicyServerTest, BinaryRefusesABadFlag) {
  testing::TempDir repo("cs_host_policy_flag");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", examples::ModelOptions{}).ok());
  auto refused = testing::RunProgram({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port", "0",
                                      "--allow-metrics", "false", "--host-policy", "gpu_0,cpu-cores=3-1"},
                                     kWait);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->first, 2);
  EXPECT_THAT(refused->second, HasSubstr("--host-policy 'gpu_0,cpu-cores=3-1': CPU list item '3-1'"));
}

}  // namespace
}  // namespace chronoserve
