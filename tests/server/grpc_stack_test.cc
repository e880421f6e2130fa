// The server's gRPC channel stack (--grpc-minimal-stack) against the real server, over real gRPC:
// plain requests are served on either stack, unary and streamed; a gzip-compressed request is
// served on the full stack and refused by name on the minimal one, which has no filter to
// decompress it (never handed to the model still compressed); a request past --grpc-max-request-bytes
// is refused on either stack before the model sees it. Deadlines on the minimal stack are covered
// by SchedulingTest's *MinimalStack runs.
#include <gmock/gmock.h>
#include <grpc/compression.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using client::Tensor;

constexpr absl::Duration kWait = absl::Seconds(30);

// Random (not all-zero) FP32 inputs of the add/sub model: two [items, 6] tensors.
std::vector<Tensor> AddSubInputs(int64_t items, uint64_t seed) { return testing::AddSubInputs(items, 6, seed); }

// Inputs gzip shrinks to a small part of their size: two [4, 4096] tensors of a short repeating,
// non-zero pattern (gRPC sends a message uncompressed when compression would not make it smaller).
std::vector<Tensor> CompressibleAddSubInputs() {
  constexpr int64_t kItems = 4, kLength = 4096;
  std::vector<Tensor> inputs;
  for (int t = 0; t < 2; ++t) {
    std::vector<float> values(kItems * kLength);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>((i + 3 * t) % 7) * 0.25f;
    std::string bytes(values.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());
    inputs.push_back(Tensor{"INPUT__" + std::to_string(t), DataType::kFp32, {kItems, kLength}, std::move(bytes)});
  }
  return inputs;
}

// The parameter: --grpc-minimal-stack.
class GrpcStackTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir("cs_grpc_stack");
    examples::ModelOptions addsub;
    addsub.max_batch_size = 4;
    addsub.instance_kind = "KIND_CPU";
    ASSERT_TRUE(examples::WriteAddSub(repo_->path(), "addsub", addsub).ok());
  }
  static void TearDownTestSuite() { delete repo_; }
  void SetUp() override {
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.grpc_minimal_stack = GetParam();
    server_ = testing::StartServer(options);
    ASSERT_NE(server_, nullptr);
    client_ = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));
  }

  static inline testing::TempDir* repo_ = nullptr;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<client::InferenceClient> client_;
};

TEST_P(GrpcStackTest, PlainRequestsAreServedUnaryAndStreamed) {
  const std::vector<Tensor> in = AddSubInputs(3, 11);
  auto unary = client_->Infer("addsub", in);
  ASSERT_TRUE(unary.ok()) << unary.status();
  EXPECT_EQ(testing::AddSubMismatch(in[0], in[1], unary->outputs), "");

  auto stream = client::InferStream::Open(client_->stub());
  const std::vector<Tensor> streamed_in = AddSubInputs(2, 12);
  ASSERT_TRUE(stream->Send(client::InferenceClient::BuildRequest("addsub", streamed_in, {})));
  const auto answer = stream->Next(kWait);
  ASSERT_TRUE(answer.has_value()) << "the stream answered";
  auto streamed = client::InferStream::Decode(answer->message);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(testing::AddSubMismatch(streamed_in[0], streamed_in[1], streamed->outputs), "");
  stream->CloseSend();
  const auto finished = stream->Finish(kWait);
  ASSERT_TRUE(finished.has_value()) << "the stream finished";
  EXPECT_TRUE(finished->ok()) << finished->error_message();
}

TEST_P(GrpcStackTest, GzipRequestIsServedOnTheFullStackAndRefusedByNameOnTheMinimalOne) {
  const std::vector<Tensor> in = CompressibleAddSubInputs();
  const inference::ModelInferRequest request = client::InferenceClient::BuildRequest("addsub", in, {});
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  inference::ModelInferResponse response;
  const grpc::Status status = client_->stub()->ModelInfer(&ctx, request, &response);
  if (GetParam()) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("gzip"));
    auto statistics = client_->ModelStatistics("addsub");
    ASSERT_TRUE(statistics.ok()) << statistics.status();
    EXPECT_EQ(statistics->model_stats(0).inference_count(), 0u) << "the compressed request never reached the model";
  } else {
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto decoded = client::InferenceClient::DecodeResponse(response);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(testing::AddSubMismatch(in[0], in[1], decoded->outputs), "");
  }
  // Either way the server serves the next plain request.
  const std::vector<Tensor> after = AddSubInputs(1, 14);
  auto plain = client_->Infer("addsub", after);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(testing::AddSubMismatch(after[0], after[1], plain->outputs), "");
}

// --grpc-max-request-bytes 64 KiB: a 128 KiB request is refused with RESOURCE_EXHAUSTED, unary and
// streamed, and never reaches the model; one under the limit is served on the same channel. The
// minimal stack has no filter to enforce a limit: the server refuses to start with both.
TEST_P(GrpcStackTest, ARequestPastTheLimitIsRefusedBeforeTheModel) {
  server::ServerOptions options = testing::TestServerOptions(repo_->path());
  options.grpc_minimal_stack = GetParam();
  options.grpc_max_request_bytes = 64 << 10;
  if (GetParam()) {
    auto refused = server::Server::Create(options);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("--grpc-max-request-bytes needs gRPC's full channel stack"));
    return;
  }
  auto limited = testing::StartServer(options);
  ASSERT_NE(limited, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(limited->port()));
  const std::vector<Tensor> big = CompressibleAddSubInputs();  // 2 x 64 KiB of tensor bytes
  auto refused = c->Infer("addsub", big);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("larger than max"));

  auto stream = client::InferStream::Open(c->stub());
  ASSERT_TRUE(stream->Send(client::InferenceClient::BuildRequest("addsub", big, {})));
  const auto finished = stream->Finish(kWait);
  ASSERT_TRUE(finished.has_value()) << "the stream ended";
  EXPECT_EQ(finished->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << finished->error_message();

  auto statistics = c->ModelStatistics("addsub");
  ASSERT_TRUE(statistics.ok()) << statistics.status();
  EXPECT_EQ(statistics->model_stats(0).inference_count(), 0u) << "neither reached the model";
  const std::vector<Tensor> small = AddSubInputs(4, 15);
  auto served = c->Infer("addsub", small);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(testing::AddSubMismatch(small[0], small[1], served->outputs), "");
  limited->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Stacks, GrpcStackTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "MinimalStack" : "FullStack");
                         });

}  // namespace
}  // namespace chronoserve
