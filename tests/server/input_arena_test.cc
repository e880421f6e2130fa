// InputArena: regions reserved one after another lie back to back, a ring that has no contiguous
// room refuses at once, wraps to its start when only the start has room, gives space back only as
// its oldest regions are freed (in any order), and starts again at 0 when empty; under eight
// threads no two live regions overlap.
#include "server/core/input_arena.h"

#include "server/scheduler/model_runtime.h"
#include "tests/fakes/recording_instance.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

namespace chronoserve::server {
namespace {

std::shared_ptr<InputArena> MakeArena(int inputs, size_t capacity) {
  auto arena = InputArena::Create(inputs, capacity, /*pinned=*/false, [](size_t bytes) {
    return absl::StatusOr<std::shared_ptr<char>>(InputArena::OrdinaryMemory(bytes));
  });
  EXPECT_TRUE(arena.ok()) << arena.status();
  return arena.ok() ? *arena : nullptr;
}

// One input's reservation: the lease and where its region starts.
struct Held {
  InputArena::Lease lease;
  char* at = nullptr;
};

Held Take(InputArena& arena, size_t bytes) {
  Held h;
  h.lease = arena.Reserve(&bytes, &h.at);
  return h;
}

TEST(InputArenaTest, ConsecutiveRegionsLieBackToBackInEveryRing) {
  auto arena = MakeArena(2, 1000);
  ASSERT_NE(arena, nullptr);
  size_t a_sizes[] = {100, 30};
  size_t b_sizes[] = {250, 0};
  size_t c_sizes[] = {50, 70};
  char* a[2];
  char* b[2];
  char* c[2];
  InputArena::Lease la = arena->Reserve(a_sizes, a);
  InputArena::Lease lb = arena->Reserve(b_sizes, b);
  InputArena::Lease lc = arena->Reserve(c_sizes, c);
  ASSERT_TRUE(la.held() && lb.held() && lc.held());
  EXPECT_EQ(b[0], a[0] + 100);
  EXPECT_EQ(c[0], b[0] + 250);
  EXPECT_EQ(b[1], a[1] + 30);
  EXPECT_EQ(c[1], b[1] + 0) << "an empty region takes no room";
  EXPECT_NE(a[0], a[1]) << "each input has its own ring";
  EXPECT_EQ(arena->live_regions(), 3u);
  lb.Reset();
  EXPECT_EQ(arena->live_regions(), 2u);
}

TEST(InputArenaTest, NoRoomRefusesAtOnceAndFreeingTheOldestGivesItBack) {
  auto arena = MakeArena(1, 100);
  Held a = Take(*arena, 60);
  Held b = Take(*arena, 40);
  ASSERT_TRUE(a.lease.held() && b.lease.held());
  EXPECT_FALSE(Take(*arena, 1).lease.held()) << "full";
  b.lease.Reset();  // the newest: the ring's end is not reclaimed while `a` is older and held
  EXPECT_FALSE(Take(*arena, 1).lease.held());
  a.lease.Reset();  // now empty: starts again at 0
  Held c = Take(*arena, 100);
  ASSERT_TRUE(c.lease.held());
  EXPECT_EQ(c.at, a.at);
  EXPECT_FALSE(Take(*arena, 101).lease.held()) << "never more than the capacity";
}

TEST(InputArenaTest, WrapsToTheStartOnlyBelowTheOldestLiveRegion) {
  auto arena = MakeArena(1, 100);
  Held a = Take(*arena, 40);  // [0, 40)
  Held b = Take(*arena, 40);  // [40, 80)
  Held c = Take(*arena, 15);  // [80, 95)
  ASSERT_TRUE(a.lease.held() && b.lease.held() && c.lease.held());
  char* const base = a.at;
  a.lease.Reset();            // free: [0, 40) and [95, 100)
  EXPECT_FALSE(Take(*arena, 41).lease.held()) << "neither the end nor the start has 41 contiguous bytes";
  Held d = Take(*arena, 30);  // the end has 5: wraps to [0, 30)
  ASSERT_TRUE(d.lease.held());
  EXPECT_EQ(d.at, base);
  Held e = Take(*arena, 10);  // [30, 40), up to b
  ASSERT_TRUE(e.lease.held());
  EXPECT_EQ(e.at, base + 30);
  EXPECT_FALSE(Take(*arena, 1).lease.held()) << "wrapped: nothing between the head and the oldest region";
  c.lease.Reset();  // out of order: b is still the oldest, nothing comes back
  EXPECT_FALSE(Take(*arena, 1).lease.held());
  b.lease.Reset();  // b and c reclaimed: the oldest is d at 0, free [40, 100)
  Held f = Take(*arena, 60);
  ASSERT_TRUE(f.lease.held());
  EXPECT_EQ(f.at, base + 40);
  EXPECT_EQ(arena->live_regions(), 3u);
}

TEST(InputArenaTest, LeasesMoveAndFreeOnce) {
  auto arena = MakeArena(1, 64);
  Held a = Take(*arena, 64);
  InputArena::Lease moved = std::move(a.lease);
  EXPECT_FALSE(a.lease.held());
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(Take(*arena, 1).lease.held());
  InputArena::Lease other;
  other = std::move(moved);
  EXPECT_EQ(arena->live_regions(), 1u);
  other.Reset();
  other.Reset();
  EXPECT_EQ(arena->live_regions(), 0u);
  EXPECT_TRUE(Take(*arena, 64).lease.held());
}

TEST(InputArenaTest, CreateRefusesNoInputsNoBytesAndAFailedAllocation) {
  auto ok_alloc = [](size_t bytes) {
    return absl::StatusOr<std::shared_ptr<char>>(InputArena::OrdinaryMemory(bytes));
  };
  EXPECT_EQ(InputArena::Create(0, 64, false, ok_alloc).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InputArena::Create(1, 0, false, ok_alloc).status().code(), absl::StatusCode::kInvalidArgument);
  auto failing = [](size_t) { return absl::StatusOr<std::shared_ptr<char>>(absl::ResourceExhaustedError("no memory")); };
  EXPECT_EQ(InputArena::Create(1, 64, true, failing).status().code(), absl::StatusCode::kResourceExhausted);
}

// Eight threads reserve regions of random sizes in two rings, fill each with a pattern of their
// own, and free them in random order (the ring laps many times); every region still holds its pattern when it is freed, so
// no live regions overlapped. At the end nothing is held and the whole capacity is free again.
TEST(InputArenaTest, ConcurrentRegionsNeverOverlap) {
  constexpr size_t kCapacity = 16 * 1024;
  auto arena = MakeArena(2, kCapacity);
  constexpr int kThreads = 8, kRounds = 4000;
  std::vector<int> errors(kThreads, 0);
  std::vector<size_t> reserved(kThreads, 0);  // bytes
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(31 + t);
      struct Region {
        InputArena::Lease lease;
        char* at[2];
        size_t size[2];
        char fill;
      };
      std::deque<Region> held;
      for (int i = 0; i < kRounds; ++i) {
        Region r;
        r.size[0] = 1 + rng() % 300;
        r.size[1] = rng() % 100;
        r.fill = static_cast<char>(1 + (t * 31 + i) % 251);
        r.lease = arena->Reserve(r.size, r.at);
        if (r.lease.held()) {
          reserved[t] += r.size[0];
          for (int k = 0; k < 2; ++k) std::memset(r.at[k], r.fill, r.size[k]);
          held.push_back(std::move(r));
        }
        // Free a random held region (not only the oldest) now and then, all at the end.
        while (!held.empty() && (held.size() > 3 || rng() % 2 == 0 || i == kRounds - 1)) {
          const size_t pick = rng() % held.size();
          Region& victim = held[pick];
          for (int k = 0; k < 2; ++k) {
            for (size_t b = 0; b < victim.size[k]; ++b) errors[t] += victim.at[k][b] != victim.fill;
          }
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(pick));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  size_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], 0) << "thread " << t << ": a region was overwritten while held";
    total += reserved[t];
  }
  // A region held by a thread that is not running keeps the ring's space behind it, so many
  // reservations fail while it sleeps; still the first ring went round several times.
  EXPECT_GT(total, 4 * kCapacity) << total;
  EXPECT_EQ(arena->live_regions(), 0u);
  size_t all[] = {kCapacity, kCapacity};
  char* at[2];
  EXPECT_TRUE(arena->Reserve(all, at).held()) << "empty again: the whole capacity from 0";
}

// A runtime's arena: sized from the config, fed by StageInputs on the receiving thread, and left
// out (the model still loads) when its memory cannot be had.
ModelSpec ArenaSpec() {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {8}}, {"INPUT__1", DataType::kInt32, {2}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  return spec;
}

// Delegates to a RecordingInstance but has no memory for an arena.
class NoArenaMemoryInstance final : public ModelInstance {
 public:
  explicit NoArenaMemoryInstance(const ModelSpec& spec) : inner_(spec, nullptr) {}
  absl::Status Execute(Batch& batch, BatchTiming* timing) override { return inner_.Execute(batch, timing); }
  absl::StatusOr<std::shared_ptr<char>> AllocateHostInputs(size_t) override {
    return absl::ResourceExhaustedError("cudaHostAlloc: out of memory");
  }
  int gpu() const override { return -1; }
  std::string device_name() const override { return "no-arena-memory"; }

 private:
  testing::RecordingInstance inner_;
};

TEST(ModelRuntimeArenaTest, ArenaSizeFollowsTheConfig) {
  constexpr size_t kMiB = size_t{1} << 20;
  ModelSpec spec = ArenaSpec();
  EXPECT_EQ(InputArenaBytes(spec, -1), 4 * kMiB) << "8 x 4 x 32 bytes: the 4 MiB floor";
  spec.max_batch_size = 128;
  spec.inputs[0].dims = {4, 20, 20};
  EXPECT_EQ(InputArenaBytes(spec, -1), 8u * 128 * 1600 * 4) << "8 batches of the largest input";
  spec.inputs[0].dims = {3, 224, 224};
  EXPECT_EQ(InputArenaBytes(spec, -1), 64 * kMiB) << "the 64 MiB ceiling";
  // An item of 2^58 bytes (the loader takes items under 2^63 bytes): a batch of 64 is 2^64 bytes,
  // past int64 and size_t; the ceiling, with no product wrapped on the way.
  spec.max_batch_size = 64;
  spec.inputs[0].dims = {int64_t{1} << 56};
  EXPECT_EQ(InputArenaBytes(spec, -1), 64 * kMiB) << "a batch past 2^64 bytes";
  spec.inputs[0].dims = {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20};
  EXPECT_EQ(InputArenaBytes(spec, -1), 64 * kMiB) << "three dims whose batch is 2^68 bytes";
  spec.inputs[1].dims = {-1};
  EXPECT_EQ(InputArenaBytes(spec, -1), 16 * kMiB) << "a variable dim";
  EXPECT_EQ(InputArenaBytes(spec, 0), 0u);
  EXPECT_EQ(InputArenaBytes(spec, 12345), 12345u);
}

TEST(ModelRuntimeArenaTest, StageInputsCopiesEveryInputIntoTheArenaButNotSharedMemory) {
  const ModelSpec spec = ArenaSpec();
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<testing::RecordingInstance>(spec, nullptr));
  auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get(), {}, 1024);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const InputArena* arena = (*runtime)->input_arena();
  ASSERT_NE(arena, nullptr);
  EXPECT_FALSE(arena->pinned()) << "a CPU instance: ordinary memory";
  EXPECT_EQ(arena->capacity(), 1024u);

  auto make = [](uint8_t seed) {
    auto r = std::make_unique<InferRequest>();
    for (int k = 0; k < 2; ++k) {
      InputTensor in;
      in.index = k;
      in.byte_size = k == 0 ? 32 : 8;
      std::string bytes(in.byte_size, '\0');
      for (size_t b = 0; b < in.byte_size; ++b) bytes[b] = static_cast<char>(seed + 3 * b + k);
      in.Own(std::move(bytes));
      r->inputs.push_back(std::move(in));
    }
    return r;
  };
  auto a = make(1), b = make(100);
  const auto expected_a = make(1), expected_b = make(100);  // the same bytes, kept apart
  (*runtime)->StageInputs(*a);
  (*runtime)->StageInputs(*b);
  for (const auto& [r, expected] : {std::pair{a.get(), expected_a.get()}, std::pair{b.get(), expected_b.get()}}) {
    ASSERT_TRUE(r->arena_lease.held());
    for (size_t k = 0; k < r->inputs.size(); ++k) {
      const InputTensor& in = r->inputs[k];
      EXPECT_TRUE(in.in_arena);
      EXPECT_FALSE(in.host_pinned);
      EXPECT_EQ(in.owned_data, nullptr) << "now in the arena: the owned copy is let go";
      EXPECT_EQ(std::string(in.data, in.byte_size), *expected->inputs[k].owned_data) << "the same bytes";
    }
  }
  EXPECT_EQ(b->inputs[0].data, a->inputs[0].data + 32) << "back to back";
  EXPECT_EQ(b->inputs[1].data, a->inputs[1].data + 8);
  EXPECT_EQ(arena->live_regions(), 2u);

  auto shm = make(7);
  shm->inputs[1].shared_memory = true;
  (*runtime)->StageInputs(*shm);
  EXPECT_FALSE(shm->arena_lease.held()) << "a shared-memory input stays in its region";
  EXPECT_EQ(shm->inputs[0].data, shm->inputs[0].owned_data->data());
  a.reset();
  b.reset();
  EXPECT_EQ(arena->live_regions(), 0u) << "a request frees its regions when it is destroyed";
  (*runtime)->Stop();
}

// Without the arena, inputs that arrived in pieces are copied into buffers of their own, and the
// received message then goes unless an input still views it: a queued request holds its bytes once.
TEST(ModelRuntimeArenaTest, WithoutTheArenaTheReceivedMessageGoesOnceNothingViewsIt) {
  const ModelSpec spec = ArenaSpec();
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<testing::RecordingInstance>(spec, nullptr));
  auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get(), {}, 0);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_EQ((*runtime)->input_arena(), nullptr);
  auto received = std::make_shared<const std::string>("0123456789abcdefghijklmnopqrstuvwxyzABCD");  // 40 bytes
  auto make = [&](bool second_in_one_piece) {
    auto r = std::make_unique<InferRequest>();
    r->received_bytes = received;
    InputTensor first;  // 32 bytes in two pieces
    first.index = 0;
    first.byte_size = 32;
    first.pieces = {absl::string_view(received->data(), 20), absl::string_view(received->data() + 20, 12)};
    r->inputs.push_back(std::move(first));
    InputTensor second;  // 8 bytes: a view, or owned
    second.index = 1;
    if (second_in_one_piece) {
      second.data = received->data() + 32;
      second.byte_size = 8;
    } else {
      second.Own(std::string("owned..."));
    }
    r->inputs.push_back(std::move(second));
    return r;
  };
  auto viewing = make(true);
  (*runtime)->StageInputs(*viewing);
  EXPECT_EQ(std::string(viewing->inputs[0].data, 32), received->substr(0, 32));
  EXPECT_NE(viewing->received_bytes, nullptr) << "the second input still views the message";
  auto owning = make(false);
  (*runtime)->StageInputs(*owning);
  EXPECT_EQ(std::string(owning->inputs[0].data, 32), received->substr(0, 32));
  EXPECT_EQ(owning->received_bytes, nullptr) << "nothing views the message: it goes";
  (*runtime)->Stop();
}

TEST(ModelRuntimeArenaTest, AModelLoadsWithoutAnArenaWhenItsMemoryCannotBeHad) {
  const ModelSpec spec = ArenaSpec();
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<NoArenaMemoryInstance>(spec));
  auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get(), {}, 1024);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_TRUE((*runtime)->ready());
  EXPECT_EQ((*runtime)->input_arena(), nullptr);
  auto r = std::make_unique<InferRequest>();
  InputTensor in;
  in.Own("abcd");
  r->inputs.push_back(std::move(in));
  r->inputs.push_back(InputTensor{});
  (*runtime)->StageInputs(*r);
  EXPECT_FALSE(r->inputs[0].in_arena);
  (*runtime)->Stop();
}

}  // namespace
}  // namespace chronoserve::server
