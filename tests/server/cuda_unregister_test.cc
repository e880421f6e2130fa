// CudaSharedMemoryUnregister over real gRPC on a CPU server whose CUDA IPC opener is a stand-in
// (host memory for the client's GPU memory): while a request still holds the region, the call is
// answered only once its handle is closed (the client may cudaFree right after the answer), and
// the gRPC thread that took the call goes back to serving meanwhile: on the asynchronous API, with
// one queue polled by one thread, other calls are answered while the unregister waits (the
// callback API's variant checks the late answer; its polling threads are several).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "server/server.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

// Host bytes standing in for a client's GPU allocation; counts the closes of its "IPC handle".
struct StandInDevice {
  std::vector<char> memory = std::vector<char>(1 << 16, 7);
  std::shared_ptr<std::atomic<int>> closed = std::make_shared<std::atomic<int>>(0);

  server::DeviceMemoryOpener Opener() {
    return [this](const std::string&, int64_t, uint64_t byte_size, char** data) -> absl::StatusOr<std::shared_ptr<void>> {
      if (byte_size > memory.size()) return absl::InvalidArgumentError("exceeds the allocation");
      *data = memory.data();
      auto count = closed;
      return std::shared_ptr<void>(memory.data(), [count](void*) { ++*count; });
    };
  }
};

class CudaUnregisterTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaUnregisterTest, AHeldRegionsUnregisterIsAnsweredOnceClosedWithoutHoldingItsThread) {
  testing::TempDir repo("cs_cuda_unregister");
  StandInDevice device;
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = GetParam();
  options.grpc_threads_per_queue = 1;
  options.cuda_ipc_opener = device.Opener();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  absl::Cleanup shutdown = [&server] { server->Shutdown(); };
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);
  // A call the thread must answer soon: a blocked thread stays blocked until the region's holder is
  // dropped after the probes, so a deadline roomy enough for a busy box still catches it.
  auto quick = testing::ConnectTestClient(address, absl::Seconds(15));

  ASSERT_TRUE(c->RegisterCudaSharedMemory("c0", std::string(64, '\x11'), 0, 4096).ok());
  // A request still reading the region holds it, as a batch's input would.
  auto held = server->shared_memory()->Find("c0", 0, 64);
  ASSERT_TRUE(held.ok()) << held.status();

  absl::Notification answered;
  absl::Status unregistered = absl::UnknownError("not answered");
  int closed_at_answer = -1;
  std::thread unregister([&] {
    unregistered = c->UnregisterCudaSharedMemory("c0");
    closed_at_answer = device.closed->load();
    answered.Notify();
  });
  absl::Cleanup join = [&] {
    held = absl::NotFoundError("dropped");
    unregister.join();
  };
  // The name goes as the call is taken; each probe is a call of its own on the same queue.
  bool gone = false;
  for (const absl::Time until = absl::Now() + absl::Seconds(20); !gone && absl::Now() < until;) {
    auto status = quick->CudaSharedMemoryStatus("c0");
    ASSERT_TRUE(status.ok() || status.status().code() == absl::StatusCode::kNotFound)
        << "a call on the queue was not answered while the unregister waited: " << status.status();
    gone = !status.ok();
  }
  ASSERT_TRUE(gone) << "the unregister never took the name";
  EXPECT_EQ(testing::Answer(quick->ServerLive()), "true") << "the queue's thread serves on";
  EXPECT_FALSE(answered.HasBeenNotified()) << "answered while a request still holds the handle open";
  EXPECT_EQ(device.closed->load(), 0);

  held = absl::NotFoundError("dropped");  // the request ends
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(unregistered.ok()) << unregistered;
  EXPECT_EQ(closed_at_answer, 1) << "the handle is closed before the answer";
}

INSTANTIATE_TEST_SUITE_P(BothApis, CudaUnregisterTest, ::testing::Values(0, 1), testing::InferApiName);

}  // namespace
}  // namespace chronoserve
