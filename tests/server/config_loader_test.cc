// config.pbtxt parsing: the fields served, their defaults and bounds, the Triton fields reported
// or refused by name, and warm-up samples. Malformed and out-of-range configs:
// config_validation_test.cc; model directories and names: model_repository_test.cc.
#include "server/repository/model_config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "absl/strings/str_replace.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

constexpr char kGood[] = R"pb(
name: "policy"
platform: "pytorch_libtorch"
max_batch_size: 64
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4, -1 ] } ]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP16 dims: [ 400 ] },
  { name: "OUTPUT__1" data_type: TYPE_BF16 dims: [ 1 ] }
]
instance_group [ { name: "cpu_pair" count: 2 kind: KIND_CPU }, { kind: KIND_GPU gpus: [ 0, 1 ] } ]
dynamic_batching {
  preferred_batch_size: [ 32, 8 ]
  max_queue_delay_microseconds: 100
  default_queue_policy { max_queue_size: 16 default_timeout_microseconds: 5000 }
}
model_warmup [ { name: "w" batch_size: 4 count: 3 inputs { key: "INPUT__0" value { data_type: TYPE_FP32 dims: [ 4, 7 ] random_data: true } } } ]
optimization { cuda { graphs: true } }
parameters { key: "keep_warm_ms" value { string_value: "50" } }
)pb";

TEST(ModelConfigTest, ParsesEveryImplementedField) {
  std::vector<std::string> ignored;
  auto spec = ParseModelConfig(kGood, "policy/config.pbtxt", "policy", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ignored.empty());
  EXPECT_EQ(spec->name, "policy");
  EXPECT_EQ(spec->max_batch_size, 64);
  ASSERT_EQ(spec->inputs.size(), 1u);
  EXPECT_EQ(spec->inputs[0].dtype, DataType::kFp32);
  EXPECT_EQ(spec->inputs[0].dims, (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(spec->outputs[0].dtype, DataType::kFp16);
  EXPECT_EQ(spec->outputs[1].dtype, DataType::kBf16);
  ASSERT_EQ(spec->instance_groups.size(), 2u);
  EXPECT_EQ(spec->instance_groups[0].kind, InstanceKind::kCpu);
  EXPECT_EQ(spec->instance_groups[0].count, 2);
  EXPECT_EQ(spec->instance_groups[0].name, "cpu_pair");
  EXPECT_EQ(spec->instance_groups[1].name, "");
  EXPECT_EQ(spec->instance_groups[1].kind, InstanceKind::kGpu);
  EXPECT_EQ(spec->instance_groups[1].count, 1) << "count defaults to 1";
  EXPECT_EQ(spec->instance_groups[1].gpus, (std::vector<int>{0, 1}));
  EXPECT_TRUE(spec->dynamic_batching.enabled);
  EXPECT_EQ(spec->dynamic_batching.preferred_batch_sizes, (std::vector<int>{8, 32})) << "sorted";
  EXPECT_EQ(spec->dynamic_batching.max_queue_delay_us, 100u);
  EXPECT_EQ(spec->dynamic_batching.queue_policy.max_queue_size, 16u);
  EXPECT_EQ(spec->dynamic_batching.queue_policy.default_timeout_microseconds, 5000u);
  ASSERT_EQ(spec->warmups.size(), 1u);
  EXPECT_EQ(spec->warmups[0].batch_size, 4);
  EXPECT_EQ(spec->warmups[0].count, 3);
  EXPECT_EQ(spec->warmups[0].input_dims.at("INPUT__0"), (std::vector<int64_t>{4, 7}));
  EXPECT_TRUE(spec->cuda_graphs);
  EXPECT_EQ(spec->parameters.at("keep_warm_ms"), "50");
  EXPECT_EQ(spec->InputIndex("INPUT__0"), 0);
  EXPECT_EQ(spec->OutputIndex("OUTPUT__1"), 1);
  EXPECT_EQ(spec->OutputIndex("nope"), -1);
}

TEST(ModelConfigTest, DefaultsForAMinimalConfig) {
  auto spec = ParseModelConfig(
      "input { name: \"x\" data_type: TYPE_INT64 dims: 3 }\noutput { name: \"y\" data_type: TYPE_BOOL dims: 3 }",
      "m/config.pbtxt", "m", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "m") << "name defaults to the directory";
  EXPECT_EQ(spec->max_batch_size, 0);
  ASSERT_EQ(spec->instance_groups.size(), 1u);
  EXPECT_EQ(spec->instance_groups[0].kind, InstanceKind::kAuto);
  EXPECT_FALSE(spec->dynamic_batching.enabled);
}

// As Triton: dynamic_batching on a model that does not batch loads; every request runs alone, and
// the queue policy (how many may wait, for how long) still holds.
TEST(ModelConfigTest, DynamicBatchingOnAModelThatDoesNotBatchKeepsItsQueuePolicy) {
  auto spec = ParseModelConfig(
      "input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n"
      "dynamic_batching { max_queue_delay_microseconds: 500 default_queue_policy { max_queue_size: 2 "
      "default_timeout_microseconds: 7000 } }\n",
      "m/config.pbtxt", "m", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->max_batch_size, 0);
  EXPECT_TRUE(spec->dynamic_batching.enabled);
  EXPECT_EQ(spec->dynamic_batching.queue_policy.max_queue_size, 2u);
  EXPECT_EQ(spec->dynamic_batching.queue_policy.default_timeout_microseconds, 7000u);
}

// kGood without its `optimization` block, so a test can add one.
std::string WithoutOptimization() {
  return absl::StrReplaceAll(kGood, {{"optimization { cuda { graphs: true } }", ""}});
}

TEST(ModelConfigTest, TritonFieldsNotServedAreReportedByNameAndIgnored) {
  std::vector<std::string> ignored;
  auto spec = ParseModelConfig(WithoutOptimization() + "\nresponse_cache { enable: true }\nmetric_tags {}\n"
                               "model_metrics { metric_control {} }\noptimization { input_pinned_memory { enable: true } }\n",
                               "policy/config.pbtxt", "policy", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(ignored, ::testing::ElementsAre("response_cache", "metric_tags", "model_metrics", "optimization.input_pinned_memory"));
}

// A decoupled model sends any number of responses a request: not served, so the load fails saying
// so. Its default, `decoupled: false`, is what chronoserve does: it loads without a warning.
TEST(ModelConfigTest, ADecoupledModelFailsItsLoadAndDecoupledFalseLoadsQuietly) {
  std::vector<std::string> ignored;
  auto decoupled = ParseModelConfig(WithoutOptimization() + "\nmodel_transaction_policy { decoupled: true }\n",
                                    "policy/config.pbtxt", "policy", &ignored);
  ASSERT_FALSE(decoupled.ok());
  EXPECT_EQ(decoupled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(decoupled.status().message()),
              ::testing::HasSubstr("policy/config.pbtxt: model_transaction_policy.decoupled is true: chronoserve "
                                   "answers every request with exactly one response"));
  for (const char* off : {"model_transaction_policy { decoupled: false }", "model_transaction_policy { }"}) {
    ignored.clear();
    auto spec = ParseModelConfig(WithoutOptimization() + "\n" + off + "\n", "policy/config.pbtxt", "policy", &ignored);
    ASSERT_TRUE(spec.ok()) << off << ": " << spec.status();
    EXPECT_TRUE(ignored.empty()) << off << ": " << ::testing::PrintToString(ignored);
  }
}

// Triton's own examples write lists of messages without a colon; for a field model_config.proto
// leaves out, protobuf's parser takes that only as `field: [`, which the loader falls back to.
TEST(ModelConfigTest, TritonFieldsWrittenAsListsWithoutAColonAreIgnoredOrRefusedByName) {
  std::vector<std::string> ignored;
  auto spec = ParseModelConfig(
      absl::StrReplaceAll(WithoutOptimization(),
                          {{"{ name: \"cpu_pair\" count: 2 kind: KIND_CPU }",
                            "{ name: \"cpu_pair\" count: 2 kind: KIND_CPU\n"
                            "  rate_limiter { resources [ { name: \"R1\" count: 4 }, { name: \"R2\" global: true count: 2 } ] "
                            "priority: 2 } }"}}) +
          "cc_model_filenames [ { key: \"7.5.0\" value: \"model.pt\" } ]\n"
          "model_metrics { metric_control [ { metric_identifier { family: \"x\" } } ] }  # a comment [\n"
          "model_repository_agents { agents: [ ] }\n",
      "policy/config.pbtxt", "policy", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(ignored, ::testing::ElementsAre("instance_group.rate_limiter", "cc_model_filenames", "model_metrics",
                                              "model_repository_agents"));
  EXPECT_EQ(spec->max_batch_size, 64) << "the rest read as without the lists";
  ASSERT_EQ(spec->instance_groups.size(), 2u);
  EXPECT_EQ(spec->instance_groups[0].count, 2);

  auto refused = ParseModelConfig(WithoutOptimization() +
                                      "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"N\" "
                                      "data_type: TYPE_FP32 source_input: \"INPUT__0\" } ]\n",
                                  "policy/config.pbtxt", "policy", nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("policy/config.pbtxt: field 'batch_input' is not supported by chronoserve"));

  // Text that does not parse either way is reported as the file says it, at its line and column.
  auto broken = ParseModelConfig(WithoutOptimization() + "max_batch_size: [ 8\n", "policy/config.pbtxt", "policy",
                                 nullptr);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("policy/config.pbtxt:"));
}

TEST(ModelConfigTest, ColonsGoBeforeListsOnlyAfterFieldNamesOutsideStringsAndComments) {
  // An empty list is dropped with its field (and a separator after it), colon or not.
  EXPECT_EQ(NormalizeListsForSkipping("r: { shape: [ ] } a [ ] b:[  # c\n], d: 1"), "r: { } \n d: 1")
      << "the dropped list's line break stays";
  EXPECT_EQ(NormalizeListsForSkipping("s: \"x: [ ]\" # y: [ ]\n"), "s: \"x: [ ]\" # y: [ ]\n") << "not in strings or comments";
  EXPECT_EQ(NormalizeListsForSkipping("kind: KIND_GPU [ ]"), "kind: KIND_GPU [ ]") << "a value, not a name";
  EXPECT_EQ(NormalizeListsForSkipping("a [ { b [ 1 ] } ]"), "a: [ { b: [ 1 ] } ]");
  EXPECT_EQ(NormalizeListsForSkipping("a: [ 1 ] b:[2]"), "a: [ 1 ] b:[2]") << "already there";
  EXPECT_EQ(NormalizeListsForSkipping("kind: KIND_GPU [x] {}"), "kind: KIND_GPU [x] {}") << "a value, not a name";
  EXPECT_EQ(NormalizeListsForSkipping("s: \"a [\" t: 'b\\' [' # c [\nd # e\n ["),
            "s: \"a [\" t: 'b\\' [' # c [\nd: # e\n [");
}

// A config whose Triton-form list (no colon) the first reading stops at, and with a real error on
// a later line: the error named is the later line's, which the second reading reached (the list
// loads once it is mended); lines after a dropped empty list keep their numbers.
TEST(ModelConfigTest, AnErrorPastTritonsListFormIsTheOneNamed) {
  const std::string head =
      "max_batch_size: 8\n"
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
      "instance_group [ { count: 1 kind: KIND_CPU rate_limiter { resources [ { name: \"R1\" count: 4 } ] } } ]\n"
      "parameters: { key: \"empty\" value: { string_value: \"\" } }\n"
      "optimization { graph: { level: 0 } execution_accelerators { gpu_execution_accelerator: [ ]\n } }\n";
  auto broken = ParseModelConfig(head + "dynamic_batching { max_queue_delay_microseconds: 100us }\n",
                                 "m/config.pbtxt", "m", nullptr);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("m/config.pbtxt:8:"));
  auto mended = ParseModelConfig(head + "dynamic_batching { max_queue_delay_microseconds: 100 }\n", "m/config.pbtxt",
                                 "m", nullptr);
  EXPECT_TRUE(mended.ok()) << mended.status();
}

// An error the second reading finds is named at the file's own column, though that reading added a
// colon (Triton's `resources [`) or dropped an empty list before it on the same line: each config
// below fails as its twin of the same length does, whose first reading parses up to the error.
TEST(ModelConfigTest, AnErrorTheSecondReadingFindsIsNamedAtTheFilesOwnColumn) {
  const std::string io =
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
  struct Twins {
    std::string rewritten, as_is;
  };
  const Twins cases[] = {
      {"instance_group [ { count: 1 rate_limiter { resources [ { name: \"R1\" count: 4 } ] } } ]\tmax_batch_size: x\n",
       "instance_group [ { count: 1 rate_limiter { resources:[ { name: \"R1\" count: 4 } ] } } ]\tmax_batch_size: x\n"},
      {"instance_group [ { count: 1 rate_limiter { resources [  ] } } ]  max_batch_size: x\n",
       "instance_group [ { count: 1 rate_limiter { resources:[{}] } } ]  max_batch_size: x\n"},
  };
  for (const Twins& c : cases) {
    ASSERT_EQ(c.rewritten.size(), c.as_is.size());
    auto rewritten = ParseModelConfig(io + c.rewritten, "m/config.pbtxt", "m", nullptr);
    auto as_is = ParseModelConfig(io + c.as_is, "m/config.pbtxt", "m", nullptr);
    ASSERT_FALSE(rewritten.ok()) << c.rewritten;
    ASSERT_FALSE(as_is.ok()) << c.as_is;
    EXPECT_THAT(std::string(as_is.status().message()), HasSubstr("m/config.pbtxt:3:")) << c.as_is;
    EXPECT_EQ(rewritten.status().message(), as_is.status().message()) << c.rewritten;
  }
}

TEST(ModelConfigTest, ATypoOrATritonFieldThatChangesTheTensorsFailsTheLoadNamingIt) {
  struct Case {
    std::string extra, message;
  };
  const Case cases[] = {
      {"max_batch_sise: 8\n",
       "policy/config.pbtxt: unknown field 'max_batch_sise' in ModelConfig: Triton's model configuration has no"},
      // A Triton field name, but of another message: `graphs` was meant.
      {"optimization { cuda { graph: true } }\n", "unknown field 'graph' in ModelOptimizationPolicy.Cuda"},
      {"sequence_batching {}\n", "policy/config.pbtxt: field 'sequence_batching' is not supported by chronoserve"},
      {"input { name: \"extra\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } }\n",
       "field 'reshape' is not supported by chronoserve: the model would receive other tensors"},
      // Triton's reshape to a scalar: an empty list, which protobuf's skipper cannot take by itself.
      {"input { name: \"extra\" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }\n",
       "field 'reshape' is not supported by chronoserve: the model would receive other tensors"},
      {"input { name: \"extra\" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true }\n",
       "field 'allow_ragged_batch' is not supported by chronoserve"},
      {"input { name: \"extra\" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true }\n",
       "field 'is_shape_tensor' is not supported by chronoserve"},
      {"output { name: \"extra\" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true }\n",
       "field 'is_shape_tensor' is not supported by chronoserve"},
  };
  for (const Case& c : cases) {
    auto spec = ParseModelConfig(WithoutOptimization() + c.extra, "policy/config.pbtxt", "policy", nullptr);
    ASSERT_FALSE(spec.ok()) << c.extra;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.message)) << c.extra;
  }
}

// Triton's configs often spell these out at their default: false changes nothing, so it loads.
TEST(ModelConfigTest, TensorFieldsAtTheirDefaultLoad) {
  auto spec = ParseModelConfig(WithoutOptimization() +
                                   "input { name: \"extra\" data_type: TYPE_FP32 dims: [ 4 ] "
                                   "allow_ragged_batch: false is_shape_tensor: false }\n"
                                   "output { name: \"extra_out\" data_type: TYPE_FP32 dims: [ 4 ] is_shape_tensor: false }\n",
                               "policy/config.pbtxt", "policy", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->inputs.back().name, "extra");
  EXPECT_EQ(spec->outputs.back().name, "extra_out");
}

// Some Windows editors start a UTF-8 file with a byte-order mark; the parser would stop at it.
TEST(ModelConfigTest, AUtf8ByteOrderMarkIsSkipped) {
  auto spec = ParseModelConfig("\xEF\xBB\xBF" + std::string(kGood), "policy/config.pbtxt", "policy", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->max_batch_size, 64);
  // Anywhere else it is text the parser refuses, as before.
  auto inside = ParseModelConfig("max_batch_size: 8\n\xEF\xBB\xBF", "policy/config.pbtxt", "policy", nullptr);
  EXPECT_FALSE(inside.ok());
}

TEST(ModelConfigTest, FieldsDeclaredButNotActedOnAreReportedOnceByName) {
  std::vector<std::string> ignored;
  auto spec = ParseModelConfig(R"pb(
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: 3 optional: true },
        { name: "z" data_type: TYPE_FP32 dims: 3 optional: true format: FORMAT_NCHW } ]
output { name: "y" data_type: TYPE_FP32 dims: 3 label_filename: "labels.txt" }
dynamic_batching {
  preserve_ordering: true
  default_queue_policy { allow_timeout_override: true }
}
optimization { cuda { graphs: true busy_wait_events: true output_copy_stream: true } }
)pb", "m/config.pbtxt", "m", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(ignored, ::testing::ElementsAre("input.format", "output.label_filename", "input.optional", "dynamic_batching.preserve_ordering",
                                              "dynamic_batching.default_queue_policy.allow_timeout_override",
                                              "optimization.cuda.busy_wait_events",
                                              "optimization.cuda.output_copy_stream"));
  // At their defaults they say nothing.
  spec = ParseModelConfig(R"pb(
max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: 3 optional: false }
output { name: "y" data_type: TYPE_FP32 dims: 3 }
dynamic_batching { preserve_ordering: false default_queue_policy { allow_timeout_override: false } }
optimization { cuda { busy_wait_events: false output_copy_stream: false } }
)pb", "m/config.pbtxt", "m", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ignored.empty()) << ignored.front();
}

TEST(ModelConfigTest, WarmupAndTimeLimitsAcceptTheirBounds) {
  auto spec = ParseModelConfig(R"pb(
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4, -1 ] }, { name: "f" data_type: TYPE_INT8 dims: [ 2, 3 ] } ]
output { name: "y" data_type: TYPE_FP32 dims: 3 }
instance_group { count: 256 kind: KIND_CPU }
dynamic_batching {
  max_queue_delay_microseconds: 86400000000
  default_queue_policy { default_timeout_microseconds: 86400000000 }
}
model_warmup [
  { name: "full" batch_size: 8 count: 2147483647
    inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4, 9 ] random_data: true } }
    inputs { key: "f" value { zero_data: true } } },
  { name: "defaults" }
]
)pb", "m/config.pbtxt", "m", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->instance_groups.at(0).count, 256);
  EXPECT_EQ(spec->dynamic_batching.max_queue_delay_us, 86'400'000'000u);
  EXPECT_EQ(spec->dynamic_batching.queue_policy.default_timeout_microseconds, 86'400'000'000u);
  ASSERT_EQ(spec->warmups.size(), 2u);
  EXPECT_EQ(spec->warmups[0].batch_size, 8);
  EXPECT_EQ(spec->warmups[0].count, 2147483647);
  EXPECT_EQ(spec->warmups[0].input_dims.at("x"), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(spec->warmups[0].input_dims.at("f"), (std::vector<int64_t>{2, 3})) << "empty dims: the input's";
  EXPECT_EQ(spec->warmups[0].zero_data_inputs, (std::set<std::string>{"f"})) << "only the input marked zero_data";
  EXPECT_EQ(spec->warmups[1].batch_size, 1) << "batch_size 0 runs at 1";
  EXPECT_EQ(spec->warmups[1].count, 1) << "count 0 runs once";
  EXPECT_TRUE(spec->warmups[1].zero_data_inputs.empty());
}

bool AllZero(const std::string& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

TEST(ModelConfigTest, ZeroDataWarmupInputsAreSentAsZeros) {
  auto spec = ParseModelConfig(R"pb(
max_batch_size: 4
input [ { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output { name: "y" data_type: TYPE_FP32 dims: 3 }
model_warmup [
  { name: "tokens" batch_size: 2 inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } } },
  { name: "noise" batch_size: 2 inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 8 ] random_data: true } } }
]
)pb", "m/config.pbtxt", "m", nullptr);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::mt19937_64 rng(7);
  std::vector<std::string> outputs;
  for (const auto* dims : {&spec->warmups[0].input_dims, &spec->warmups[1].input_dims}) {
    auto request = MakeSyntheticRequest(*spec, 2, &outputs, rng, *dims);
    ASSERT_EQ(request->inputs.size(), 2u);
    const std::string& ids = *request->inputs[0].owned_data;
    const std::string& x = *request->inputs[1].owned_data;
    EXPECT_EQ(ids.size(), (dims == &spec->warmups[0].input_dims ? 2u * 16u : 2u) * 8u);
    EXPECT_TRUE(AllZero(ids)) << "zero_data input";
    EXPECT_EQ(x.size(), 2u * 8u * 4u);
    EXPECT_FALSE(AllZero(x)) << "random_data input";
  }
  // The server's own warm-up at other batch sizes keeps the zeros the author asked for.
  auto own = MakeSyntheticRequest(*spec, 4, &outputs, rng, {});
  EXPECT_TRUE(AllZero(*own->inputs[0].owned_data));
  EXPECT_FALSE(AllZero(*own->inputs[1].owned_data));
  // One sample that marks ids zero_data and x random_data: only ids is zeros.
  auto mixed = ParseModelConfig(R"pb(
max_batch_size: 4
input [ { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output { name: "y" data_type: TYPE_FP32 dims: 3 }
model_warmup { name: "both" batch_size: 2
  inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } }
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 8 ] random_data: true } } }
)pb", "m/config.pbtxt", "m", nullptr);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto both = MakeSyntheticRequest(*mixed, 2, &outputs, rng, mixed->warmups[0].input_dims);
  EXPECT_TRUE(AllZero(*both->inputs[0].owned_data)) << "zero_data input";
  EXPECT_FALSE(AllZero(*both->inputs[1].owned_data)) << "random_data input of the same sample";
  // Without zero_data the same input gets random values: 0 or 1 for an integer (an index into any
  // table of two rows or more; a negative id broke the warm-up, and on a GPU the card's CUDA context).
  spec->warmups.clear();
  auto random = MakeSyntheticRequest(*spec, 4, &outputs, rng, {});
  const std::string& ids = *random->inputs[0].owned_data;
  EXPECT_FALSE(AllZero(ids));
  std::set<int64_t> values;
  for (size_t i = 0; i < ids.size() / sizeof(int64_t); ++i) {
    int64_t v;
    std::memcpy(&v, ids.data() + i * sizeof(int64_t), sizeof(v));
    values.insert(v);
  }
  for (int64_t v : values) EXPECT_TRUE(v == 0 || v == 1) << v;
}

}  // namespace
}  // namespace chronoserve::server
