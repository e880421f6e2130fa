// InferenceClient's decoding of responses from servers other than chronoserve: an output in the
// message must hold what its shape and data type say (a short or empty entry is DATA_LOSS naming
// the output and both sizes), and an output the client asked for in a shared-memory region is read
// as there even when the server does not echo the region's parameters on it, as Triton does not.
// The "Triton" here is a fake on 127.0.0.1 speaking real gRPC.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "gtest/gtest.h"
#include "proto/inference.grpc.pb.h"
#include "tests/fakes/loopback_grpc_server.h"

namespace chronoserve::client {
namespace {

using ::testing::HasSubstr;

std::string Floats(std::initializer_list<float> values) {
  std::string bytes;
  for (float v : values) bytes.append(reinterpret_cast<const char*>(&v), sizeof(v));
  return bytes;
}

// Answers ModelInfer as Triton does when OUTPUT__1 was asked for in a region: both outputs listed,
// one raw entry each, OUTPUT__1's empty, and no shared_memory_* parameters on it.
class TritonLikeService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    response->set_model_name(request->model_name());
    response->set_id(request->id());
    for (const char* name : {"OUTPUT__0", "OUTPUT__1"}) {
      auto* out = response->add_outputs();
      out->set_name(name);
      out->set_datatype("FP32");
      out->add_shape(1);
      out->add_shape(2);
    }
    response->add_raw_output_contents(Floats({1.5f, -0.25f}));
    response->add_raw_output_contents("");
    return grpc::Status::OK;
  }
};

TEST(InferenceClientDecodeTest, AnOutputWhoseBytesDisagreeWithItsShapeIsDataLossNamingBoth) {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  auto* out = response.add_outputs();
  out->set_name("SCORES");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(2);
  response.add_raw_output_contents(Floats({0.75f}));  // 4 bytes of the 8 the shape needs
  absl::StatusOr<InferResult> decoded = InferenceClient::DecodeResponse(response);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
  EXPECT_THAT(std::string(decoded.status().message()),
              HasSubstr("output 'SCORES' of model 'm': 4 bytes in the response, but its shape [1,2] of FP32 needs 8"));
  response.set_raw_output_contents(0, Floats({0.75f, -3.5f}));
  decoded = InferenceClient::DecodeResponse(response);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->outputs[0].data, Floats({0.75f, -3.5f}));
}

TEST(InferenceClientDecodeTest, AnOutputAskedForInARegionIsThereWhenTheServerDoesNotSaySo) {
  TritonLikeService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLoopbackServer(&service, &port);
  ASSERT_NE(server, nullptr);
  auto client = InferenceClient::Connect(absl::StrCat("127.0.0.1:", port), std::chrono::seconds(30));
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 2}, Floats({2.0f, -1.0f})};

  InferOptions options;
  options.id = "r1";
  options.outputs = {"OUTPUT__0"};
  options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{"out_region", 8, 16};
  absl::StatusOr<InferResult> result = client->Infer("triton_model", {input}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_EQ(result->outputs[0].data, Floats({1.5f, -0.25f}));
  EXPECT_FALSE(result->outputs[0].shared_memory.has_value());
  ASSERT_TRUE(result->outputs[1].shared_memory.has_value()) << "the output asked for in a region";
  EXPECT_EQ(result->outputs[1].shared_memory->region, "out_region");
  EXPECT_EQ(result->outputs[1].shared_memory->byte_size, 8u);
  EXPECT_EQ(result->outputs[1].shared_memory->offset, 16u);
  EXPECT_TRUE(result->outputs[1].data.empty());

  // Not asked for in a region, the same empty entry is no tensor: DATA_LOSS, not an empty output.
  options.output_shared_memory.clear();
  options.outputs = {"OUTPUT__0", "OUTPUT__1"};
  result = client->Infer("triton_model", {input}, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("output 'OUTPUT__1' of model 'triton_model'"));

  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
}

}  // namespace
}  // namespace chronoserve::client
