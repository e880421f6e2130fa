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
#include "client/infer_stream.h"
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
    // A server without the shared-memory extension ignores the request's parameters: OUTPUT__1 in
    // the message too.
    response->add_raw_output_contents(ignores_shared_memory ? Floats({4.0f, 8.0f}) : "");
    return grpc::Status::OK;
  }
  bool ignores_shared_memory = false;
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

// KServe v2 lets a server send outputs in their typed `contents` instead of raw_output_contents: a
// response with no raw entry at all is read from them, each value narrowed to its datatype (INT8 in
// int_contents); a value that does not fit is DATA_LOSS naming the output.
inference::ModelInferResponse TypedResponse() {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  auto add = [&response](const char* name, const char* datatype) {
    auto* out = response.add_outputs();
    out->set_name(name);
    out->set_datatype(datatype);
    out->add_shape(1);
    out->add_shape(2);
    return out->mutable_contents();
  };
  auto* scores = add("SCORES", "FP32");
  scores->add_fp32_contents(0.75f);
  scores->add_fp32_contents(-3.5f);
  auto* small = add("SMALL", "INT8");
  small->add_int_contents(-128);
  small->add_int_contents(127);
  auto* ids = add("IDS", "UINT64");
  ids->add_uint64_contents(18446744073709551615ull);
  ids->add_uint64_contents(9007199254740993ull);
  return response;
}

class TypedContentsService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest*,
                          inference::ModelInferResponse* response) override {
    *response = TypedResponse();
    return grpc::Status::OK;
  }
};

TEST(InferenceClientDecodeTest, OutputsInTypedContentsAreReadAsTheirDatatypesBytes) {
  auto check = [](const absl::StatusOr<InferResult>& decoded) {
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(decoded->outputs.size(), 3u);
    EXPECT_EQ(decoded->outputs[0].data, Floats({0.75f, -3.5f}));
    EXPECT_EQ(decoded->outputs[1].data, std::string("\x80\x7f", 2));
    const uint64_t ids[] = {18446744073709551615ull, 9007199254740993ull};
    EXPECT_EQ(decoded->outputs[2].data, std::string(reinterpret_cast<const char*>(ids), sizeof(ids)));
  };
  check(InferenceClient::DecodeResponse(TypedResponse()));  // as a stream's answer is read

  TypedContentsService service;  // and as Infer reads a unary answer, its raw entries apart
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLoopbackServer(&service, &port);
  ASSERT_NE(server, nullptr);
  auto client = InferenceClient::Connect(absl::StrCat("127.0.0.1:", port), std::chrono::seconds(30));
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 2}, Floats({2.0f, -1.0f})};
  check(client->Infer("m", {input}, InferOptions{}));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();

  // A server that ignored a region asked for (one without the shared-memory extension) and answered
  // in typed contents: the values are the output, not dropped for a region the server never wrote.
  std::unique_ptr<grpc::Server> again = testing::StartLoopbackServer(&service, &port);
  ASSERT_NE(again, nullptr);
  auto reconnected = InferenceClient::Connect(absl::StrCat("127.0.0.1:", port), std::chrono::seconds(30));
  InferOptions in_region;
  in_region.output_shared_memory["SCORES"] = SharedMemoryRef{"scores_region", 8, 0};
  absl::StatusOr<InferResult> unary = reconnected->Infer("m", {input}, in_region);
  check(unary);
  again->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  again->Wait();
  inference::ModelStreamInferResponse streamed;
  *streamed.mutable_infer_response() = TypedResponse();
  const std::map<std::string, SharedMemoryRef> regions = {{"SCORES", SharedMemoryRef{"scores_region", 8, 0}}};
  absl::StatusOr<InferResult> stream_answer = InferStream::Decode(streamed, &regions);
  check(stream_answer);
  for (const absl::StatusOr<InferResult>* decoded : {&unary, &stream_answer}) {
    ASSERT_TRUE(decoded->ok());
    EXPECT_FALSE((*decoded)->outputs[0].shared_memory.has_value()) << "its values came in the message";
  }

  inference::ModelInferResponse too_wide = TypedResponse();
  too_wide.mutable_outputs(1)->mutable_contents()->set_int_contents(1, 300);
  absl::StatusOr<InferResult> refused = InferenceClient::DecodeResponse(too_wide);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("output 'SMALL' of model 'm': typed value 1 (300) does not fit its datatype"));
  inference::ModelInferResponse short_one = TypedResponse();
  short_one.mutable_outputs(0)->mutable_contents()->mutable_fp32_contents()->RemoveLast();
  refused = InferenceClient::DecodeResponse(short_one);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("output 'SCORES' of model 'm': 4 bytes in the response, but its shape [1,2] of FP32 needs 8"));
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

  // A server that ignored the region sent OUTPUT__1's bytes in the message: they are the output,
  // not thrown away for a region the server never wrote.
  service.ignores_shared_memory = true;
  options.outputs = {"OUTPUT__0"};
  options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{"out_region", 8, 16};
  result = client->Infer("triton_model", {input}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_FALSE(result->outputs[1].shared_memory.has_value()) << "its bytes came in the message";
  EXPECT_EQ(result->outputs[1].data, Floats({4.0f, 8.0f}));

  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
}

// A response that says an output is in a region must not also carry its bytes, nor a negative
// place in the region.
TEST(InferenceClientDecodeTest, ASharedMemoryOutputWithBytesOrANegativePlaceIsDataLoss) {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  auto* out = response.add_outputs();
  out->set_name("Y");
  out->set_datatype("FP32");
  out->add_shape(2);
  (*out->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  response.add_raw_output_contents(Floats({1.0f, 2.0f}));
  auto both = InferenceClient::DecodeResponse(response);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("its bytes came in the response too"));
  response.set_raw_output_contents(0, "");
  EXPECT_TRUE(InferenceClient::DecodeResponse(response).ok());
  (*out->mutable_parameters())["shared_memory_offset"].set_int64_param(-4);
  auto negative = InferenceClient::DecodeResponse(response);
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("shared_memory_offset -4 in the response is negative"));
}

// A streamed error's error_code is a gRPC code or UNKNOWN: 2^32 (which an int would wrap to OK, and
// an OK status in a StatusOr aborts) is UNKNOWN, named.
TEST(InferenceClientDecodeTest, AStreamErrorCodeThatIsNoGrpcCodeIsUnknown) {
  inference::ModelStreamInferResponse response;
  response.set_error_message("boom");
  (*response.mutable_infer_response()->mutable_parameters())["error_code"].set_int64_param(int64_t{1} << 32);
  auto decoded = InferStream::Decode(response);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("boom (error_code 4294967296 is no gRPC status code)"));
  (*response.mutable_infer_response()->mutable_parameters())["error_code"].set_int64_param(8);
  EXPECT_EQ(InferStream::Decode(response).status().code(), absl::StatusCode::kResourceExhausted);
}

// A streamed answer from Triton, whose output written to a region has an empty entry and no
// region parameters: with the request's regions it decodes as there; without, it is DATA_LOSS.
TEST(InferenceClientDecodeTest, AStreamedAnswerReadsAnOutputAskedForInARegionWithTheRequestsRegions) {
  inference::ModelStreamInferResponse response;
  inference::ModelInferResponse& r = *response.mutable_infer_response();
  r.set_model_name("m");
  for (const char* name : {"A", "B"}) {
    auto* out = r.add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(2);
  }
  r.add_raw_output_contents(Floats({1.0f, 2.0f}));
  r.add_raw_output_contents("");
  EXPECT_EQ(InferStream::Decode(response).status().code(), absl::StatusCode::kDataLoss);
  const std::map<std::string, SharedMemoryRef> regions = {{"B", SharedMemoryRef{"b_region", 8, 0}}};
  auto decoded = InferStream::Decode(response, &regions);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->outputs[1].shared_memory.has_value());
  EXPECT_EQ(decoded->outputs[1].shared_memory->region, "b_region");
  EXPECT_EQ(decoded->outputs[0].data, Floats({1.0f, 2.0f}));
}

}  // namespace
}  // namespace chronoserve::client
