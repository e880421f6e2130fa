// A model repository on disk: model names, version directories and policies, the model file, and
// listing model directories (links that loop or dangle are skipped).
#include "server/repository/model_config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/backend/batch_pipeline.h"
#include "server/backend/cuda_graph_buckets.h"
#include "server/backend/exact_device_timing.h"
#include "server/scheduler/keep_warm.h"
#include "server/scheduler/warmup_sizes.h"
#include "common/remove_tree.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kIo[] = "input { name: \"x\" data_type: TYPE_FP32 dims: 3 }\noutput { name: \"y\" data_type: TYPE_FP32 dims: 3 }\n";

TEST(ModelNameTest, RejectsPathTricks) {
  EXPECT_TRUE(ValidateModelName("policy_net-2.v1").ok());
  for (const char* bad : {"", ".", "..", "../etc", "a/b", "a\\b"}) {
    EXPECT_EQ(ValidateModelName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ValidateModelName(std::string("a\0b", 3)).ok());
  EXPECT_TRUE(ValidateModelName("r\xc3\xa9sum\xc3\xa9").ok()) << "UTF-8 beyond ASCII is a name";
  const absl::Status latin1 = ValidateModelName("r\xe9sum\xe9");
  EXPECT_EQ(latin1.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(latin1.message()), HasSubstr("model name 'r\\351sum\\351' is not UTF-8"));
  EXPECT_FALSE(ValidateModelName(std::string(256, 'a')).ok());
}

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("cs_repo_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(root_.string());
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { RemoveTree(root_.string()); }
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
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("model 'm' version 2: model file"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("2/model.pt does not exist"));
  // Each version's file is checked when that version loads (a missing one fails that version only):
  // version 1's model.pt is not default_model_filename's.
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { specific { versions: [1, 2] } }\ndefault_model_filename: \"other.pt\"\n");
  auto specs = LoadModelVersions((root_ / "m").string());
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  const absl::Status v1 = CheckModelFile((*specs)[0]);
  EXPECT_EQ(v1.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(v1.message()), HasSubstr("model 'm' version 1: model file"));
  EXPECT_THAT(std::string(v1.message()), HasSubstr("1/other.pt does not exist"));
  EXPECT_TRUE(CheckModelFile((*specs)[1]).ok());
  Write("m/1/other.pt", "x");
  specs = LoadModelVersions((root_ / "m").string());
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].version, 1);
  EXPECT_EQ((*specs)[0].model_path, (root_ / "m" / "1" / "other.pt").string());
  EXPECT_EQ((*specs)[1].version, 2);
  EXPECT_EQ((*specs)[1].model_path, (root_ / "m" / "2" / "other.pt").string());
  spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 2) << "LoadModelDirectory: the highest version served";
}

// default_model_filename names a file in each version directory, never a path: a config (a client's,
// through RepositoryModelLoad's config) could otherwise load any file of the server's disk.
TEST_F(RepositoryTest, DefaultModelFilenameMustBeAFileNameNotAPath) {
  Write("m/1/model.pt", "x");
  Write("outside.pt", "x");
  const std::string io = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}])";
  // As JSON strings: a relative path out, an absolute path, "..", ".", a backslash, a NUL byte.
  for (const std::string& bad : {std::string("../../outside.pt"), (root_ / "outside.pt").string(), std::string(".."),
                                 std::string("."), std::string(R"(sub\\x.pt)"), std::string(R"(a\u0000b)")}) {
    SCOPED_TRACE(bad);
    const std::string json = absl::StrCat("{", io, R"(, "default_model_filename": ")", bad, "\"}");
    auto specs = LoadModelVersions((root_ / "m").string(), &json);
    ASSERT_FALSE(specs.ok());
    EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument) << specs.status();
    EXPECT_THAT(std::string(specs.status().message()), HasSubstr("model 'm': default_model_filename '"));
    EXPECT_THAT(std::string(specs.status().message()), HasSubstr("' is not a file name"));
  }
  Write("m/config.pbtxt", std::string(kIo) + "default_model_filename: \"../m/1/model.pt\"\n");
  auto from_file = LoadModelVersions((root_ / "m").string());
  ASSERT_FALSE(from_file.ok()) << "config.pbtxt too";
  EXPECT_THAT(std::string(from_file.status().message()), HasSubstr("default_model_filename '../m/1/model.pt' is not a file name"));
}

constexpr char kJsonIo[] = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}])";

// A configuration as Triton exports it (ModelConfigToJson prints every primitive field, defaults
// included): the fields chronoserve lacks but that say nothing ("batch_input": [], "format":
// "FORMAT_NONE", "response_cache": {"enable": false}) load as if absent; set, they are refused or
// reported as before.
TEST_F(RepositoryTest, AConfigAsTritonExportsItLoads) {
  Write("m/1/model.pt", "x");
  const std::string triton = R"({"name": "m", "platform": "pytorch_libtorch", "backend": "pytorch",
    "version_policy": {"latest": {"num_versions": 1}}, "max_batch_size": 8,
    "input": [{"name": "x", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": ["3"],
               "is_shape_tensor": false, "allow_ragged_batch": false, "optional": false,
               "is_non_linear_format_io": false}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": ["3"], "label_filename": "",
                "is_shape_tensor": false, "is_non_linear_format_io": false}],
    "batch_input": [], "batch_output": [],
    "optimization": {"priority": "PRIORITY_DEFAULT", "input_pinned_memory": {"enable": true},
                     "output_pinned_memory": {"enable": true}, "gather_kernel_buffer_threshold": 0,
                     "eager_batching": false},
    "instance_group": [{"name": "m", "kind": "KIND_CPU", "count": 1, "gpus": [], "secondary_devices": [],
                        "profile": [], "passive": false, "host_policy": ""}],
    "default_model_filename": "model.pt", "cc_model_filenames": {}, "metric_tags": {}, "parameters": {},
    "model_warmup": [], "model_operations": {"op_library_filename": []},
    "model_transaction_policy": {"decoupled": false}, "response_cache": {"enable": false}})";
  auto specs = LoadModelVersions((root_ / "m").string(), &triton);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].max_batch_size, 8);
  // Set to something, a refused field is still refused.
  const std::string with_batch_input = absl::StrCat(
      R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
          "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}], "max_batch_size": 8,
          "batch_input": [{"kind": "BATCH_ELEMENT_COUNT", "target_name": ["N"], "data_type": "TYPE_FP32",
                           "source_input": ["x"]}]})");
  auto refused = LoadModelVersions((root_ / "m").string(), &with_batch_input);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("field 'batch_input' is not supported"));

  // An object is exported only when its field is set: a reshape to a scalar ({"shape": []}) and an
  // empty sequence_batching are settings, refused; and a key that is no field of Triton's either is a
  // typo whatever its value.
  const std::string io_reshaped = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1],
      "reshape": {"shape": []}}], "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}])";
  for (const auto& [json, says] : std::vector<std::pair<std::string, std::string>>{
           {absl::StrCat("{", io_reshaped, "}"), "field 'reshape' is not supported"},
           {absl::StrCat("{", kJsonIo, R"(, "sequence_batching": {}})"), "field 'sequence_batching' is not supported"},
           {absl::StrCat("{", kJsonIo, R"(, "dynamic_batchin": {}})"), "unknown field 'dynamic_batchin'"}}) {
    SCOPED_TRACE(json);
    auto loaded = LoadModelVersions((root_ / "m").string(), &json);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(says));
  }
}

// Integers past 2^53 would pass through JSON numbers rounded: refused, saying to quote them; quoted,
// as protobuf's JSON writes 64-bit integers, they keep every digit (seen in the range check's error).
TEST_F(RepositoryTest, AJsonIntegerPast2To53IsRefusedAndTakenExactlyAsAString) {
  Write("m/1/model.pt", "x");
  const std::string number = absl::StrCat("{", kJsonIo, R"(, "max_batch_size": 4,
      "dynamic_batching": {"max_queue_delay_microseconds": 9007199254740993}})");
  auto refused = LoadModelVersions((root_ / "m").string(), &number);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("the integer 9007199254740993 (at 'max_queue_delay_microseconds') is beyond 2^53"));
  const std::string quoted = absl::StrCat("{", kJsonIo, R"(, "max_batch_size": 4,
      "dynamic_batching": {"max_queue_delay_microseconds": "9007199254740993"}})");
  // Past the field's own range (a day) all the same, but read to the last digit (rounded, it would
  // read ...992).
  auto exact = LoadModelVersions((root_ / "m").string(), &quoted);
  ASSERT_FALSE(exact.ok());
  EXPECT_THAT(std::string(exact.status().message()),
              HasSubstr("max_queue_delay_microseconds 9007199254740993: expected 0 to 86400000000"));
}

// version_policy { latest { num_versions: 0 } } names no version: refused, as Triton fails such a load.
TEST_F(RepositoryTest, LatestWithNoVersionsIsRefused) {
  Write("m/1/model.pt", "x");
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { latest { } }\n");
  auto specs = LoadModelVersions((root_ / "m").string());
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(specs.status().message()), HasSubstr("version_policy.latest.num_versions is 0"));
}

// Each policy serves its versions, ascending, each spec with its own version and file, as Triton: `all` every one, `latest { num_versions: N }` the N highest
// (1 by default, when version_policy is absent), `specific` those listed that exist, and an empty
// `version_policy { }` every one (Triton defaults only an absent policy; one with no choice loads all).
TEST_F(RepositoryTest, EachPolicyServesItsVersionsEachWithItsOwnFile) {
  Write("m/1/model.pt", "x");
  Write("m/2/model.pt", "x");
  Write("m/3/model.pt", "x");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> rows = {
      {"version_policy { all { } }", {1, 2, 3}},
      {"version_policy { latest { num_versions: 2 } }", {2, 3}},
      {"version_policy { latest { num_versions: 5 } }", {1, 2, 3}},
      {"version_policy { latest { num_versions: 1 } }", {3}},
      {"version_policy { specific { versions: [3, 1, 9] } }", {1, 3}},
      {"", {3}},
      {"version_policy { }", {1, 2, 3}},
  };
  for (const auto& [policy, expected] : rows) {
    Write("m/config.pbtxt", std::string(kIo) + policy + "\n");
    auto specs = LoadModelVersions((root_ / "m").string());
    ASSERT_TRUE(specs.ok()) << policy << ": " << specs.status();
    std::vector<int64_t> versions;
    for (const auto& spec : *specs) {
      versions.push_back(spec.version);
      EXPECT_EQ(spec.model_path, (root_ / "m" / std::to_string(spec.version) / "model.pt").string()) << policy;
      EXPECT_EQ(spec.name, "m");
      EXPECT_EQ(spec.version_policy.kind, policy.find("all") != std::string::npos || policy == "version_policy { }"
                                              ? VersionPolicySpec::Kind::kAll
                                          : policy.find("specific") != std::string::npos ? VersionPolicySpec::Kind::kSpecific
                                                                                         : VersionPolicySpec::Kind::kLatest)
          << policy;
    }
    EXPECT_EQ(versions, expected) << policy;
  }
}

// A version directory whose number is past int64 cannot be named by any request: it is left out
// with a warning, not in silence (the model served 2 of `2` and `99999999999999999999`, saying nothing).
TEST_F(RepositoryTest, AVersionDirectoryPastInt64IsIgnoredWithAWarning) {
  Write("m/config.pbtxt", kIo);
  Write("m/2/model.pt", "x");
  Write("m/99999999999999999999/model.pt", "x");
  ::testing::internal::CaptureStderr();
  auto spec = LoadModelDirectory((root_ / "m").string());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 2);
  EXPECT_THAT(log, HasSubstr("version directory '99999999999999999999' is ignored: versions are at most "
                             "9223372036854775807"));
}

// What stands where the model file should be is named: a directory, a link that loops or leads
// nowhere, rather than "does not exist".
TEST_F(RepositoryTest, AModelFileThatIsNoFileSaysWhatItIs) {
  Write("m/config.pbtxt", kIo);
  std::filesystem::create_directories(root_ / "m" / "1" / "model.pt");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("1/model.pt is a directory, not a TorchScript file"));
  std::filesystem::remove(root_ / "m" / "1" / "model.pt");
  std::filesystem::create_symlink(root_ / "m" / "1" / "model.pt", root_ / "m" / "1" / "model.pt");
  spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("1/model.pt is a symbolic link that leads to no file"));
}

// A policy no directory matches names the versions it wanted and those that exist.
TEST_F(RepositoryTest, NoMatchingVersionNamesWantedAndFound) {
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { specific { versions: [3] } }\n");
  Write("m/1/model.pt", "x");
  Write("m/2/model.pt", "x");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("matches the version policy (specific versions 3); found 1, 2"));
  Write("n/config.pbtxt", kIo);
  Write("n/notes/readme", "x");
  spec = LoadModelDirectory((root_ / "n").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("matches the version policy; found none"));
}

// A version directory written "01" or "+1" is a number but not a version's name: before, it was
// read as version 1 and the load then looked for m/1/model.pt, which was never there. "0" is
// ignored as Triton ignores it (names that start with "0"): before, it was served as version 0.
TEST_F(RepositoryTest, VersionDirectoriesMustBePlainNumbersFromOne) {
  Write("m/config.pbtxt", kIo);
  Write("m/01/model.pt", "x");
  Write("m/+2/model.pt", "x");
  Write("m/0/model.pt", "x");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("found none (ignored: +2, 0, 01, which must be written as plain decimal numbers from 1"));
  Write("m/1/model.pt", "x");
  spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 1);
  EXPECT_EQ(spec->model_path, (root_ / "m" / "1" / "model.pt").string());
}

// As Triton: a specific policy listing no version serves none, and says so (before: the latest).
TEST_F(RepositoryTest, ASpecificPolicyWithNoVersionsFailsTheLoad) {
  Write("m/config.pbtxt", std::string(kIo) + "version_policy { specific { } }\n");
  Write("m/1/model.pt", "x");
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("model 'm': version_policy.specific lists no versions"));
}

// The loader's list of the keys that do something is the subsystems' own keys, no more, no fewer.
TEST(ModelParameterKeysTest, AreTheKeysTheSubsystemsRead) {
  std::set<std::string_view> read = {kGraphBatchSizesKey, kExactDeviceTimingKey, kPipelineDepthKey, kKeepWarmKey,
                                     kKeepWarmHorizonKey, kWarmupBatchSizesKey};
  EXPECT_EQ(std::set<std::string_view>(kModelParameterKeys.begin(), kModelParameterKeys.end()), read);
  EXPECT_TRUE(std::is_sorted(kModelParameterKeys.begin(), kModelParameterKeys.end(),
                             [](std::string_view a, std::string_view b) { return a < b; }))
      << "listed in messages";
}

// A parameter key chronoserve does not read (a typo, another backend's) loads, with a warning that
// names it and the keys that do something.
TEST_F(RepositoryTest, AnUnknownParameterKeyIsLoggedWithTheKnownOnes) {
  Write("m/config.pbtxt", std::string(kIo) +
                              "parameters { key: \"keep_warm\" value { string_value: \"10\" } }\n"
                              "parameters { key: \"keep_warm_ms\" value { string_value: \"10\" } }\n");
  Write("m/1/model.pt", "x");
  ::testing::internal::CaptureStderr();
  auto spec = LoadModelDirectory((root_ / "m").string());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->parameters.at("keep_warm"), "10") << "kept: ModelConfig answers it";
  EXPECT_THAT(log, HasSubstr("model 'm': parameter 'keep_warm' is not one of chronoserve's (cuda_graph_batch_sizes, "
                             "exact_device_timing, keep_warm_horizon_ms, keep_warm_ms, pipeline_depth, warmup_batch_sizes) and is ignored"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("parameter 'keep_warm_ms'")));
}

TEST_F(RepositoryTest, NoVersionDirectoryAndNoConfig) {
  Write("m/config.pbtxt", kIo);
  auto spec = LoadModelDirectory((root_ / "m").string());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(root_ / "empty");
  const absl::Status no_config = LoadModelDirectory((root_ / "empty").string()).status();
  EXPECT_EQ(no_config.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_config.message()),
              HasSubstr("model 'empty': " + (root_ / "empty" / "config.pbtxt").string() +
                        " does not exist; chronoserve needs a config.pbtxt in every model directory"));
}

// What was given instead of a model directory is named: nothing, a file, or the repository above.
TEST_F(RepositoryTest, APathThatIsNoModelDirectorySaysWhatItIs) {
  const absl::Status missing = LoadModelDirectory((root_ / "missing").string()).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "model directory '" + (root_ / "missing").string() + "' does not exist");
  Write("m/config.pbtxt", kIo);
  Write("m/1/model.pt", "x");
  const absl::Status file = LoadModelDirectory((root_ / "m" / "1" / "model.pt").string()).status();
  EXPECT_EQ(file.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.message()), HasSubstr("model.pt' is not a directory"));
  Write("n/config.pbtxt", kIo);
  Write(".ipynb_checkpoints/config.pbtxt", kIo);  // no model, as when the server lists the repository
  const absl::Status repository = LoadModelDirectory(root_.string()).status();
  EXPECT_EQ(repository.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repository.message(), "'" + root_.string() + "' is a model repository, not a model directory: pass one "
                                  "of its models (m, n)");
}

TEST_F(RepositoryTest, ListsModelDirectoriesSorted) {
  Write("b/config.pbtxt", kIo);
  Write("a/config.pbtxt", kIo);
  Write(".hidden/config.pbtxt", kIo);
  Write("__pycache__/export.cpython-311.pyc", "x");  // beside a script that exported the models
  Write("file.txt", "x");
  // Not UTF-8 (Latin-1): listed, it would make every index and metrics page unreadable.
  Write("r\xe9sum\xe9/config.pbtxt", kIo);
  auto names = ListModelDirectories(root_.string());
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(ListModelDirectories((root_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RepositoryTest, LinkLoopsAndDanglingLinksAreSkippedNotThrown) {
  Write("m/config.pbtxt", kIo);
  Write("m/1/model.pt", "x");
  std::filesystem::create_symlink(root_ / "loop", root_ / "loop");          // ELOOP when followed
  std::filesystem::create_symlink(root_ / "nowhere", root_ / "dangling");
  std::filesystem::create_symlink(root_ / "m" / "7", root_ / "m" / "7");    // a looping version
  auto names = ListModelDirectories(root_.string());
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ::testing::ElementsAre("m"));
  auto spec = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, 1);
}

TEST_F(RepositoryTest, AModelDirectoryWithATrailingSlashOrDotIsNamedAfterItself) {
  Write("mlp/config.pbtxt", kIo);
  Write("mlp/1/model.pt", "x");
  auto spec = LoadModelDirectory((root_ / "mlp").string() + "/");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "mlp");
  spec = LoadModelDirectory((root_ / "mlp" / "1").string() + "/..");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "mlp");
}

// RepositoryModelLoad's "config": Triton's model configuration as JSON in place of config.pbtxt
// (which need not exist), field names as in config.pbtxt or in lowerCamelCase; Triton's fields that
// model_config.proto leaves out ignored or refused as in config.pbtxt, anything else refused by name.
TEST_F(RepositoryTest, AJsonConfigReplacesConfigPbtxt) {
  Write("m/config.pbtxt", std::string(kIo) + "max_batch_size: 4\n");
  Write("m/1/model.pt", "x");
  Write("m/2/model.pt", "x");
  const std::string json = R"({"name": "m", "max_batch_size": 2,
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [5]}],
    "output": [{"name": "y", "dataType": "TYPE_FP32", "dims": ["5"]}],
    "version_policy": {"specific": {"versions": [1]}},
    "dynamicBatching": {"maxQueueDelayMicroseconds": 300},
    "parameters": {"keep_warm_ms": {"string_value": "20"}}})";
  auto spec = LoadModelDirectory((root_ / "m").string(), &json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->max_batch_size, 2);
  EXPECT_EQ(spec->version, 1) << "the JSON's version policy";
  ASSERT_EQ(spec->inputs.size(), 1u);
  EXPECT_EQ(spec->inputs[0].dims, std::vector<int64_t>{5});
  ASSERT_EQ(spec->outputs.size(), 1u);
  EXPECT_EQ(spec->outputs[0].dims, std::vector<int64_t>{5});
  ASSERT_TRUE(spec->dynamic_batching.enabled);
  EXPECT_EQ(spec->dynamic_batching.max_queue_delay_us, 300);
  EXPECT_EQ(spec->parameters.at("keep_warm_ms"), "20");
  auto from_file = LoadModelDirectory((root_ / "m").string());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->max_batch_size, 4) << "config.pbtxt is untouched";
  EXPECT_EQ(from_file->version, 2);

  Write("bare/1/model.pt", "x");  // no config.pbtxt
  const std::string bare = R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
                               "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})";
  spec = LoadModelDirectory((root_ / "bare").string(), &bare);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "bare");

  // Triton's response_cache is ignored, with the warning config.pbtxt gets.
  const std::string cached = R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}], "response_cache": {"enable": true}})";
  ::testing::internal::CaptureStderr();
  spec = LoadModelDirectory((root_ / "bare").string(), &cached);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(log, HasSubstr("RepositoryModelLoad's 'config': model 'bare': field 'response_cache' is not implemented"));
}

TEST_F(RepositoryTest, AJsonConfigsErrorsNameTheRequestsConfigAndTheField) {
  Write("m/1/model.pt", "x");
  const std::string dir = (root_ / "m").string();
  auto load = [&](const std::string& json) { return LoadModelDirectory(dir, &json).status(); };
  const absl::Status not_json = load("max_batch_size: 4");
  EXPECT_EQ(not_json.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(not_json.message()), HasSubstr("RepositoryModelLoad's 'config': not a model configuration in JSON"));
  EXPECT_THAT(std::string(not_json.message()), HasSubstr("at line 1, column 1: syntax error")) << "where, on one line";
  EXPECT_THAT(std::string(not_json.message()), Not(HasSubstr("\n")));
  const absl::Status array = load("[1, 2]");
  EXPECT_THAT(std::string(array.message()), HasSubstr("a JSON object was expected"));
  const absl::Status typo = load(R"({"max_batch": 4})");
  EXPECT_EQ(typo.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(typo.message()), HasSubstr("unknown field 'max_batch' in ModelConfig"));
  const absl::Status nested = load(R"({"input": [{"name": "x", "dataType": "TYPE_FP32", "dims": [3], "shape": [3]}]})");
  EXPECT_THAT(std::string(nested.message()), HasSubstr("unknown field 'shape' in ModelInput"));
  const absl::Status camel = load(R"({"instanceGroup": [{"kind": "KIND_CPU", "rateLimiter": {}}], "maxBatchSizes": 1})");
  EXPECT_THAT(std::string(camel.message()), HasSubstr("unknown field 'max_batch_sizes' in ModelConfig"))
      << "an unknown lowerCamelCase key is named as config.pbtxt would name it";
  const absl::Status bad_value = load(R"({"max_batch_size": "many"})");
  EXPECT_EQ(bad_value.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_value.message()), HasSubstr("max_batch_size"));
  EXPECT_THAT(std::string(bad_value.message()), Not(HasSubstr("\n")));
  const absl::Status renamed = load(R"({"name": "other", "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
                                       "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})");
  EXPECT_THAT(std::string(renamed.message()), HasSubstr("name 'other' does not match its directory 'm'"));
  const absl::Status enum_typo = load(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}], "instance_group": [{"kind": "KIND_FOO"}]})");
  EXPECT_EQ(enum_typo.code(), absl::StatusCode::kInvalidArgument) << "as config.pbtxt refuses it";
  EXPECT_THAT(std::string(enum_typo.message()), HasSubstr("KIND_FOO"));
  // Nesting past any configuration's is refused before protobuf's parser, whose time grows with the
  // square of the depth, spends it.
  std::string deep = R"({"input": )";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}";
  const absl::Time start = absl::Now();
  const absl::Status too_deep = load(deep);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "milliseconds; the quadratic parse takes far longer";
  EXPECT_EQ(too_deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_deep.message()), HasSubstr("nest more than 32 levels deep"));
  const absl::Status in_string = load(R"({"name": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})");
  EXPECT_THAT(std::string(in_string.message()), Not(HasSubstr("levels deep"))) << "brackets inside a string do not count";
  // Strict JSON, where protobuf's parser is lenient: no trailing comma, no key twice in an object
  // (protobuf names its own internals for a field, keeps the last of a map's), a list field a list.
  const absl::Status trailing = load(R"({"max_batch_size": 4,})");
  EXPECT_EQ(trailing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trailing.message()), HasSubstr("not a model configuration in JSON (parse error at line 1, column 22: syntax error"));
  EXPECT_THAT(std::string(trailing.message()), Not(HasSubstr("json.exception")));
  const absl::Status trailing_in_list = load(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3,]}]})");
  EXPECT_THAT(std::string(trailing_in_list.message()), HasSubstr("parse error"));
  const absl::Status twice = load(R"({"max_batch_size": 4, "input": [], "max_batch_size": 8})");
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("key 'max_batch_size' is given twice in one object"));
  const absl::Status twice_in_map = load(R"({"parameters": {"keep_warm_ms": {"string_value": "20"},
                                                           "keep_warm_ms": {"string_value": "30"}}})");
  EXPECT_THAT(std::string(twice_in_map.message()), HasSubstr("key 'keep_warm_ms' is given twice"));
  const absl::Status same_key_elsewhere = load(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})");
  EXPECT_TRUE(same_key_elsewhere.ok()) << "a key once in each of two objects: " << same_key_elsewhere;
  const absl::Status object_for_list = load(R"({"input": {"name": "x", "data_type": "TYPE_FP32", "dims": [3]},
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})");
  EXPECT_EQ(object_for_list.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(object_for_list.message()), HasSubstr("field 'input' in ModelConfig takes a list"));
  const absl::Status number_for_list = load(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": 3}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})");
  EXPECT_THAT(std::string(number_for_list.message()), HasSubstr("field 'dims' in ModelInput takes a list"));
  const absl::Status ragged = load(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3], "allow_ragged_batch": true}]})");
  EXPECT_THAT(std::string(ragged.message()), HasSubstr("field 'allow_ragged_batch' is not supported"));
}

}  // namespace
}  // namespace chronoserve::server
