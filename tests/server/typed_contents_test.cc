// Typed contents (InferTensorContents) in the field KServe v2 assigns the input's datatype, and
// only there: values in another field are refused naming the field the datatype takes, instead of
// a count of 0 or values silently dropped. BuildInferRequest on its own (no server), and the
// client's typed contents from a tensor whose data is shorter than its shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "client/inference_client.h"
#include "server/grpc/request_builder.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

ModelSpec Spec() {
  ModelSpec spec;
  spec.name = "typed";
  spec.version = 1;
  spec.max_batch_size = 4;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {2}}, {"INPUT__1", DataType::kInt64, {1}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  return spec;
}

// One item: INPUT__0 FP32 [1,2] = {1.5, -2.25} in fp32_contents, INPUT__1 INT64 [1,1] = {7}.
inference::ModelInferRequest Request() {
  inference::ModelInferRequest r;
  r.set_model_name("typed");
  auto* a = r.add_inputs();
  a->set_name("INPUT__0");
  a->set_datatype("FP32");
  a->add_shape(1);
  a->add_shape(2);
  a->mutable_contents()->add_fp32_contents(1.5f);
  a->mutable_contents()->add_fp32_contents(-2.25f);
  auto* b = r.add_inputs();
  b->set_name("INPUT__1");
  b->set_datatype("INT64");
  b->add_shape(1);
  b->add_shape(1);
  b->mutable_contents()->add_int64_contents(7);
  return r;
}

absl::Status Build(const inference::ModelInferRequest& request) {
  inference::ModelInferResponse response;
  return BuildInferRequest(Spec(), request, &response).status();
}

TEST(TypedContentsTest, ValuesInTheFieldOfTheDatatypeAreAccepted) {
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(), Request(), &response);
  ASSERT_TRUE(built.ok()) << built.status();
  float second;
  std::memcpy(&second, (*built)->inputs[0].data + 4, 4);
  EXPECT_EQ(second, -2.25f);
  int64_t id;
  std::memcpy(&id, (*built)->inputs[1].data, 8);
  EXPECT_EQ(id, 7);
}

TEST(TypedContentsTest, AnInputInTheWrongFieldNamesTheFieldItsDatatypeTakes) {
  inference::ModelInferRequest request = Request();
  auto* contents = request.mutable_inputs(0)->mutable_contents();
  contents->clear_fp32_contents();
  contents->add_int_contents(3);
  contents->add_int_contents(-4);
  const absl::Status status = Build(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("model 'typed' input 'INPUT__0'"));
  EXPECT_THAT(status.message(), HasSubstr("FP32 takes fp32_contents, but int_contents holds 2 values"));
}

// A typed value out of its datatype's range names the value, its index and the range.
TEST(TypedContentsTest, AValueOutOfItsDatatypesRangeNamesTheRange) {
  struct Row {
    DataType dtype;
    const char* name;
    int64_t bad;
    const char* expected;
  };
  for (const Row& row : {Row{DataType::kInt8, "INT8", 300, "value 300 at index 1 does not fit the datatype (8-bit signed: -128 to 127)"},
                         Row{DataType::kUint8, "UINT8", 300, "value 300 at index 1 does not fit the datatype (8-bit unsigned: 0 to 255)"},
                         Row{DataType::kInt16, "INT16", -40000,
                             "value -40000 at index 1 does not fit the datatype (16-bit signed: -32768 to 32767)"}}) {
    ModelSpec spec = Spec();
    spec.inputs[1] = {"INPUT__1", row.dtype, {2}};
    inference::ModelInferRequest request = Request();
    auto* in = request.mutable_inputs(1);
    in->set_datatype(row.name);
    in->clear_shape();
    in->add_shape(1);
    in->add_shape(2);
    in->clear_contents();
    if (row.dtype == DataType::kUint8) {
      in->mutable_contents()->add_uint_contents(7);
      in->mutable_contents()->add_uint_contents(static_cast<uint32_t>(row.bad));
    } else {
      in->mutable_contents()->add_int_contents(7);
      in->mutable_contents()->add_int_contents(static_cast<int32_t>(row.bad));
    }
    inference::ModelInferResponse response;
    const absl::Status status = BuildInferRequest(spec, request, &response).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << row.name << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(std::string("model 'typed' input 'INPUT__1': ") + row.expected)) << row.name;
  }
}

TEST(TypedContentsTest, ValuesInASecondFieldBesideTheRightOneAreRefusedNotDropped) {
  inference::ModelInferRequest request = Request();
  request.mutable_inputs(1)->mutable_contents()->add_fp64_contents(9.5);
  const absl::Status status = Build(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("model 'typed' input 'INPUT__1'"));
  EXPECT_THAT(status.message(), HasSubstr("INT64 takes int64_contents, but fp64_contents holds 1 values"));
}

TEST(TypedContentsTest, ACountThatDoesNotMatchTheShapeNamesTheField) {
  inference::ModelInferRequest request = Request();
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(8.0f);
  const absl::Status status = Build(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("contents hold 3 elements (fp32_contents), FP32 [1,2] needs 2"));
}

// The client sends no more values than its tensor's data holds (it used to read the shape's count
// past the buffer); the server then refuses the count, naming the input.
TEST(TypedContentsTest, AClientTensorShorterThanItsShapeSendsOnlyTheValuesItsDataHolds) {
  client::InferOptions typed;
  typed.typed_contents = true;
  const int64_t seven = 7;
  const float values[] = {1.5f, -2.25f};
  std::string one_int64(sizeof(seven), '\0');
  std::memcpy(one_int64.data(), &seven, sizeof(seven));
  std::string floats(sizeof(values), '\0');
  std::memcpy(floats.data(), values, sizeof(values));

  const client::Tensor short_int64{"INPUT__1", DataType::kInt64, {1, 1000}, one_int64};
  const client::Tensor short_fp32{"INPUT__0", DataType::kFp32, {1, 2}, floats.substr(0, 6)};  // 1.5 words
  const inference::ModelInferRequest request =
      client::InferenceClient::BuildRequest("typed", {short_fp32, short_int64}, typed);
  EXPECT_EQ(request.raw_input_contents_size(), 0);
  EXPECT_THAT(request.inputs(0).contents().fp32_contents(), ::testing::ElementsAre(1.5f));
  EXPECT_THAT(request.inputs(1).contents().int64_contents(), ::testing::ElementsAre(7));

  ModelSpec spec = Spec();
  spec.inputs[1].dims = {1000};
  inference::ModelInferResponse response;
  const absl::Status status = BuildInferRequest(spec, request, &response).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("model 'typed' input 'INPUT__0'"));
  EXPECT_THAT(status.message(), HasSubstr("contents hold 1 elements (fp32_contents), FP32 [1,2] needs 2"));

  // Data that holds the shape's count still sends exactly that count.
  const client::Tensor whole{"INPUT__0", DataType::kFp32, {1, 2}, floats};
  const inference::ModelInferRequest full = client::InferenceClient::BuildRequest("typed", {whole}, typed);
  EXPECT_THAT(full.inputs(0).contents().fp32_contents(), ::testing::ElementsAre(1.5f, -2.25f));
}

// A response from a Triton model with a string (BYTES) output beside a numeric one: the client
// cannot decode it and says which output of which model, as UNIMPLEMENTED (not the server's fault).
TEST(DecodeResponseTest, ABytesOutputIsUnimplementedNamingTheOutputAndModel) {
  inference::ModelInferResponse response;
  response.set_model_name("tokenizer");
  auto* scores = response.add_outputs();
  scores->set_name("SCORES");
  scores->set_datatype("FP32");
  scores->add_shape(1);
  const float score = 0.75f;
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(&score), sizeof(score)));
  auto* tokens = response.add_outputs();
  tokens->set_name("TOKENS");
  tokens->set_datatype("BYTES");
  tokens->add_shape(1);
  response.add_raw_output_contents(std::string("\x03\0\0\0abc", 7));
  absl::StatusOr<client::InferResult> decoded = client::InferenceClient::DecodeResponse(response);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kUnimplemented) << decoded.status();
  EXPECT_THAT(std::string(decoded.status().message()),
              HasSubstr("output 'TOKENS' of model 'tokenizer': this client does not decode unknown datatype 'BYTES'"));
  // Without it the same response decodes.
  response.mutable_outputs()->RemoveLast();
  response.mutable_raw_output_contents()->RemoveLast();
  decoded = client::InferenceClient::DecodeResponse(response);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->outputs.size(), 1u);
  EXPECT_EQ(decoded->outputs[0].data.size(), sizeof(float));
}

}  // namespace
}  // namespace chronoserve::server
