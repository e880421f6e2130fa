// ShmSlotPool::UnregisterAll against a server that stopped answering (chronoserve frozen with
// SIGSTOP: its socket open, nothing answered). It made two blocking calls a slot, each with a 10 s
// deadline of its own, and kept going after a timeout, so stopping a worker with 64 slots took about
// 21 minutes. Now every call shares one deadline and the first timeout ends it, saying how many
// regions were left registered. Also: an open-loop worker that cannot add a slot goes on with the
// slots it has, and one stopped behind its schedule counts the sends it never made. Against the real chronoserve binary on 127.0.0.1.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/chronobench/load_worker.h"
#include "client/chronobench/pacer.h"
#include "client/chronobench/shm_slot_pool.h"
#include "client/cuda_shared_memory.h"
#include "client/shm_region.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "proto/inference.grpc.pb.h"
#include "tests/client/mlp_target.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::MlpTarget;
using chronoserve::testing::StartMlpTarget;

constexpr auto kWait = std::chrono::seconds(60);

int RegisteredRegions(InferenceClient& client) {
  auto status = client.SystemSharedMemoryStatus();
  return status.ok() ? status->regions_size() : -1;
}

// The layout chronobench plans for batch-1 requests of `target`'s mlp, as the server describes it.
absl::StatusOr<ShmLayout> LayoutFor(const MlpTarget& target, InferenceClient& client, int64_t output_byte_size) {
  absl::StatusOr<inference::ModelMetadataResponse> metadata = client.ModelMetadata("mlp");
  if (!metadata.ok()) return metadata.status();
  return PlanShmLayout(target.request, *metadata, /*batch_size=*/1, /*batched=*/true, output_byte_size);
}

// A LoadWorker's surroundings against `target`: a client, chronobench's layout for the mlp (outputs
// sized from their shapes) and one channel. Not movable: `shared` points into it.
struct WorkerSetup {
  std::unique_ptr<InferenceClient> client;
  ShmLayout layout;
  std::vector<ChannelStubs> stubs;
  WorkerShared shared;
};

absl::StatusOr<std::unique_ptr<WorkerSetup>> SetUpWorker(const MlpTarget& target) {
  auto setup = std::make_unique<WorkerSetup>();
  setup->client = InferenceClient::Connect(target.server.url, std::chrono::seconds(30));
  absl::StatusOr<ShmLayout> layout = LayoutFor(target, *setup->client, /*output_byte_size=*/0);
  if (!layout.ok()) return layout.status();
  setup->layout = *std::move(layout);
  setup->stubs.emplace_back(grpc::CreateChannel(target.server.url, grpc::InsecureChannelCredentials()));
  setup->shared = WorkerShared{&setup->stubs, &target.request, SteadyClock::Get(), nullptr, 1, &setup->layout};
  return setup;
}

// A layout of CUDA regions makes the pool allocate GPU memory: a build without CUDA refuses at the
// first slot, saying why, before anything is registered (tests/gpu covers the build with CUDA).
TEST(ShmSlotPoolTest, CudaRegionsWithoutCudaFailTheFirstSlotSayingWhy) {
  if (CudaSharedMemory::Available()) GTEST_SKIP() << "this build has CUDA: tests/gpu covers its regions";
  inference::ModelInferRequest request;
  auto* input = request.add_inputs();
  input->set_name("INPUT__0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  request.add_raw_input_contents()->assign("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16);
  inference::ModelMetadataResponse metadata;
  auto* output = metadata.add_outputs();
  output->set_name("OUTPUT__0");
  output->set_datatype("FP32");
  output->add_shape(-1);
  output->add_shape(2);
  auto layout = PlanShmLayout(request, metadata, /*batch_size=*/1, /*batched=*/true, /*output_byte_size=*/0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  layout->kind = SharedMemoryKind::kCuda;
  // No server: the refusal comes before the first registration (a null stub would crash a call).
  ShmSlotPool pool(/*stub=*/nullptr, &request, &*layout, "chronobench_test_no_cuda");
  const absl::Status grown = pool.Grow(1);
  EXPECT_EQ(grown.code(), absl::StatusCode::kFailedPrecondition) << grown;
  EXPECT_NE(grown.message().find("needs a build with CUDA"), std::string::npos) << grown;
  EXPECT_EQ(pool.size(), 0);
  EXPECT_TRUE(pool.UnregisterAll().ok()) << "nothing was registered";
}

// A system region's Write and Read check their range as a GPU region's do: an offset past the end
// is OUT_OF_RANGE naming the region, not a copy past the mapping.
TEST(ShmRegionTest, SystemRegionRefusesARangePastItsEnd) {
  const std::string key = absl::StrCat("/chronobench_range_", getpid());
  auto region = ShmRegion::System(key, 64);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::string bytes = "\x11\x22\x33\x44\x55\x66\x77\x88";
  ASSERT_TRUE((*region)->Write(56, bytes.data(), bytes.size()).ok()) << "the last 8 bytes";
  std::string back(128, '\0');
  ASSERT_TRUE((*region)->Read(56, 8, back.data()).ok());
  EXPECT_EQ(back.substr(0, 8), bytes);
  const std::string source(128, '\x5a');  // longer than any size below: a refusal reads none of it
  for (const auto& [offset, size] : std::vector<std::pair<size_t, size_t>>{{57, 8}, {65, 0}, {0, 65}, {SIZE_MAX, 2}}) {
    const absl::Status wrote = (*region)->Write(offset, source.data(), size);
    EXPECT_EQ(wrote.code(), absl::StatusCode::kOutOfRange) << offset << "+" << size << ": " << wrote;
    EXPECT_NE(wrote.message().find(key), std::string::npos) << wrote;
    EXPECT_EQ((*region)->Read(offset, size, back.data()).code(), absl::StatusCode::kOutOfRange) << offset;
  }
  EXPECT_TRUE((*region)->Write(64, bytes.data(), 0).ok()) << "nothing at the very end";
}

// --shared-memory-preload: a slot's inputs are in its region once it is made; per request the pool
// then copies nothing in (bytes written into the region since stay) and nothing out.
TEST(ShmSlotPoolTest, PreloadWritesTheInputsOnceAndCopiesNothingPerRequest) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_shm_preload", /*seed=*/29);
  ASSERT_TRUE(target.ok()) << target.status();
  std::unique_ptr<InferenceClient> client = InferenceClient::Connect(target->server.url, std::chrono::seconds(30));
  auto layout = LayoutFor(*target, *client, /*output_byte_size=*/0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  layout->preload = true;
  auto channel = grpc::CreateChannel(target->server.url, grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  ShmSlotPool pool(stub.get(), &target->request, &*layout, "chronobench_test_preload");
  ASSERT_TRUE(pool.Grow(1).ok());
  ShmSlot* slot = pool.Acquire();
  ASSERT_NE(slot, nullptr);

  const ShmLayout::Entry& in = layout->inputs[0];
  const std::string& sent = target->request.raw_input_contents(0);
  ASSERT_EQ(in.bytes, sent.size());
  std::string held(in.bytes, '\0');
  ASSERT_TRUE(slot->input->Read(in.offset, in.bytes, held.data()).ok());
  EXPECT_EQ(held, sent) << "the inputs are in the region once the slot is made";

  std::string other = sent;
  for (char& c : other) c = static_cast<char>(c ^ 0x5a);
  ASSERT_TRUE(slot->input->Write(in.offset, other.data(), other.size()).ok());
  ASSERT_TRUE(pool.CopyIn(*slot).ok());
  ASSERT_TRUE(slot->input->Read(in.offset, in.bytes, held.data()).ok());
  EXPECT_EQ(held, other) << "CopyIn wrote nothing over the region";

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kWait);
  inference::ModelInferResponse response;
  ASSERT_TRUE(stub->ModelInfer(&ctx, slot->request, &response).ok());
  ASSERT_TRUE(pool.CopyOut(*slot, response.outputs()).ok());
  EXPECT_EQ(slot->outputs, std::string(layout->output_bytes, '\0')) << "CopyOut read nothing back";
  const ShmLayout::Entry& out = layout->outputs[0];
  std::string written(out.bytes, '\0');
  ASSERT_TRUE(slot->output->Read(out.offset, out.bytes, written.data()).ok());
  EXPECT_NE(written, std::string(out.bytes, '\0')) << "the server wrote the output into the region";
  pool.Release(slot);
  EXPECT_TRUE(pool.UnregisterAll().ok());
}

// A worker whose Prepare registered its slots but which never started (the point stopped because
// another worker's Prepare failed): Stop unregisters them by the deadline it is given, as it does
// for a worker that ran, so that every worker of the point shares one deadline.
TEST(ShmSlotPoolTest, StoppingAWorkerThatNeverStartedUnregistersItsSlots) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_shm_unstarted", /*seed=*/37);
  ASSERT_TRUE(target.ok()) << target.status();
  auto setup = SetUpWorker(*target);
  ASSERT_TRUE(setup.ok()) << setup.status();
  InferenceClient& client = *(*setup)->client;
  WorkerPlan plan;
  plan.mode = LoadMode::kConcurrency;
  plan.in_flight = 3;
  plan.timeout_ms = 10'000;
  LoadWorker worker(0, plan, (*setup)->shared);
  ASSERT_TRUE(worker.Prepare().ok());
  ASSERT_EQ(RegisteredRegions(client), 6) << "an input and an output region a slot";
  worker.Stop(absl::Now() + absl::Seconds(30));
  EXPECT_EQ(RegisteredRegions(client), 0) << "unregistered by Stop, not left to the destructor";
}

// POSIX shared-memory objects this test made, unlinked when it ends however it ends.
struct ShmKeys {
  std::vector<std::string> names;
  ~ShmKeys() {
    for (const std::string& name : names) shm_unlink(name.c_str());
  }
};

// An open-loop worker whose eight slots are all in flight (the server frozen) adds a ninth; when
// that fails (here its POSIX object's name is taken, as a full /dev/shm or a refusing server would
// fail it), the worker says so once, keeps the eight it has and sends only as they free up: nothing
// more is sent while they are held, no other slot is tried, the load carries on once the server
// answers, every request is accounted for, and the object it could not create is left alone.
// Takes the name of the ninth slot's input object of worker 0's pool ("chronobench_PID_POOL_w0_8_in"),
// for every pool number this process may have reached, so that creating it fails.
void TakeTheNinthSlotsName(ShmKeys* taken) {
  for (int pool = 0; pool < 64; ++pool) {
    std::string name = absl::StrCat("/chronobench_", getpid(), "_", pool, "_w0_8_in");
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, S_IRUSR | S_IWUSR);
    ASSERT_GE(fd, 0) << name;
    close(fd);
    taken->names.push_back(std::move(name));
  }
}

// One open-loop worker at 20000 requests/s: a send time every 50 µs, so its eight first slots are
// all in flight at once against a frozen server.
WorkerPlan FastOpenLoop() {
  WorkerPlan plan;
  plan.mode = LoadMode::kRate;
  plan.total_rate_per_s = 20000;
  plan.timeout_ms = 60'000;
  plan.seed = 5;
  return plan;
}

TEST(ShmSlotPoolTest, AnOpenLoopWorkerThatCannotAddASlotGoesOnWithTheSlotsItHas) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_shm_growth", /*seed=*/41);
  ASSERT_TRUE(target.ok()) << target.status();
  auto setup = SetUpWorker(*target);
  ASSERT_TRUE(setup.ok()) << setup.status();
  InferenceClient& client = *(*setup)->client;
  ShmKeys taken;
  ASSERT_NO_FATAL_FAILURE(TakeTheNinthSlotsName(&taken));
  LoadWorker worker(0, FastOpenLoop(), (*setup)->shared);
  ASSERT_TRUE(worker.Prepare().ok());
  ASSERT_EQ(RegisteredRegions(client), 16) << "an open loop starts with eight slots, two regions each";

  target->server.process->Signal(SIGSTOP);
  worker.Start(SteadyClock::Get()->NowNs());
  const bool failed = worker.AwaitSlotGrowthFailed(absl::Seconds(60));
  const int64_t sent_while_frozen = worker.sent();
  target->server.process->Signal(SIGCONT);
  ASSERT_TRUE(failed) << "the ninth slot was never asked for (sent " << sent_while_frozen << ")";
  EXPECT_EQ(sent_while_frozen, 8) << "one request a slot, and no slot more";
  EXPECT_TRUE(worker.AwaitCompleted(300, absl::Seconds(60))) << "completed " << worker.completed();
  worker.Stop(absl::Now() + absl::Seconds(30));

  EXPECT_EQ(worker.sent(), worker.completed() + worker.drained());
  const LatencyRecorder recorded = worker.TakeRecorder();
  EXPECT_GE(recorded.successes(), 300);
  EXPECT_EQ(recorded.errors(), 0);
  EXPECT_EQ(RegisteredRegions(client), 0) << "the eight slots unregistered, and no ninth was registered";
  int still_there = 0;
  for (const std::string& name : taken.names) {
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd >= 0) ++still_there;
    if (fd >= 0) close(fd);
  }
  EXPECT_EQ(still_there, 64) << "the pool unlinks only the objects it made";
}

// An open-loop worker stopped while it is behind its schedule (its eight slots held by a frozen
// server, a ninth refused) counts the send times that had come but were never sent: with those it
// sent, they are exactly the schedule's times up to the stop, and the oldest wait it reports covers
// them. Nothing is lost from the accounting a point's report and warning are made of.
TEST(ShmSlotPoolTest, AnOpenLoopWorkerStoppedBehindItsScheduleCountsTheSendsItNeverMade) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_shm_unsent", /*seed=*/43);
  ASSERT_TRUE(target.ok()) << target.status();
  auto setup = SetUpWorker(*target);
  ASSERT_TRUE(setup.ok()) << setup.status();
  ShmKeys taken;
  ASSERT_NO_FATAL_FAILURE(TakeTheNinthSlotsName(&taken));
  const WorkerPlan plan = FastOpenLoop();
  LoadWorker worker(0, plan, (*setup)->shared);
  ASSERT_TRUE(worker.Prepare().ok());

  target->server.process->Signal(SIGSTOP);
  const int64_t start_ns = SteadyClock::Get()->NowNs();
  worker.Start(start_ns);
  const bool failed = worker.AwaitSlotGrowthFailed(absl::Seconds(60));
  const int64_t before_stop_ns = SteadyClock::Get()->NowNs();
  // Still frozen: the eight in flight are cancelled, and unregistering gives up at the deadline.
  worker.Stop(absl::Now() + absl::Seconds(1));
  const int64_t after_stop_ns = SteadyClock::Get()->NowNs();
  target->server.process->Signal(SIGCONT);
  ASSERT_TRUE(failed) << "the ninth slot was never asked for (sent " << worker.sent() << ")";

  EXPECT_EQ(worker.sent(), 8) << "one request a slot, and no slot more";
  EXPECT_EQ(worker.drained(), 8) << "the eight in flight, cancelled";
  EXPECT_GE(worker.unsent(), 1) << "the ninth send time had come: that is why a slot was asked for";
  // The same schedule as the worker's (worker 0 of 1 at 20000/s from start_ns): the times up to the
  // stop, which came between the two stamps, are the sent ones and the unsent ones.
  Pacer schedule(Distribution::kConstant, 20000, 0, 1, start_ns, plan.seed);
  const int64_t due_before = schedule.SkipThrough(before_stop_ns);
  const int64_t due_after = due_before + schedule.SkipThrough(after_stop_ns);
  EXPECT_GE(worker.sent() + worker.unsent(), due_before);
  EXPECT_LE(worker.sent() + worker.unsent(), due_after);
  EXPECT_GE(worker.oldest_unanswered_ns(), before_stop_ns - start_ns) << "the first request's wait, at least";
  EXPECT_LE(worker.oldest_unanswered_ns(), after_stop_ns - start_ns);
}

TEST(ShmSlotPoolTest, UnregisterAllAgainstAFrozenServerEndsAtOneDeadline) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_shm_frozen", /*seed=*/23);
  ASSERT_TRUE(target.ok()) << target.status();
  std::unique_ptr<InferenceClient> client = InferenceClient::Connect(target->server.url, std::chrono::seconds(30));
  auto layout = LayoutFor(*target, *client, /*output_byte_size=*/4096);
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto channel = grpc::CreateChannel(target->server.url, grpc::InsecureChannelCredentials());
  // Connected before the server freezes: the calls are stuck on a live connection, not a dial.
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + kWait));
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  auto pool = std::make_unique<ShmSlotPool>(stub.get(), &target->request, &*layout, "chronobench_test_frozen");
  ASSERT_TRUE(pool->Grow(8).ok());
  ASSERT_EQ(RegisteredRegions(*client), 16);

  target->server.process->Signal(SIGSTOP);
  constexpr absl::Duration kTimeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  auto unregistered = std::async(std::launch::async, [&] { return pool->UnregisterAll(start + kTimeout); });
  const bool returned = unregistered.wait_for(kWait) == std::future_status::ready;
  const absl::Duration took = absl::Now() - start;
  target->server.process->Signal(SIGCONT);  // the calls, if still waiting, are answered now
  if (!returned) {
    ADD_FAILURE() << "UnregisterAll still waiting after 60 s";
    target->server.process->Signal(SIGKILL);  // every call fails now, so UnregisterAll should return
    if (unregistered.wait_for(kWait) != std::future_status::ready) {
      // The future's destructor would wait for ever: end the test binary instead.
      std::fprintf(stderr, "UnregisterAll still running 60 s after the server was killed\n");
      std::abort();
    }
    return;
  }
  // One deadline for all 16 calls (with one a call, 16 x 2 s = 32 s): the bound leaves a busy box
  // room, still far below that.
  EXPECT_LT(took, kTimeout + absl::Seconds(15));
  const absl::Status status = unregistered.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("16 of 16 regions"), std::string::npos) << status;
  EXPECT_NE(status.message().find("left registered on the server"), std::string::npos) << status;
  EXPECT_NE(status.message().find("unlinked here"), std::string::npos) << status;

  // Gave up, not retried: the pool goes at once (its destructor unregisters nothing more), and the
  // server, answering again, still holds what the message said, but for the one call that timed
  // out, which it may serve once it reads it.
  const absl::Time destroying = absl::Now();
  pool.reset();
  EXPECT_LT(absl::Now() - destroying, absl::Seconds(10));
  EXPECT_GE(RegisteredRegions(*client), 15);
}

}  // namespace
}  // namespace chronoserve::client::bench
