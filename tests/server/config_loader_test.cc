#include "server/repository/model_config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_GPU gpus: [ 0, 1 ] } ]
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

TEST(ModelConfigTest, UnknownFieldsAreReportedByNameAndIgnored) {
  std::vector<std::string> ignored;
  auto spec = ParseModelConfig(std::string(kGood) + "\nresponse_cache { enable: true }\nsequence_batching {}\n",
                               "policy/config.pbtxt", "policy", &ignored);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(ignored, ::testing::ElementsAre("response_cache", "sequence_batching"));
}

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

constexpr char kIo[] = "input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedConfigTest,
    ::testing::Values(
        BadCase{"name: \"m\"\nmax_batch_size: 8\ninput { name: \"x\" data_type: TYPE_FP32 dims: [3 }\n", "config.pbtxt:3:"},
        BadCase{"max_batch_size: \"eight\"\n", "config.pbtxt:1:"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP33 dims: 3 }\n", "config.pbtxt:1:"},
        BadCase{"name: \"other\"\n", "does not match its directory"},
        BadCase{"platform: \"onnxruntime_onnx\"\n", "pytorch_libtorch"},
        BadCase{"max_batch_size: -1\n", "max_batch_size must be >= 0"},
        BadCase{"output { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "at least one input"},
        BadCase{"input { name: \"x\" dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "data_type is missing"},
        BadCase{"input { name: \"x\" data_type: TYPE_STRING dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "TYPE_STRING"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 0 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "dims must be positive or -1"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\ninput { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n", "declared twice"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ndynamic_batching {}\n", "needs max_batch_size > 0"},
        BadCase{"max_batch_size: 4\ninput { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ndynamic_batching { preferred_batch_size: 8 }\n", "preferred_batch_size 8"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ninstance_group { kind: KIND_CPU gpus: 0 }\n", "KIND_CPU instance_group lists gpus"},
        BadCase{"input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\ninstance_group { kind: KIND_MODEL }\n", "KIND_MODEL"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return "case" + std::to_string(info.index); });

TEST(ModelNameTest, RejectsPathTricks) {
  EXPECT_TRUE(ValidateModelName("policy_net-2.v1").ok());
  for (const char* bad : {"", ".", "..", "../etc", "a/b", "a\\b"}) {
    EXPECT_EQ(ValidateModelName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ValidateModelName(std::string("a\0b", 3)).ok());
  EXPECT_FALSE(ValidateModelName(std::string(256, 'a')).ok());
}

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("cs_repo_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::filesystem::path root_;
};

TEST_F(RepositoryTest, PicksTheLatestVersionAndChecksTheFile) {
  Write("m/config.pbtxt", kIo);
  Write("m/1/model.pt", "x");
  Write("m/3/model.pt", "x");
  Write("m/2/model.pt", "x");
  Write("m/notes/readme", "x");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 3);
  EXPECT_EQ(spec->model_path, (root_ / "m" / "3" / "model.pt").string());
}

TEST_F(RepositoryTest, SpecificVersionPolicyAndMissingFile) {
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { specific { versions: [1, 2] } }\n");
  Write("m/1/model.pt", "x");
  Write("m/2/other.pt", "x");
  Write("m/3/model.pt", "x");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("2/model.pt does not exist"));
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { specific { versions: [1, 2] } }\ndefault_model_filename: \"other.pt\"\n");
  spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 2);
}

TEST_F(RepositoryTest, NoVersionDirectoryAndNoConfig) {
  Write("m/config.pbtxt", kIo);
  auto spec = LoadModelDirectory((root_ / "m").string());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(root_ / "empty");
  EXPECT_THAT(std::string(LoadModelDirectory((root_ / "empty").string()).status().message()),
              HasSubstr("config.pbtxt: cannot open"));
}

TEST_F(RepositoryTest, ListsModelDirectoriesSorted) {
  Write("b/config.pbtxt", kIo);
  Write("a/config.pbtxt", kIo);
  Write(".hidden/config.pbtxt", kIo);
  Write("file.txt", "x");
  auto names = ListModelDirectories(root_.string());
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(ListModelDirectories((root_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace chronoserve::server
