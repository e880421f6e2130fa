// PlaceInstances: where a model's workers run, from its instance groups and the visible GPUs. And
// the start's loads: up to ModelLoadOptions::threads models at once (--model-load-thread-count),
// each named model once.
#include "server/model_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/manager_under_test.h"
#include "tests/server/start_barrier.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve::server {
namespace {

ModelSpec WithGroups(std::vector<InstanceGroupSpec> groups) {
  ModelSpec spec;
  spec.name = "m";
  spec.instance_groups = std::move(groups);
  return spec;
}

std::vector<int> Gpus(const std::vector<DevicePlacement>& placements) {
  std::vector<int> gpus;
  for (const DevicePlacement& p : placements) gpus.push_back(p.gpu);
  return gpus;
}

TEST(PlaceInstancesTest, GroupsBecomeWorkersOnTheirDevices) {
  InstanceGroupSpec cpu{InstanceKind::kCpu, 3, {}, ""};
  auto placed = PlaceInstances(WithGroups({cpu}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{-1, -1, -1}));

  InstanceGroupSpec automatic{InstanceKind::kAuto, 2, {}, ""};
  placed = PlaceInstances(WithGroups({automatic}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{0, 0, 1, 1})) << "count workers on every visible GPU";
  placed = PlaceInstances(WithGroups({automatic}), 0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{-1, -1})) << "KIND_AUTO without a GPU runs on the CPU";

  InstanceGroupSpec listed{InstanceKind::kGpu, 1, {1}, ""};
  placed = PlaceInstances(WithGroups({listed}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{1}));
}

TEST(PlaceInstancesTest, RefusesWhatCannotBePlacedNamingTheModel) {
  InstanceGroupSpec gpu{InstanceKind::kGpu, 1, {}, ""};
  auto placed = PlaceInstances(WithGroups({gpu}), 0);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("model 'm': instance_group asks for KIND_GPU"));

  InstanceGroupSpec missing{InstanceKind::kGpu, 1, {3}, ""};
  placed = PlaceInstances(WithGroups({missing}), 2);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("lists GPU 3 but only 2 GPU(s)"));

  // Each group passes the loader's 256, but together they ask for 5 x 256 workers.
  InstanceGroupSpec big{InstanceKind::kCpu, 256, {}, ""};
  placed = PlaceInstances(WithGroups({big, big, big, big, big}), 0);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(placed.status().message()),
              ::testing::HasSubstr("model 'm': its instance groups ask for 1280 workers; at most 1024 per model"));
  InstanceGroupSpec repeated{InstanceKind::kGpu, 256, {0, 0, 0, 0, 0}, ""};
  EXPECT_FALSE(PlaceInstances(WithGroups({repeated}), 1).ok()) << "a GPU listed five times";
  // Counted before anything is placed: 256 workers on a GPU listed 10^6 times (2.56e8 placements,
  // gigabytes) is refused at once, naming the count.
  InstanceGroupSpec flood{InstanceKind::kGpu, 256, std::vector<int>(1'000'000, 0), ""};
  placed = PlaceInstances(WithGroups({flood}), 1);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("ask for 256000000 workers"));
  EXPECT_TRUE(PlaceInstances(WithGroups({big, big, big, big}), 0).ok()) << "1024 is allowed";
}

// A repository of `names`, each a small MLP on the CPU.
void WriteMlps(const std::string& repository, const std::vector<std::string>& names) {
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  for (const std::string& name : names) ASSERT_TRUE(examples::WriteMlp(repository, name, o).ok()) << name;
}

// With 4 threads the start's four models load at once: each load waits, as it starts, until all
// four have started (one after another, the first would wait out its timeout alone). Every model
// then serves.
TEST(ModelManagerLoadTest, TheStartLoadsUpToThreadsModelsAtOnce) {
  testing::TempDir repo("cs_parallel_loads");
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  WriteMlps(repo.path(), names);
  testing::ManagerUnderTest t;
  testing::StartBarrier barrier(4);
  ModelLoadOptions options;
  options.threads = 4;
  options.load_started = barrier.Hook();
  auto manager = t.Make(options);
  ASSERT_TRUE(manager->LoadRepository(repo.path()).ok());
  EXPECT_THAT(barrier.alone(), ::testing::IsEmpty()) << "loads that never saw the other three start";
  EXPECT_EQ(barrier.started(), 4);
  for (const std::string& name : names) EXPECT_TRUE(t.registry.Find(name, "").ok()) << name;
  EXPECT_TRUE(t.registry.AllReady());
  t.registry.StopAll();
}

// The server's start passes --model-load-thread-count to its loads: three models of other weights
// load at once, and each then answers over gRPC as LibTorch computes its own file's outputs.
TEST(ModelManagerLoadTest, TheServersStartLoadsItsModelsAtOnceEachServingItsOwnWeights) {
  testing::TempDir repo("cs_parallel_start");
  const std::vector<std::string> names = {"a", "b", "c"};
  for (size_t i = 0; i < names.size(); ++i) {
    examples::ModelOptions o;
    o.max_batch_size = 4;
    o.instance_kind = "KIND_CPU";
    o.seed = 40 + i;
    ASSERT_TRUE(examples::WriteMlp(repo.path(), names[i], o).ok());
  }
  testing::StartBarrier barrier(3);
  ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_load_threads = 3;
  options.start_load_started = barrier.Hook();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(barrier.alone(), ::testing::IsEmpty());
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(9);
  const client::Tensor input{"INPUT__0", DataType::kFp32, {2, 64}, RandomTensorBytes(DataType::kFp32, 2 * 64, rng)};
  for (const std::string& name : names) {
    auto result = c->Infer(name, {input});
    ASSERT_TRUE(result.ok()) << name << ": " << result.status();
    EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/" + name + "/1/model.pt", {input}, result->outputs), "") << name;
  }
  server->Shutdown();
}

// One thread loads the named models one after another in the order named: as each starts, every
// model before it serves already. A name given twice loads once; a name the repository lacks is
// failed (NOT_FOUND, naming what it has) and the others load.
TEST(ModelManagerLoadTest, OneThreadLoadsInOrderEachNameOnce) {
  testing::TempDir repo("cs_ordered_loads");
  WriteMlps(repo.path(), {"a", "b", "c"});
  testing::ManagerUnderTest t;
  std::vector<std::string> order;
  std::vector<std::string> early;  // loads that started before an earlier model served
  ModelLoadOptions options;  // threads 1, the default
  options.load_started = [&](const std::string& model, int64_t) {
    for (const std::string& before : order) {
      if (!t.registry.Serves(before)) early.push_back(model + " before " + before + " served");
    }
    order.push_back(model);
  };
  auto manager = t.Make(options);
  ASSERT_TRUE(manager->LoadModels(repo.path(), {"c", "a", "c", "missing", "b"}).ok());
  EXPECT_THAT(order, ::testing::ElementsAre("c", "a", "b"));
  EXPECT_TRUE(early.empty()) << ::testing::PrintToString(early);
  auto missing = t.registry.Find("missing", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("(it has a, b, c)"));
  for (const std::string& name : {"a", "b", "c"}) EXPECT_TRUE(t.registry.Find(name, "").ok()) << name;
  t.registry.StopAll();
}

}  // namespace
}  // namespace chronoserve::server
