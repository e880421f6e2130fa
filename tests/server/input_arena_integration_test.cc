// The input arena end to end: the backend's gather uses requests that lie back to back in the arena
// in place (after putting the batch in arena order) and copies anything else; and the real server
// over gRPC answers every request with its own rows whether the arena is sized automatically, off,
// or so small that it is often full and wraps, for one-input and two-input models, and holds no
// region once everything is answered.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "client/inference_client.h"
#include "common/cache_bypass.h"
#include "common/clock.h"
#include "common/tensor_data.h"
#include "server/backend/torch_batch_io.h"
#include "server/backend/torch_device_path.h"
#include "server/core/input_arena.h"
#include "server/server.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using client::Tensor;
using server::Batch;
using server::InferRequest;
using server::InputArena;

// A one-input model spec: FP32 rows of 16 values, batched up to 64.
server::ModelSpec RowSpec() {
  server::ModelSpec spec;
  spec.name = "rows";
  spec.max_batch_size = 64;
  server::TensorSpec in;
  in.name = "INPUT__0";
  in.dtype = DataType::kFp32;
  in.dims = {16};
  spec.inputs.push_back(in);
  return spec;
}

// A request of `items` rows of distinct bytes (seeded by `seed`); its input in `arena` when given
// (and the arena has room), else in its own string.
std::unique_ptr<InferRequest> RowRequest(int64_t items, uint32_t seed, InputArena* arena) {
  auto r = std::make_unique<InferRequest>();
  r->batch_items = items;
  server::InputTensor in;
  in.index = 0;
  in.dtype = DataType::kFp32;
  in.shape = {items, 16};
  std::mt19937 rng(seed);
  std::string bytes(static_cast<size_t>(items) * 16 * 4, '\0');
  for (char& c : bytes) c = static_cast<char>(1 + rng() % 250);
  in.Own(std::move(bytes));
  r->inputs.push_back(std::move(in));
  server::InputTensor& kept = r->inputs.back();
  if (arena != nullptr) {
    char* region = nullptr;
    r->arena_lease = arena->Reserve(&kept.byte_size, &region);
    if (r->arena_lease.held()) {
      std::memcpy(region, kept.data, kept.byte_size);
      kept.data = region;
      kept.in_arena = true;
    }
  }
  return r;
}

std::shared_ptr<InputArena> PlainArena(size_t capacity) {
  auto arena = InputArena::Create(1, capacity, /*pinned=*/false, [](size_t bytes) {
    return absl::StatusOr<std::shared_ptr<char>>(InputArena::OrdinaryMemory(bytes));
  });
  return arena.ok() ? *arena : nullptr;
}

// The batch's input bytes, request after request, in batch order.
std::string Concatenated(const Batch& batch) {
  std::string all;
  for (const auto& r : batch) all.append(*r->inputs[0].owned_data);
  return all;
}

TEST(ArenaGatherTest, BackToBackRequestsAreUsedInPlaceInArenaOrder) {
  auto arena = PlainArena(1 << 16);
  ASSERT_NE(arena, nullptr);
  Batch batch;
  for (int k = 0; k < 5; ++k) batch.push_back(RowRequest(1 + k % 3, 100 + k, arena.get()));
  const char* first = batch.front()->inputs[0].data;
  std::swap(batch[0], batch[3]);  // queued in another order than they reserved their regions
  std::swap(batch[1], batch[4]);
  server::OrderByArena(batch);
  for (size_t k = 1; k < batch.size(); ++k) {
    ASSERT_LT(batch[k - 1]->inputs[0].data, batch[k]->inputs[0].data) << "arena order restored";
  }
  auto path = server::MakeCpuPath(SteadyClock::Get());
  const server::ModelSpec spec = RowSpec();
  auto staged = server::GatherInputs(spec, batch, *path);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(staged->size(), 1u);
  const server::StagedInput& in = (*staged)[0];
  EXPECT_TRUE(in.in_place);
  EXPECT_EQ(in.data, first) << "the batch's input is the arena run itself";
  EXPECT_THAT(in.shape, ::testing::ElementsAre(server::BatchItems(batch), 16));
  EXPECT_EQ(std::string(in.data, in.bytes), Concatenated(batch));
}

TEST(ArenaGatherTest, AGapOrARequestOutsideTheArenaIsGatheredInBatchOrder) {
  auto arena = PlainArena(1 << 16);
  ASSERT_NE(arena, nullptr);
  auto path = server::MakeCpuPath(SteadyClock::Get());
  const server::ModelSpec spec = RowSpec();
  {
    Batch batch;
    batch.push_back(RowRequest(2, 1, arena.get()));
    auto skipped = RowRequest(1, 2, arena.get());  // reserved between them, not in this batch
    batch.push_back(RowRequest(3, 3, arena.get()));
    auto staged = server::GatherInputs(spec, batch, *path);
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_FALSE((*staged)[0].in_place);
    EXPECT_EQ(std::string((*staged)[0].data, (*staged)[0].bytes), Concatenated(batch));
  }
  {
    Batch batch;
    batch.push_back(RowRequest(1, 4, arena.get()));
    batch.push_back(RowRequest(2, 5, nullptr));  // kept its bytes where they were
    batch.push_back(RowRequest(1, 6, arena.get()));
    std::swap(batch[0], batch[2]);
    const InferRequest* head = batch.front().get();
    server::OrderByArena(batch);
    EXPECT_EQ(batch.front().get(), head) << "only a batch wholly in the arena is reordered";
    auto staged = server::GatherInputs(spec, batch, *path);
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_FALSE((*staged)[0].in_place);
    EXPECT_EQ(std::string((*staged)[0].data, (*staged)[0].bytes), Concatenated(batch));
  }
  EXPECT_EQ(arena->live_regions(), 0u) << "every request gave its region back";
}

// --input-arena-mib as ServerOptions::input_arena_bytes: auto, off, and 2 KiB (a few requests);
// with --input-arena-store as ServerOptions::input_arena_store: auto, and each way of writing
// (adaptive: the first write streams, the writes that follow within 5 ms are cached).
struct ArenaCase {
  int64_t bytes;
  std::optional<server::ArenaStore> store;
};
class InputArenaServerTest : public ::testing::TestWithParam<ArenaCase> {};

TEST_P(InputArenaServerTest, EveryRequestGetsItsOwnRowsAndNoRegionOutlivesItsRequest) {
  testing::TempDir repo("cs_input_arena");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  mlp.max_queue_delay_us = 500;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  examples::ModelOptions addsub;
  addsub.max_batch_size = 4;
  addsub.max_queue_delay_us = 500;
  ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub", addsub).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.input_arena_bytes = GetParam().bytes;
  options.input_arena_store = GetParam().store;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto mlp_runtime = server->registry().Find("mlp", "");
  auto addsub_runtime = server->registry().Find("addsub", "");
  ASSERT_TRUE(mlp_runtime.ok() && addsub_runtime.ok());
  for (const auto* runtime : {mlp_runtime->get(), addsub_runtime->get()}) {
    const InputArena* arena = runtime->input_arena();
    if (GetParam().bytes == 0) {
      EXPECT_EQ(arena, nullptr) << runtime->spec().name;
      continue;
    }
    ASSERT_NE(arena, nullptr) << runtime->spec().name;
    EXPECT_EQ(arena->inputs(), static_cast<int>(runtime->spec().inputs.size()));
    EXPECT_FALSE(arena->pinned()) << "CPU workers: ordinary memory";
    if (GetParam().bytes > 0) EXPECT_EQ(arena->capacity(), static_cast<size_t>(GetParam().bytes));
    EXPECT_EQ(runtime->arena_store(), GetParam().store.value_or(server::ArenaStore::kCached)) << runtime->spec().name;
  }

  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  const std::string mlp_path = repo.path() + "/mlp/1/model.pt";
  constexpr int kThreads = 6, kPerThread = 16;
  absl::Mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto c = testing::ConnectTestClient(address);
      client::InferOptions call;
      call.timeout = std::chrono::milliseconds(30000);
      for (int i = 0; i < kPerThread; ++i) {
        std::mt19937_64 rng(9100 + t * 100 + i);
        std::string error;
        if (i % 2 == 0) {
          const int64_t items = 1 + (t + i) % 3;
          const Tensor in{"INPUT__0", DataType::kFp32, {items, 64}, RandomTensorBytes(DataType::kFp32, items * 64, rng)};
          auto result = c->Infer("mlp", {in}, call);
          const auto want = testing::TorchReference(mlp_path, {in});
          if (!result.ok()) {
            error = std::string(result.status().message());
          } else if (std::string mismatch = testing::ReferenceMismatch(result->outputs[0].data, want[0]); !mismatch.empty()) {
            error = "mlp: " + mismatch;
          }
        } else {
          const int64_t items = 1 + i % 2, length = 3 + 2 * (t % 2);  // two lengths: never merged
          const Tensor a{"INPUT__0", DataType::kFp32, {items, length}, RandomTensorBytes(DataType::kFp32, items * length, rng)};
          const Tensor b{"INPUT__1", DataType::kFp32, {items, length}, RandomTensorBytes(DataType::kFp32, items * length, rng)};
          auto result = c->Infer("addsub", {a, b}, call);
          error = result.ok() ? testing::AddSubMismatch(a, b, result->outputs) : std::string(result.status().message());
        }
        if (!error.empty()) {
          absl::MutexLock lock(&mu);
          errors.push_back(error);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  // Every accepted request answered and destroyed; a failure, not a hang, if Shutdown does not return.
  testing::BackgroundShutdown stopper(server, absl::Seconds(30));
  ASSERT_TRUE(stopper.WaitDone(absl::Seconds(30))) << "Shutdown did not return within 30 s";
  for (const auto* runtime : {mlp_runtime->get(), addsub_runtime->get()}) {
    if (runtime->input_arena() != nullptr) EXPECT_EQ(runtime->input_arena()->live_regions(), 0u) << runtime->spec().name;
  }
}

std::string ArenaName(const ::testing::TestParamInfo<ArenaCase>& info) {
  std::string name = info.param.bytes < 0 ? "Auto" : info.param.bytes == 0 ? "Off" : "Bytes" + std::to_string(info.param.bytes);
  if (info.param.store.has_value()) {
    std::string store = server::ArenaStoreName(*info.param.store);
    store[0] = static_cast<char>(std::toupper(store[0]));
    name += store + "Stores";
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(ArenaSizes, InputArenaServerTest,
                         ::testing::Values(ArenaCase{-1, std::nullopt}, ArenaCase{0, std::nullopt},
                                           ArenaCase{2048, std::nullopt},
                                           ArenaCase{-1, server::ArenaStore::kStreaming},
                                           ArenaCase{2048, server::ArenaStore::kEvicted},
                                           ArenaCase{-1, server::ArenaStore::kAdaptive}),
                         ArenaName);

}  // namespace
}  // namespace chronoserve
