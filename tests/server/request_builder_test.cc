#include "server/grpc/request_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "server/core/synthetic_request.h"
#include "server/grpc/shared_memory_params.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

ModelSpec Spec(int max_batch_size) {
  ModelSpec spec;
  spec.name = "net";
  spec.version = 3;
  spec.max_batch_size = max_batch_size;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {2, -1}}, {"INPUT__1", DataType::kInt8, {3}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}, {"OUTPUT__1", DataType::kBf16, {1}}};
  return spec;
}

std::string Floats(int n) {
  std::string bytes(n * 4, '\0');
  for (int i = 0; i < n; ++i) {
    float v = 0.25f * (i + 1);
    std::memcpy(&bytes[i * 4], &v, 4);
  }
  return bytes;
}

inference::ModelInferRequest Good(int batch = 2, int var = 5) {
  inference::ModelInferRequest r;
  r.set_model_name("net");
  r.set_id("req-7");
  auto* a = r.add_inputs();
  a->set_name("INPUT__0");
  a->set_datatype("FP32");
  for (int64_t d : {batch, 2, var}) a->add_shape(d);
  auto* b = r.add_inputs();
  b->set_name("INPUT__1");
  b->set_datatype("INT8");
  for (int64_t d : {batch, 3}) b->add_shape(d);
  r.add_raw_input_contents(Floats(batch * 2 * var));
  r.add_raw_input_contents(std::string(batch * 3, '\x05'));
  return r;
}

TEST(RequestBuilderTest, BuildsViewsShapeKeyAndResponseSkeleton) {
  inference::ModelInferRequest request = Good();
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  const InferRequest& r = **built;
  EXPECT_EQ(r.id, "req-7");
  EXPECT_EQ(r.batch_items, 2);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].data, request.raw_input_contents(0).data()) << "raw bytes are not copied";
  EXPECT_EQ(r.inputs[0].byte_size, 2u * 2 * 5 * 4);
  EXPECT_EQ(r.shape_key(), "[2,5];[3];");
  ASSERT_EQ(r.outputs.size(), 2u) << "no requested outputs = all";
  EXPECT_EQ(response.model_name(), "net");
  EXPECT_EQ(response.model_version(), "3");
  EXPECT_EQ(response.id(), "req-7");
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(1).datatype(), "BF16");
  EXPECT_EQ(r.outputs[1].data, response.mutable_raw_output_contents(1));
}

// The worker writes each output into memory the gRPC thread allocated (and will free): a static
// output's bytes (up to 64 KB) and every output's shape are sized here, a variable one's bytes are
// not.
TEST(RequestBuilderTest, SizesStaticOutputsOnTheCallingThread) {
  ModelSpec spec = Spec(8);
  spec.outputs.push_back({"OUTPUT__2", DataType::kFp32, {-1, 3}});
  inference::ModelInferRequest request = Good(/*batch=*/3);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(spec, request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  const InferRequest& r = **built;
  ASSERT_EQ(r.outputs.size(), 3u);
  EXPECT_GE(response.raw_output_contents(0).capacity(), 3u * 2 * 4) << "FP32 [3,2]";
  EXPECT_GE(response.raw_output_contents(1).capacity(), 3u * 1 * 2) << "BF16 [3,1]";
  EXPECT_TRUE(response.raw_output_contents(0).empty()) << "sized, not filled";
  EXPECT_LT(response.raw_output_contents(2).capacity(), 3u * 3 * 4) << "variable dims: sized by the backend";
  for (const OutputTensor& out : r.outputs) {
    EXPECT_TRUE(out.shape.empty()) << "the backend sets the shape";
    EXPECT_GE(out.shape.capacity(), spec.outputs[out.index].dims.size() + 1) << "batch dim + the output's dims";
  }
}

// A large static output is left to the backend: a queued request does not hold it while it waits.
TEST(RequestBuilderTest, LargeStaticOutputsAreNotHeldWhileQueued) {
  ModelSpec spec = Spec(8);
  spec.outputs[0].dims = {64 * 1024};  // FP32: 256 KB per item
  spec.outputs[1].dims = {1000};       // BF16: 2000 bytes per item
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(spec, Good(/*batch=*/1), &response);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_LT(response.raw_output_contents(0).capacity(), 64u * 1024) << "256 KB output not reserved";
  EXPECT_GE(response.raw_output_contents(1).capacity(), 2000u) << "the small one still is";
}

// A transport that sends bytes it does not own gets a place per response output for the backend to
// lend into; outputs it is likely to lend are not reserved in the response.
TEST(RequestBuilderTest, OutputsInTheMessageMayBeLentIntoTheTransportsPlaces) {
  ModelSpec spec = Spec(8);
  spec.outputs[0].dims = {2048};  // FP32: 8 KiB per item
  const inference::ModelInferRequest request = Good(/*batch=*/2);
  inference::ModelInferResponse response;
  std::vector<LentBytes> lent(7);  // a reused vector: sized again
  auto built = BuildInferRequest(spec, request, RawInputContents(request), &response, nullptr, &lent);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(lent.size(), 2u) << "one place per response output";
  ASSERT_EQ((*built)->outputs.size(), 2u);
  EXPECT_EQ((*built)->outputs[0].lend_to, &lent[0]);
  EXPECT_EQ((*built)->outputs[1].lend_to, &lent[1]);
  EXPECT_EQ(response.raw_output_contents(0).capacity(), std::string().capacity()) << "16 KiB: lent, not reserved";
  EXPECT_GE(response.raw_output_contents(1).capacity(), 2u * 2) << "4 bytes: copied, reserved";
  // Without places (the callback API) every output is written into the response.
  inference::ModelInferResponse copied;
  auto plain = BuildInferRequest(spec, request, &copied);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const OutputTensor& out : (*plain)->outputs) EXPECT_EQ(out.lend_to, nullptr);
  EXPECT_GE(copied.raw_output_contents(0).capacity(), 2u * 8192);
}

TEST(RequestBuilderTest, InputsMayArriveInAnyOrderAndOutputsCanBeFiltered) {
  inference::ModelInferRequest request = Good();
  request.mutable_inputs()->SwapElements(0, 1);
  request.mutable_raw_input_contents()->SwapElements(0, 1);
  request.add_outputs()->set_name("OUTPUT__1");
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->inputs[0].dtype, DataType::kFp32);
  ASSERT_EQ((*built)->outputs.size(), 1u);
  EXPECT_EQ((*built)->outputs[0].index, 1);
  EXPECT_EQ(response.outputs(0).name(), "OUTPUT__1");
}

TEST(RequestBuilderTest, TypedContentsAreConverted) {
  inference::ModelInferRequest request = Good(1, 1);
  request.clear_raw_input_contents();
  auto* fp = request.mutable_inputs(0)->mutable_contents();
  fp->add_fp32_contents(1.5f);
  fp->add_fp32_contents(-2.0f);
  for (int v : {-3, 0, 127}) request.mutable_inputs(1)->mutable_contents()->add_int_contents(v);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  const InputTensor& i8 = (*built)->inputs[1];
  ASSERT_EQ(i8.byte_size, 3u);
  EXPECT_EQ(static_cast<int8_t>(i8.data[0]), -3);
  EXPECT_EQ(static_cast<int8_t>(i8.data[2]), 127);
  float second;
  std::memcpy(&second, (*built)->inputs[0].data + 4, 4);
  EXPECT_EQ(second, -2.0f);
}

// Short byte strings keep their bytes inside the string object: a tensor's own bytes must stay
// where `data` points when the tensor, or the vector holding it, moves (ASan found synthetic
// warm-up requests reading a dead stack frame this way).
TEST(RequestBuilderTest, OwnedBytesStayValidWhenTheTensorMoves) {
  inference::ModelInferRequest request = Good(1, 1);
  request.clear_raw_input_contents();
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.5f);
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(-2.0f);
  for (int v : {-3, 5, 7}) request.mutable_inputs(1)->mutable_contents()->add_int_contents(v);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  std::vector<InputTensor> moved = std::move((*built)->inputs);
  moved.reserve(moved.capacity() + 8);  // a reallocation moves every tensor
  InputTensor last = std::move(moved.back());
  ASSERT_EQ(last.byte_size, 3u);
  EXPECT_EQ(last.data, last.owned_data->data());
  EXPECT_EQ(static_cast<int8_t>(last.data[1]), 5);
  EXPECT_EQ(moved[0].data, moved[0].owned_data->data());
  float first;
  std::memcpy(&first, moved[0].data, 4);
  EXPECT_EQ(first, 1.5f);

  ModelSpec tiny = Spec(8);
  std::vector<std::string> outputs;
  std::mt19937_64 rng(3);
  auto synthetic = MakeSyntheticRequest(tiny, 1, &outputs, rng, {});
  ASSERT_EQ(synthetic->inputs.size(), tiny.inputs.size());
  std::vector<InputTensor> inputs = std::move(synthetic->inputs);
  inputs.reserve(inputs.capacity() + 8);
  for (const InputTensor& in : inputs) {
    ASSERT_NE(in.owned_data, nullptr);
    EXPECT_EQ(in.data, in.owned_data->data()) << "input " << in.index;
    EXPECT_EQ(in.byte_size, in.owned_data->size());
  }
}

struct BadCase {
  const char* name;
  std::function<void(inference::ModelInferRequest&)> mutate;
  const char* expected;
};

// Input 0 (FP32 [batch,2,var]) as batch 1 with variable dim `var`, and empty raw contents.
void SetHugeInput(inference::ModelInferRequest& r, int64_t var = int64_t{1} << 61) {
  r.mutable_inputs(0)->set_shape(0, 1);
  r.mutable_inputs(0)->set_shape(2, var);
  r.mutable_inputs(1)->set_shape(0, 1);
  r.mutable_raw_input_contents(0)->clear();
  r.mutable_raw_input_contents(1)->resize(3, '\x05');
}

// Moves input `index` out of raw_input_contents into a shared-memory region of 0 bytes (the size
// a wrapped byte count asked for).
void InSharedMemory(inference::ModelInferRequest& r, int index) {
  auto& params = *r.mutable_inputs(index)->mutable_parameters();
  params[kShmRegionParam].set_string_param("region");
  params[kShmByteSizeParam].set_int64_param(0);
  r.mutable_raw_input_contents()->DeleteSubrange(index, 1);
}

// A client's shape of 300 dims is cut in the message, so what was expected still fits the 1 KiB a
// status message keeps (ToGrpcStatus).
TEST(RequestBuilderTest, ALongShapeIsCutSoTheExpectationSurvives) {
  inference::ModelInferRequest request = Good();
  request.mutable_inputs(1)->clear_shape();
  for (int d = 0; d < 300; ++d) request.mutable_inputs(1)->add_shape(1000000);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_FALSE(built.ok());
  const std::string message(built.status().message());
  EXPECT_LT(message.size(), 1024u) << message;
  EXPECT_THAT(message, HasSubstr("bytes) has rank 300, expected [-1,3] (first dim = batch, 1..8)"));
}

// A client's long input name, output name or datatype is quoted cut short, so the model's inputs
// or outputs (what was expected) survive the 1 KiB cut.
TEST(RequestBuilderTest, LongClientNamesAreCutSoTheExpectationSurvives) {
  const std::string long_name(3000, 'x');
  for (int which = 0; which < 3; ++which) {
    inference::ModelInferRequest request = Good();
    if (which == 0) request.mutable_inputs(1)->set_name(long_name);
    if (which == 1) request.add_outputs()->set_name(long_name);
    if (which == 2) request.mutable_inputs(0)->set_datatype(long_name);
    inference::ModelInferResponse response;
    auto built = BuildInferRequest(Spec(8), request, &response);
    ASSERT_FALSE(built.ok()) << which;
    const std::string message(built.status().message());
    EXPECT_LT(message.size(), 600u) << which << ": " << message.substr(0, 300);
    EXPECT_THAT(message, HasSubstr(which == 0   ? "(the model's inputs: INPUT__0, INPUT__1)"
                                   : which == 1 ? "(the model's outputs: OUTPUT__0, OUTPUT__1)"
                                                : "(3000 bytes)', expected FP32"))
        << which;
  }
}

TEST(RequestBuilderTest, BadInputsAreInvalidArgumentNamingModelTensorAndExpectation) {
  const BadCase cases[] = {
      {"unknown input", [](auto& r) { r.mutable_inputs(1)->set_name("INPUT__9"); }, "input 'INPUT__9': unknown input (the model's inputs: INPUT__0, INPUT__1)"},
      {"duplicate", [](auto& r) { r.mutable_inputs(1)->set_name("INPUT__0"); }, "input 'INPUT__0': given more than once"},
      {"missing", [](auto& r) { r.mutable_inputs()->RemoveLast(); r.mutable_raw_input_contents()->RemoveLast(); }, "input 'INPUT__1': missing"},
      {"dtype", [](auto& r) { r.mutable_inputs(0)->set_datatype("FP16"); }, "datatype 'FP16', expected FP32"},
      {"rank", [](auto& r) { r.mutable_inputs(1)->mutable_shape()->RemoveLast(); }, "has rank 1, expected [-1,3]"},
      {"fixed dim", [](auto& r) { r.mutable_inputs(1)->set_shape(1, 4); }, "does not match [-1,3]"},
      {"batch too big", [](auto& r) { r.mutable_inputs(0)->set_shape(0, 9); r.mutable_inputs(1)->set_shape(0, 9); }, "batch size 9 exceeds max_batch_size 8"},
      {"batch mismatch", [](auto& r) { r.mutable_inputs(1)->set_shape(0, 1); }, "input 'INPUT__1': batch size 1 differs from the 2 of input 'INPUT__0' (every input's dim 0 is the batch size)"},
      {"byte size", [](auto& r) { r.mutable_raw_input_contents(0)->pop_back(); }, "raw contents hold 79 bytes, FP32 [2,2,5] needs 80"},
      {"raw count", [](auto& r) { r.mutable_raw_input_contents()->RemoveLast(); }, "raw_input_contents has 1 entry for 2 inputs"},
      {"mixed", [](auto& r) { r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }, "has typed contents and raw_input_contents"},
      {"typed count", [](auto& r) { r.clear_raw_input_contents(); r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }, "contents hold 1 elements"},
      {"unknown output", [](auto& r) { r.add_outputs()->set_name("OUT"); }, "unknown requested output 'OUT' (the model's outputs: OUTPUT__0, OUTPUT__1)"},
      {"output twice", [](auto& r) { r.add_outputs()->set_name("OUTPUT__0"); r.add_outputs()->set_name("OUTPUT__0"); }, "output 'OUTPUT__0' requested twice"},
      {"zero dim", [](auto& r) { r.mutable_inputs(0)->set_shape(2, 0); }, "shape [2,2,0] has dim 2 = 0; every dim must be at least 1 (expected [-1,2,-1]"},
      {"negative dim", [](auto& r) { r.mutable_inputs(0)->set_shape(2, -1); }, "shape [2,2,-1] has dim 2 = -1; every dim must be at least 1"},
      {"zero batch", [](auto& r) { r.mutable_inputs(0)->set_shape(0, 0); }, "has dim 0 = 0; every dim must be at least 1"},
      // One input raw, the other typed: the mix is named, not the count it leaves.
      {"mixed, one raw entry", [](auto& r) { r.mutable_raw_input_contents()->RemoveLast(); for (int v : {1, 2, 3, 4, 5, 6}) r.mutable_inputs(1)->mutable_contents()->add_int_contents(v); }, "input 'INPUT__1': has typed contents, but the request also has raw_input_contents (1 entry)"},
      // FP32 [1,2,2^61]: 2^62 elements, 2^64 bytes, which wrapped to 0 and let empty contents through.
      {"bytes wrap, raw", [](auto& r) { SetHugeInput(r); }, "FP32 [1,2,2305843009213693952] needs more than 9223372036854775807 bytes"},
      {"bytes wrap, shared memory", [](auto& r) { SetHugeInput(r); InSharedMemory(r, 0); }, "FP32 [1,2,2305843009213693952] needs more than 9223372036854775807 bytes"},
      // 2^63 bytes: no wrap in size_t, but no tensor that large can exist.
      {"bytes above int64, shared memory", [](auto& r) { SetHugeInput(r, int64_t{1} << 60); InSharedMemory(r, 0); }, "FP32 [1,2,1152921504606846976] needs more than 9223372036854775807 bytes"},
      {"elements overflow", [](auto& r) { SetHugeInput(r, int64_t{1} << 62); }, "FP32 [1,2,4611686018427387904] needs more than 9223372036854775807 bytes"},
  };
  const SharedMemoryRegistry no_regions;  // shared memory on, nothing registered: sizes are checked first
  for (const BadCase& c : cases) {
    inference::ModelInferRequest request = Good();
    c.mutate(request);
    inference::ModelInferResponse response;
    auto built = BuildInferRequest(Spec(8), request, &response, &no_regions);
    ASSERT_FALSE(built.ok()) << c.name;
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(built.status().message()), HasSubstr("model 'net'")) << c.name;
    EXPECT_THAT(std::string(built.status().message()), HasSubstr(c.expected)) << c.name;
  }
}

// A BOOL element is one byte, 0 or 1: any other byte is refused, naming the element, whether the
// bytes came in the message, in pieces as gRPC received them, or typed (normalised there). Bytes in
// a client's GPU memory are not read on the host (SHARED_MEMORY.md says so).
TEST(RequestBuilderTest, BoolBytesOtherThanZeroAndOneAreRefused) {
  ModelSpec spec;
  spec.name = "masked";
  spec.version = 1;
  spec.max_batch_size = 8;
  spec.inputs = {{"MASK", DataType::kBool, {4}}};
  spec.outputs = {{"OUT", DataType::kFp32, {1}}};
  auto request = [](const std::string& raw) {
    inference::ModelInferRequest r;
    r.set_model_name("masked");
    auto* in = r.add_inputs();
    in->set_name("MASK");
    in->set_datatype("BOOL");
    for (int64_t d : {2, 4}) in->add_shape(d);
    if (!raw.empty()) r.add_raw_input_contents(raw);
    return r;
  };
  const std::string good("\x01\x00\x01\x01\x00\x00\x01\x00", 8);
  const std::string bad("\x01\x00\x01\x01\x00\x02\x01\x00", 8);  // element 5
  inference::ModelInferResponse response;
  EXPECT_TRUE(BuildInferRequest(spec, request(good), &response).ok());
  auto refused = BuildInferRequest(spec, request(bad), &response);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("model 'masked' input 'MASK': BOOL element 5 is byte 2; a BOOL element is one byte, 0 (false) or 1 (true)"));

  // As received from gRPC, in two pieces: the bad byte in the second.
  for (const std::string* bytes : {&good, &bad}) {
    const inference::ModelInferRequest head = request("");
    wire::ReceivedMessage received;
    wire::ReceivedBytes entry;
    entry.pieces = {absl::string_view(bytes->data(), 3), absl::string_view(bytes->data() + 3, 5)};
    entry.size = 8;
    received.entries.push_back(entry);
    auto built = BuildInferRequest(spec, head, RawInputContents(received), &response);
    if (bytes == &good) {
      EXPECT_TRUE(built.ok()) << built.status();
    } else {
      ASSERT_FALSE(built.ok());
      EXPECT_THAT(std::string(built.status().message()), HasSubstr("BOOL element 5 is byte 2")) << "pieces";
    }
  }

  // Typed bool_contents are 0 or 1 by construction.
  inference::ModelInferRequest typed = request("");
  for (bool v : {true, false, true, true, false, false, true, true}) typed.mutable_inputs(0)->mutable_contents()->add_bool_contents(v);
  EXPECT_TRUE(BuildInferRequest(spec, typed, &response).ok());

  // In a client's GPU memory (here a host stand-in filled with 3s): not read, so not refused.
  std::vector<char> fake_gpu(256, 3);
  SharedMemoryRegistry registry(nullptr, [&fake_gpu](const std::string&, int64_t, uint64_t, char** data)
                                             -> absl::StatusOr<std::shared_ptr<void>> {
    *data = fake_gpu.data();
    return std::shared_ptr<void>(fake_gpu.data(), [](void*) {});
  });
  ASSERT_TRUE(registry.RegisterCuda("gpu", std::string(64, 'h'), 0, fake_gpu.size()).ok());
  inference::ModelInferRequest on_gpu = request("");
  auto& params = *on_gpu.mutable_inputs(0)->mutable_parameters();
  params[kShmRegionParam].set_string_param("gpu");
  params[kShmByteSizeParam].set_int64_param(8);
  auto device_built = BuildInferRequest(spec, on_gpu, &response, &registry);
  ASSERT_TRUE(device_built.ok()) << device_built.status();
  EXPECT_TRUE((*device_built)->inputs[0].on_device());
}

// The byte-size cap is int64's, not a message's: a shared-memory input far larger than any gRPC
// message (4 GiB here) passes the size checks and reaches the region lookup (nothing registered).
TEST(RequestBuilderTest, LargeSharedMemoryInputsPassTheSizeCheck) {
  inference::ModelInferRequest request = Good();
  SetHugeInput(request, int64_t{1} << 29);  // FP32 [1,2,2^29]: 4 GiB
  InSharedMemory(request, 0);
  (*request.mutable_inputs(0)->mutable_parameters())[kShmByteSizeParam].set_int64_param(int64_t{1} << 32);
  inference::ModelInferResponse response;
  const SharedMemoryRegistry no_regions;
  auto built = BuildInferRequest(Spec(8), request, &response, &no_regions);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kNotFound) << built.status();
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("region"));
}

// A tensor in a CUDA region: the input views device memory (marked so the host never reads it), an
// output goes to device memory, and the shape key says which inputs are on the device, so a batch
// never mixes them with the same input on the host. Host memory stands in for the client's GPU memory.
TEST(RequestBuilderTest, TensorsInCudaRegionsAreMarkedAndKeyedByWhereTheirInputsAre) {
  std::vector<char> fake_gpu(1 << 16, 3);
  SharedMemoryRegistry registry(nullptr, [&fake_gpu](const std::string&, int64_t, uint64_t, char** data)
                                             -> absl::StatusOr<std::shared_ptr<void>> {
    *data = fake_gpu.data();
    return std::shared_ptr<void>(fake_gpu.data(), [](void*) {});
  });
  ASSERT_TRUE(registry.RegisterCuda("gpu", std::string(64, 'h'), 3, fake_gpu.size()).ok());
  auto device_request = [] {
    inference::ModelInferRequest r = Good();
    InSharedMemory(r, 0);
    auto& params = *r.mutable_inputs(0)->mutable_parameters();
    params[kShmRegionParam].set_string_param("gpu");
    params[kShmByteSizeParam].set_int64_param(2 * 2 * 5 * 4);
    params[kShmOffsetParam].set_int64_param(128);
    return r;
  };
  inference::ModelInferResponse response;
  auto first = BuildInferRequest(Spec(8), device_request(), &response, &registry);
  ASSERT_TRUE(first.ok()) << first.status();
  const InputTensor& in = (*first)->inputs[0];
  EXPECT_TRUE(in.on_device());
  EXPECT_TRUE(in.shared_memory);
  EXPECT_FALSE(in.host_pinned);
  EXPECT_EQ(in.data, fake_gpu.data() + 128);
  EXPECT_EQ(in.device_id, 3) << "the region's GPU";
  EXPECT_EQ(in.region, "gpu") << "the region's name, for a copy's error";
  EXPECT_FALSE((*first)->inputs[1].on_device()) << "the other input came in the message";
  EXPECT_TRUE((*first)->inputs[1].region.empty());
  EXPECT_EQ((*first)->inputs[1].device_id, -1);
  auto second = BuildInferRequest(Spec(8), device_request(), &response, &registry);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*first)->shape_key(), (*second)->shape_key()) << "device requests batch with each other";
  EXPECT_THAT((*first)->shape_key(), HasSubstr("#gpu:10")) << "input 0 on the device, input 1 not";

  // An output into the region (inputs in the message): raw_on_device, and batched with the rest.
  inference::ModelInferRequest out_only = Good();
  auto* out = out_only.add_outputs();
  out->set_name("OUTPUT__0");
  (*out->mutable_parameters())[kShmRegionParam].set_string_param("gpu");
  (*out->mutable_parameters())[kShmByteSizeParam].set_int64_param(64);
  auto built = BuildInferRequest(Spec(8), out_only, &response, &registry);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ((*built)->outputs.size(), 1u);
  EXPECT_TRUE((*built)->outputs[0].raw_on_device());
  EXPECT_EQ((*built)->outputs[0].raw_device_id, 3);
  EXPECT_EQ((*built)->outputs[0].raw, fake_gpu.data());
  auto plain_a = BuildInferRequest(Spec(8), Good(), &response, &registry);
  auto plain_b = BuildInferRequest(Spec(8), Good(), &response, &registry);
  ASSERT_TRUE(plain_a.ok() && plain_b.ok());
  EXPECT_EQ((*plain_a)->shape_key(), (*plain_b)->shape_key()) << "requests in the message still batch together";
  EXPECT_EQ((*built)->shape_key(), (*plain_a)->shape_key()) << "an output's place does not split batches";
  EXPECT_NE((*first)->shape_key(), (*plain_a)->shape_key()) << "inputs on the device and on the host do not mix";

  // The host never writes device memory: a backend that did not copy there gets an error.
  OutputTensor& device_out = (*built)->outputs[0];
  const std::string bytes(16, 'x');
  absl::Status written = WriteOutputBytes(Spec(8), "OUTPUT__0", bytes.data(), bytes.size(), device_out);
  EXPECT_EQ(written.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(written.message()), HasSubstr("GPU memory"));
  EXPECT_EQ(fake_gpu[0], 3) << "nothing was written";
}

// With shared memory off (no registry) a tensor that names a region is FAILED_PRECONDITION before
// any other check, even one its size would fail.
TEST(RequestBuilderTest, SharedMemoryOffRefusesARegionBeforeAnyOtherCheck) {
  inference::ModelInferRequest request = Good();
  SetHugeInput(request);
  InSharedMemory(request, 0);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response, /*shared_memory=*/nullptr);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kFailedPrecondition) << built.status();
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("--allow-shared-memory=false"));
  // An output region, listed after an unknown output and beside an input with a wrong shape: still
  // FAILED_PRECONDITION, naming the output.
  inference::ModelInferRequest mixed = Good();
  mixed.mutable_inputs(0)->set_shape(1, 99);
  mixed.add_outputs()->set_name("nope");
  auto* out = mixed.add_outputs();
  out->set_name("OUTPUT__0");
  (*out->mutable_parameters())[kShmRegionParam].set_string_param("out_region");
  (*out->mutable_parameters())[kShmByteSizeParam].set_int64_param(64);
  auto refused = BuildInferRequest(Spec(8), mixed, &response, /*shared_memory=*/nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("output 'OUTPUT__0'"));
}

TEST(RequestBuilderTest, TypedValuesOutOfRangeAndFp16WithoutTypedField) {
  inference::ModelInferRequest request = Good(1, 1);
  request.clear_raw_input_contents();
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(2);
  for (int v : {1, 300, 2}) request.mutable_inputs(1)->mutable_contents()->add_int_contents(v);
  inference::ModelInferResponse response;
  auto built = BuildInferRequest(Spec(8), request, &response);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("value 300 at index 1 does not fit"));

  ModelSpec half = Spec(8);
  half.inputs[0].dtype = DataType::kFp16;
  request.mutable_inputs(0)->set_datatype("FP16");
  built = BuildInferRequest(half, request, &response);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("FP16 has no typed contents field"));
}

TEST(RequestBuilderTest, NonBatchingModelTakesTheFullShape) {
  ModelSpec spec = Spec(0);
  inference::ModelInferRequest request = Good();
  inference::ModelInferResponse response;
  EXPECT_FALSE(BuildInferRequest(spec, request, &response).ok()) << "rank 3 for dims [2,-1]";
  spec.inputs[0].dims = {2, 2, -1};
  spec.inputs[1].dims = {2, 3};
  auto built = BuildInferRequest(spec, request, &response);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->batch_items, 1);
  EXPECT_EQ((*built)->shape_key(), "[2,2,5];[2,3];");
}

// A model with an instance on the CPU refuses a request holding GPU memory before it is queued (a CPU
// worker could take its batch), naming the model and the tensor; a request on the host, or a model
// whose instances are all on GPUs, passes.
TEST(RequestBuilderTest, GpuMemoryIsRefusedWhenAnInstanceRunsOnTheCpu) {
  const ModelSpec spec = Spec(8);
  InferRequest request;
  request.inputs.resize(2);
  request.inputs[0].index = 0;
  request.inputs[1].index = 1;
  request.outputs.resize(2);
  request.outputs[0].index = 0;
  request.outputs[1].index = 1;
  EXPECT_TRUE(RefuseGpuMemoryOnCpuInstances(spec, request, /*has_cpu_instance=*/true).ok()) << "all on the host";

  request.outputs[1].raw_device_id = 0;
  request.outputs[1].raw_name = "shared-memory region 'gout'";
  const absl::Status output = RefuseGpuMemoryOnCpuInstances(spec, request, true);
  EXPECT_EQ(output.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(output.message(),
            "model 'net' output 'OUTPUT__1' goes to CUDA shared memory (shared-memory region 'gout'), but an "
            "instance of this model runs on the CPU, which cannot use GPU memory; send it in the message or in "
            "system shared memory, or serve the model on GPUs only");

  request.inputs[1].device_id = 0;
  const absl::Status input = RefuseGpuMemoryOnCpuInstances(spec, request, true);
  EXPECT_EQ(input.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(input.message()), HasSubstr("model 'net' input 'INPUT__1' is in CUDA shared memory, but an "
                                                      "instance of this model runs on the CPU"));
  EXPECT_TRUE(RefuseGpuMemoryOnCpuInstances(spec, request, /*has_cpu_instance=*/false).ok()) << "GPU instances only";
}

}  // namespace
}  // namespace chronoserve::server
