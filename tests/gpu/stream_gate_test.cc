// The stream gate of exact device timing on a real GPU: nothing behind a hold runs before the
// release, events behind a hold exclude the host's stalls, the watchdog breaks a hold the host
// never releases, and destroying a gate never leaves its stream held. Some tests must let time
// pass to show that something does NOT happen (or that a stall is excluded): those sleeps are the
// thing measured, not a wait for an event.
#include "server/backend/cuda/stream_gate.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "server/backend/cuda/copy_ranges.h"
#include "server/backend/cuda/cuda_event.h"
#include "server/backend/cuda/pinned_buffer.h"

namespace chronoserve::server::cuda {
namespace {

class StreamGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), cudaSuccess);
  }
  void TearDown() override {
    cudaEventDestroy(event_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  // The event's state without leaving "not ready" as the thread's last CUDA error.
  cudaError_t Query() {
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) (void)cudaGetLastError();
    return state;
  }
  // Polls the event for up to `timeout`; true once it completed.
  bool CompletesWithin(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (Query() == cudaSuccess) return true;
      absl::SleepFor(absl::Microseconds(100));
    }
    return Query() == cudaSuccess;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

TEST_F(StreamGateTest, NothingRunsBeforeTheRelease) {
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(10));
  ASSERT_TRUE(gate.ok()) << gate.status();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*gate)->Hold().ok());
    ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_EQ(Query(), cudaErrorNotReady) << "hold " << i << ": the event ran before the release";
    EXPECT_TRUE((*gate)->Release());
    EXPECT_TRUE(CompletesWithin(absl::Seconds(5))) << "hold " << i;
  }
  EXPECT_EQ((*gate)->watchdog_releases(), 0);
  EXPECT_FALSE((*gate)->Release()) << "nothing held";
}

// CUDA loads a kernel at its first launch unless told earlier, and that launch waits for its
// stream: behind a hold, until the release. The copy kernel is loaded when a GPU path starts
// (LoadCopyRangesKernel), so a batch of CUDA shared-memory requests launching it behind a hold
// returns at once. (Each test runs in a process of its own: nothing loaded the kernel before.)
TEST_F(StreamGateTest, TheLoadedCopyKernelLaunchesBehindAHoldWithoutWaiting) {
  ASSERT_EQ(LoadCopyRangesKernel(), cudaSuccess);
  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, 8192), cudaSuccess);
  ASSERT_EQ(cudaMemset(memory, 0x5a, 4096), cudaSuccess);
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(10));
  ASSERT_TRUE(gate.ok()) << gate.status();
  ASSERT_TRUE((*gate)->Hold().ok());
  char* bytes = static_cast<char*>(memory);
  const CopyRange range{bytes + 4096, bytes, 4096};
  const absl::Time start = absl::Now();
  const cudaError_t launched = CopyRangesAsync(&range, 1, stream_);
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE((*gate)->Release());
  ASSERT_EQ(launched, cudaSuccess);
  EXPECT_LT(took, absl::Seconds(1)) << "the launch waited for the hold";
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<unsigned char> copied(4096);
  ASSERT_EQ(cudaMemcpy(copied.data(), bytes + 4096, 4096, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(copied, std::vector<unsigned char>(4096, 0x5a));
  EXPECT_EQ((*gate)->watchdog_releases(), 0);
  cudaFree(memory);
}

TEST_F(StreamGateTest, EventsBehindAHoldExcludeTheHostsStalls) {
  constexpr size_t kBytes = 16 << 20;
  PinnedBuffer host;
  ASSERT_TRUE(host.Reserve(kBytes).ok());
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  CudaEvent start, end;
  ASSERT_TRUE(start.Init().ok());
  ASSERT_TRUE(end.Init().ok());
  auto timed_copy = [&](StreamGate* gate) -> int64_t {
    if (gate != nullptr) {
      EXPECT_TRUE(gate->Hold().ok());
    }
    EXPECT_TRUE(start.Record(stream_).ok());
    absl::SleepFor(absl::Milliseconds(50));  // the host stalls between two enqueues
    EXPECT_EQ(cudaMemcpyAsync(device, host.data(), kBytes, cudaMemcpyHostToDevice, stream_), cudaSuccess);
    EXPECT_TRUE(end.Record(stream_).ok());
    if (gate != nullptr) {
      EXPECT_TRUE(gate->Release());
    }
    EXPECT_TRUE(end.Synchronize().ok());
    auto ns = CudaEvent::ElapsedNs(start, end);
    EXPECT_TRUE(ns.ok()) << ns.status();
    return ns.ok() ? *ns : -1;
  };
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(10));
  ASSERT_TRUE(gate.ok()) << gate.status();
  const int64_t open_ns = timed_copy(nullptr);
  const int64_t held_ns = timed_copy(gate->get());
  EXPECT_GT(open_ns, 45'000'000) << "on an idle stream the events count the host's 50 ms stall";
  EXPECT_GT(held_ns, 0);
  EXPECT_LT(held_ns, 20'000'000) << "behind a hold: the 16 MiB copy alone (~1 ms)";
  cudaFree(device);
}

TEST_F(StreamGateTest, WatchdogBreaksAHoldNeverReleased) {
  auto gate = StreamGate::Create(0, stream_, absl::Milliseconds(100));
  ASSERT_TRUE(gate.ok()) << gate.status();
  const absl::Time held_at = absl::Now();
  ASSERT_TRUE((*gate)->Hold().ok());
  ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
  ASSERT_TRUE(CompletesWithin(absl::Seconds(10))) << "the watchdog released the stream";
  EXPECT_GE(absl::Now() - held_at, absl::Milliseconds(90));
  EXPECT_FALSE((*gate)->Release()) << "released by the watchdog, not by this call";
  EXPECT_EQ((*gate)->watchdog_releases(), 1);
  // The gate keeps working.
  ASSERT_TRUE((*gate)->Hold().ok());
  ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
  EXPECT_TRUE((*gate)->Release());
  EXPECT_TRUE(CompletesWithin(absl::Seconds(5)));
}

TEST_F(StreamGateTest, SecondHoldWithoutReleaseIsRefused) {
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(10));
  ASSERT_TRUE(gate.ok()) << gate.status();
  ASSERT_TRUE((*gate)->Hold().ok());
  EXPECT_EQ((*gate)->Hold().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*gate)->Release());
}

TEST_F(StreamGateTest, DestroyingAGateReleasesItsStream) {
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(60));
  ASSERT_TRUE(gate.ok()) << gate.status();
  ASSERT_TRUE((*gate)->Hold().ok());
  ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
  gate->reset();
  EXPECT_TRUE(CompletesWithin(absl::Seconds(5)));
}

TEST_F(StreamGateTest, ManyHoldsInARow) {
  auto gate = StreamGate::Create(0, stream_, absl::Seconds(10));
  ASSERT_TRUE(gate.ok()) << gate.status();
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE((*gate)->Hold().ok()) << i;
    ASSERT_EQ(cudaMemsetAsync(device, i & 0xff, 4096, stream_), cudaSuccess);
    ASSERT_TRUE((*gate)->Release()) << i;
  }
  ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
  EXPECT_TRUE(CompletesWithin(absl::Seconds(10)));
  EXPECT_EQ((*gate)->watchdog_releases(), 0);
  cudaFree(device);
}

}  // namespace
}  // namespace chronoserve::server::cuda
