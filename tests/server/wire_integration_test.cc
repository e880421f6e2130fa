// Tensors that gRPC hands over in many slices, end to end: the real server, real gRPC, the add/sub
// model with inputs of megabytes, sent by the client library (its messages as byte buffers) and
// by the generated stub (protobuf's own serialization), unary and streamed, on the asynchronous
// API (the messages read and written as byte buffers, infer_wire.h) and on the callback API, with
// the input arena sized automatically and off (the pieces then gathered into the request's own
// bytes). Every output element is checked. Bytes that are no ModelInferRequest are refused by name,
// and a stream goes on after one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using client::Tensor;
using testing::AddSubInputs;

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kModelStreamInfer[] = "/inference.GRPCInferenceService/ModelStreamInfer";

// (--grpc-infer-threads, --input-arena-mib): the callback API or the queues, the arena auto or off.
class WireIntegrationTest : public ::testing::TestWithParam<std::tuple<int, int64_t>> {
 protected:
  void SetUp() override {
    examples::ModelOptions options;
    options.max_batch_size = 4;
    ASSERT_TRUE(examples::WriteAddSub(repo_.path(), "addsub", options).ok());
    server::ServerOptions server_options = testing::TestServerOptions(repo_.path());
    server_options.grpc_infer_threads = std::get<0>(GetParam());
    server_options.input_arena_bytes = std::get<1>(GetParam());
    server_ = testing::StartServer(server_options);
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  testing::TempDir repo_{"cs_wire"};
  std::unique_ptr<server::Server> server_;
  std::string address_;
};

TEST_P(WireIntegrationTest, LargeTensorsComeBackWholeFromEveryClientPath) {
  auto c = testing::ConnectTestClient(address_);
  // 3 x 150000 floats: 1.8 MB per input, far more than one HTTP/2 frame or read.
  const std::vector<Tensor> large = AddSubInputs(3, 150000, 11);
  const std::vector<Tensor> small = AddSubInputs(1, 7, 12);
  for (const auto* inputs : {&large, &small}) {
    // The client library: its request and response as byte buffers.
    auto result = c->Infer("addsub", *inputs);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(testing::AddSubMismatch((*inputs)[0], (*inputs)[1], result->outputs), "");
    EXPECT_TRUE(result->timing.has_value());
    // The generated stub: protobuf's serialization on the client.
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    const grpc::Status status = c->stub()->ModelInfer(&ctx, InferenceClient::BuildRequest("addsub", *inputs, {}), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto decoded = InferenceClient::DecodeResponse(response);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(testing::AddSubMismatch((*inputs)[0], (*inputs)[1], decoded->outputs), "");
  }
  // Streamed: large and small requests on one stream, each answered by id.
  grpc::ClientContext ctx;
  auto stream = c->stub()->ModelStreamInfer(&ctx);
  const std::vector<std::vector<Tensor>> sent = {large, small, AddSubInputs(2, 90001, 13)};
  for (size_t k = 0; k < sent.size(); ++k) {
    client::InferOptions options;
    options.id = "req-" + std::to_string(k);
    ASSERT_TRUE(stream->Write(InferenceClient::BuildRequest("addsub", sent[k], options)));
  }
  stream->WritesDone();
  std::vector<bool> answered(sent.size(), false);
  inference::ModelStreamInferResponse streamed;
  while (stream->Read(&streamed)) {
    ASSERT_EQ(streamed.error_message(), "");
    const std::string& id = streamed.infer_response().id();
    ASSERT_EQ(id.rfind("req-", 0), 0u) << id;
    const size_t k = std::stoul(id.substr(4));
    ASSERT_LT(k, sent.size());
    EXPECT_FALSE(answered[k]);
    answered[k] = true;
    auto decoded = InferenceClient::DecodeResponse(streamed.infer_response());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(testing::AddSubMismatch(sent[k][0], sent[k][1], decoded->outputs), "") << id;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(answered, ::testing::Each(true));
}

TEST_P(WireIntegrationTest, BytesThatAreNoRequestAreRefusedByNameAndTheStreamGoesOn) {
  auto c = testing::ConnectTestClient(address_);
  grpc::ChannelArguments args = client::ClientChannelArguments();
  auto channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  // A length that passes the end of the message.
  const std::string garbage("\x0a\xff\xff\x03model", 9);
  grpc::Slice slice(garbage.data(), garbage.size());
  const grpc::ByteBuffer bad(&slice, 1);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::TestDeadline());
    grpc::ByteBuffer response;
    const grpc::internal::RpcMethod method(kModelInfer, grpc::internal::RpcMethod::NORMAL_RPC, channel);
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(channel.get(), method, &ctx, bad, &response);
    EXPECT_FALSE(status.ok());
    if (std::get<0>(GetParam()) > 0) {
      // Read by the server itself: a client error that says what is wrong.
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(status.error_message(), ::testing::HasSubstr("not a ModelInferRequest"));
    }
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::TestDeadline());
    const grpc::internal::RpcMethod method(kModelStreamInfer, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), method, &ctx));
    const std::vector<Tensor> inputs = AddSubInputs(2, 30000, 14);
    client::InferOptions options;
    options.id = "good";
    const std::string good = InferenceClient::BuildRequest("addsub", inputs, options).SerializeAsString();
    grpc::Slice good_slice(good.data(), good.size());
    const bool async_api = std::get<0>(GetParam()) > 0;
    // On the callback API gRPC's own parse fails the bad message and may end the stream at once.
    const bool wrote = stream->Write(bad) && stream->Write(grpc::ByteBuffer(&good_slice, 1));
    if (async_api) ASSERT_TRUE(wrote);
    stream->WritesDone();
    std::vector<inference::ModelStreamInferResponse> answers;
    grpc::ByteBuffer read;
    while (stream->Read(&read)) {
      std::vector<grpc::Slice> slices;
      ASSERT_TRUE(read.Dump(&slices).ok());
      std::string bytes;
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      answers.emplace_back();
      ASSERT_TRUE(answers.back().ParseFromString(bytes));
    }
    const grpc::Status finished = stream->Finish();
    if (async_api) {
      ASSERT_TRUE(finished.ok()) << finished.error_message();
      ASSERT_EQ(answers.size(), 2u);
      int errors = 0;
      for (const auto& a : answers) {
        if (!a.error_message().empty()) {
          ++errors;
          EXPECT_THAT(a.error_message(), ::testing::HasSubstr("not a ModelInferRequest"));
          continue;
        }
        EXPECT_EQ(a.infer_response().id(), "good");
        auto decoded = InferenceClient::DecodeResponse(a.infer_response());
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        EXPECT_EQ(testing::AddSubMismatch(inputs[0], inputs[1], decoded->outputs), "");
      }
      EXPECT_EQ(errors, 1);
    } else {
      // gRPC's callback API reports a message it could not parse as a failed read, as it does a
      // half-close (docs/STREAMING.md): the reads end there, so neither the bad message nor the
      // good one after it is answered, and the stream ends with the status of a half-closed one.
      EXPECT_TRUE(answers.empty()) << answers.size() << " answers";
      EXPECT_TRUE(finished.ok()) << finished.error_message();
    }
  }
  // The server still serves.
  auto result = c->Infer("addsub", AddSubInputs(1, 5, 15));
  ASSERT_TRUE(result.ok()) << result.status();
}

std::string Name(const ::testing::TestParamInfo<std::tuple<int, int64_t>>& info) {
  const int threads = std::get<0>(info.param);
  return (threads == 0 ? std::string("CallbackApi") : "AsyncQueues" + std::to_string(threads)) +
         (std::get<1>(info.param) == 0 ? "ArenaOff" : "ArenaAuto");
}

INSTANTIATE_TEST_SUITE_P(ApisAndArenas, WireIntegrationTest,
                         ::testing::Combine(::testing::Values(0, 2), ::testing::Values(int64_t{-1}, int64_t{0})), Name);

}  // namespace
}  // namespace chronoserve
