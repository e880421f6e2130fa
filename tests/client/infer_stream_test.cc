// InferStream (client/infer_stream.h) against the real chronoserve binary: CloseSend racing the
// stream's end (a cancellation from another thread) must not let the call end before its
// WritesDone is started, nor start one on a call that is over; every stream reaches its status in
// time and is destroyed cleanly. A use after free here shows under scripts/sanitize.sh.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "gtest/gtest.h"
#include "tests/client/test_server.h"
#include "tools/example_models.h"

namespace chronoserve::client {
namespace {

using chronoserve::testing::TestDir;
using chronoserve::testing::StartTestServer;
using chronoserve::testing::TestServer;

// mlp's INPUT__0, one sample of 64 distinct non-zero floats.
Tensor MlpInput() {
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f + 0.01f * static_cast<float>(i);
  Tensor t{"INPUT__0", DataType::kFp32, {1, 64}, std::string(values.size() * sizeof(float), '\0')};
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

TEST(InferStreamTest, CloseSendRacingACancellationEndsCleanly) {
  absl::StatusOr<TestDir> test_dir = TestDir::Create("infer_stream");  // outlives the server below
  ASSERT_TRUE(test_dir.ok()) << test_dir.status();
  const std::string dir = test_dir->path();
  ASSERT_TRUE(examples::WriteMlp(dir + "/models", "mlp", {}).ok());
  absl::StatusOr<TestServer> server = StartTestServer(dir + "/models");
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = InferenceClient::Connect(server->url);
  const inference::ModelInferRequest request = InferenceClient::BuildRequest("mlp", {MlpInput()}, {});

  for (int i = 0; i < 200; ++i) {
    std::unique_ptr<InferStream> stream = InferStream::Open(client->stub());
    ASSERT_TRUE(stream->Send(request));
    absl::Notification go;
    std::thread canceller([&] {
      if (!go.WaitForNotificationWithTimeout(absl::Seconds(30))) {
        ADD_FAILURE() << "stream " << i << ": the canceller was never let go";
        return;
      }
      stream->Cancel();
    });
    go.Notify();
    stream->CloseSend();
    canceller.join();
    const std::optional<grpc::Status> status = stream->Finish(absl::Seconds(30));
    ASSERT_TRUE(status.has_value()) << "stream " << i << " did not end";
    EXPECT_TRUE(status->ok() || status->error_code() == grpc::StatusCode::CANCELLED)
        << i << ": " << status->error_code() << " " << status->error_message();
  }
}

}  // namespace
}  // namespace chronoserve::client
