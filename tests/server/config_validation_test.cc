// config.pbtxt that cannot load: malformed text or fields (the error names the file, the line
// where it has one, and the reason), and values out of their range (named with the range expected).
#include "server/repository/model_config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

struct BadCase {
  const char* text;
  const char* expected;  // substring of the error
};

class MalformedConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedConfigTest, FailsWithFileLineAndReason) {
  auto spec = ParseModelConfig(GetParam().text, "models/m/config.pbtxt", "m", nullptr);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("models/m/config.pbtxt"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedConfigTest,
    ::testing::Values(
        BadCase{"name: \"m\"\nmax_batch_size: 8\ninput { name: \"x\" data_type: TYPE_FP32 dims: [3 }\n", "config.pbtxt:3:"},
        BadCase{"max_batch_size: \"eight\"\n", "config.pbtxt:1:"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP33 dims: 3 }\n", "config.pbtxt:1:"},
        BadCase{"name: \"other\"\n", "does not match its directory"},
        BadCase{"platform: \"onnxruntime_onnx\"\n", "pytorch_libtorch"},
        BadCase{"max_batch_size: -1\n", "max_batch_size -1 must be >= 0 (0: the model does not batch)"},
        BadCase{"platform: \"pytorch_libtorch\"\nbackend: \"onnxruntime\"\n", "backend 'onnxruntime' is not served"},
        BadCase{"max_batch_size: 1000000\ninput { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n",
                "max_batch_size 1000000 is above 65536"},
        BadCase{"output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "at least one input"},
        BadCase{"input { name: \"x\" dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "data_type is missing"},
        BadCase{"input { name: \"x\" data_type: TYPE_STRING dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n",
                "input 'x': chronoserve does not serve TYPE_STRING (BYTES) tensors; send text as token ids"},
        BadCase{"platform: \"ensemble\"\nensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ] }\n",
                "ensembles are not served by chronoserve"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 0 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "dims must be positive or -1"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "input 'x': dims are required"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\ninput { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "declared twice"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ndynamic_batching { preferred_batch_size: 1 }\n", "preferred_batch_size 1 on a model that does not batch"},
        BadCase{"max_batch_size: 4\ninput { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ndynamic_batching { preferred_batch_size: 8 }\n", "preferred_batch_size 8"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ninstance_group { kind: KIND_CPU gpus: 0 }\n", "KIND_CPU instance_group lists gpus"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ninstance_group { kind: KIND_MODEL }\n", "KIND_MODEL"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ninstance_group { kind: KIND_GPU gpus: -1 }\n",
                "instance_group gpus lists -1: expected a CUDA device ordinal (0 or more)"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return "case" + std::to_string(info.index); });

// A model with one variable input (x: FP32 [4,-1]) and one fixed one (f: INT8 [2,3]) that batches up
// to 8, followed by the field under test.
constexpr char kWarmIo[] =
    "max_batch_size: 8\n"
    "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4, -1 ] }, { name: \"f\" data_type: TYPE_INT8 dims: [ 2, 3 ] } ]\n"
    "output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n";

std::string WithWarmIo(const std::string& rest) { return kWarmIo + rest; }

class UnreasonableConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(UnreasonableConfigTest, FailsNamingFileFieldAndExpectation) {
  auto spec = ParseModelConfig(GetParam().text, "models/m/config.pbtxt", "m", nullptr);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("models/m/config.pbtxt: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(GetParam().expected));
}

const std::string kUnreasonable[][2] = {
    // model_warmup batch_size and count (uint32; once cast to int they wrapped to -1).
    {WithWarmIo("model_warmup { name: \"w\" batch_size: 4294967295 }"),
     "model_warmup 'w' batch_size 4294967295: expected 1 to max_batch_size (8)"},
    {WithWarmIo("model_warmup { name: \"w\" batch_size: 9 }"), "batch_size 9: expected 1 to max_batch_size (8)"},
    {WithWarmIo("model_warmup { name: \"w\" count: 4294967295 }"),
     "model_warmup 'w' count 4294967295: expected 0 (once) to 2147483647"},
    {WithWarmIo("model_warmup { name: \"w\" count: 2147483648 }"), "count 2147483648"},
    {"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n"
     "model_warmup { name: \"w\" batch_size: 2147483648 }",
     "batch_size 2147483648: expected 1 to 2147483647"},
    // model_warmup input dims.
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { dims: [ 4, 5, 6 ] random_data: true } } }"),
     "model_warmup 'w' input 'x': dims [4,5,6] have rank 3; expected rank 2"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { random_data: true } } }"),
     "input 'x': dims [] have rank 0; expected rank 2"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { dims: [ 4, 0 ] random_data: true } } }"),
     "input 'x': dims [4,0] do not fit the input's dims [4,-1]: expected every dim >= 1"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { dims: [ 4, -1 ] random_data: true } } }"),
     "dims [4,-1] do not fit"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"f\" value { dims: [ 2, 4 ] zero_data: true } } }"),
     "input 'f': dims [2,4] do not fit the input's dims [2,3]"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"f\" value { data_type: TYPE_INT64 zero_data: true } } }"),
     "input 'f': data_type TYPE_INT64 differs from the input's TYPE_INT8"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { dims: [ 4, 2000000000 ] random_data: true } } }"),
     "model_warmup 'w': its inputs at batch_size 1 need 32000000006 bytes of input; a warm-up request may hold at most 17179869184 bytes (16 GiB)"},
    {WithWarmIo("model_warmup { name: \"w\" inputs { key: \"x\" value { dims: [ 4, 4611686018427387904 ] random_data: true } } }"),
     "need more than 2^63 bytes of input"},
    {WithWarmIo("model_warmup { name: \"w\" batch_size: 1 inputs { key: \"x\" value { dims: [ 4, 200000000 ] random_data: true } } }"),
     "model_warmup 'w': its inputs at max_batch_size (8) items, as the serving warm-up sends the first sample, need 25600000048 bytes"},
    // Config dims whose largest warm-up batch, or one item, cannot be allocated.
    {"max_batch_size: 8\ninput { name: \"x\" data_type: TYPE_FP32 dims: [ 4, 20, 2000000000 ] }\n"
     "output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n",
     "the inputs at 8 item(s) (max_batch_size, variable dims as 1; the size the warm-up before READY sends) need 5120000000000 bytes"},
    {"max_batch_size: 65536\ninput { name: \"x\" data_type: TYPE_FP32 dims: [ 4, 20, 20000 ] }\n"
     "output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n",
     "the inputs at 65536 item(s)"},
    {"input { name: \"x\" data_type: TYPE_FP64 dims: [ 4000000000, 4000000000, -1, 4000000000 ] }\n"
     "output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n",
     "input 'x': dims [4000000000,4000000000,-1,4000000000] make one item larger than 2^63 bytes"},
    {"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\n"
     "output { name: \"y\" data_type: TYPE_FP32 dims: [ 1073741824, 1073741824, 2 ] }\n",
     "output 'y': dims [1073741824,1073741824,2] make one item larger than 2^63 bytes"},
    // Workers: each is a thread with a stream and staging buffers.
    {WithWarmIo("instance_group { count: 257 kind: KIND_CPU }"),
     "instance_group count 257: expected 1 to 256 (workers per group, on each GPU it lists)"},
    {WithWarmIo("instance_group { count: -1 }"), "instance_group count -1: expected 1 to 256"},
    // Durations the scheduler multiplies into int64 nanoseconds.
    {WithWarmIo("dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }"),
     "dynamic_batching.max_queue_delay_microseconds 18446744073709551615: expected 0 to 86400000000 (1 day)"},
    {WithWarmIo("dynamic_batching { max_queue_delay_microseconds: 86400000001 }"), "max_queue_delay_microseconds 86400000001"},
    {WithWarmIo("dynamic_batching { default_queue_policy { default_timeout_microseconds: 18446744073709551615 } }"),
     "dynamic_batching.default_queue_policy.default_timeout_microseconds 18446744073709551615: expected 0 to 86400000000 (1 day)"},
};

INSTANTIATE_TEST_SUITE_P(
    Cases, UnreasonableConfigTest,
    ::testing::ValuesIn([] {
      std::vector<BadCase> cases;
      for (const auto& c : kUnreasonable) cases.push_back(BadCase{c[0].c_str(), c[1].c_str()});
      return cases;
    }()),
    [](const ::testing::TestParamInfo<BadCase>& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace chronoserve::server
