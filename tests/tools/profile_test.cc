// The offline profiler on the CPU (CI): a real MLP (max_batch_size 8) through the real backend, few
// repetitions. Checks the report's shape and invariants (medians > 0, p10 <= median <= p90, every
// batch size covered, a search past max_batch_size, four mistakes with the copy row not applicable
// on the CPU), the JSON schema, the batch-size list parsing, and the dims of variable inputs
// (--shape, the first model_warmup sample, or a refusal), and the version profiled
// (--model-version). The throughput search's memory limit and the mistakes' copy row on a GPU are
// checked with fakes in profile_search_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/server/test_repository.h"
#include "common/shape_flag.h"
#include "tools/example_models.h"
#include "tools/profile/model_profiler.h"
#include "tools/profile/profile_report.h"

namespace chronoserve {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectOrdered(const nlohmann::json& spread, const std::string& what) {
  const double p10 = spread.at("p10_us"), median = spread.at("median_us"), p90 = spread.at("p90_us");
  EXPECT_LE(p10, median) << what;
  EXPECT_LE(median, p90) << what;
}

TEST(ProfileTest, ResolvesBatchSizesAgainstTheModelMaximum) {
  EXPECT_THAT(*profile::ResolveBatchSizes("1,8,32,max", 8), ElementsAre(1, 8));
  EXPECT_THAT(*profile::ResolveBatchSizes("max, 2,4", 64), ElementsAre(2, 4, 64));
  EXPECT_THAT(*profile::ResolveBatchSizes("1,8", 0), ElementsAre(1));
  EXPECT_THAT(std::string(profile::ResolveBatchSizes("1,x", 8).status().message()), HasSubstr("'x'"));
  EXPECT_FALSE(profile::ResolveBatchSizes("0", 8).ok());
  // A model that does not batch still has its list checked, not silently replaced.
  EXPECT_THAT(std::string(profile::ResolveBatchSizes("garbage", 0).status().message()), HasSubstr("'garbage'"));
  EXPECT_FALSE(profile::ResolveBatchSizes("", 0).ok());
  for (const char* typo : {"1,,2", "1,2,", ",1", " , "}) {
    EXPECT_THAT(std::string(profile::ResolveBatchSizes(typo, 8).status().message()),
                HasSubstr("an empty entry"))
        << typo;
  }
}

// The mlp example batching up to 8, as "mlp" in `repo`.
void WriteMlpOf8(const testing::TempDir& repo) {
  examples::ModelOptions o;
  o.max_batch_size = 8;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
}

TEST(ProfileTest, ProfilesAnMlpOnTheCpu) {
  testing::TempDir repo("cs_profile");
  ASSERT_NO_FATAL_FAILURE(WriteMlpOf8(repo));
  profile::ProfileOptions options;
  options.gpu = -1;
  options.batch_sizes = "1,4,max";
  options.warmup_runs = 2;
  options.repetitions = 15;
  options.search_max_batch = 32;
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();

  const nlohmann::json doc = nlohmann::json::parse(profile::ReportToJson(*report));
  EXPECT_EQ(doc.at("schema"), profile::kProfileSchema);
  EXPECT_EQ(doc.at("model"), "mlp");
  EXPECT_EQ(doc.at("device"), "cpu");
  EXPECT_FALSE(doc.at("device_timed").get<bool>());
  EXPECT_THAT(doc.at("timing_note").get<std::string>(), HasSubstr("host-timed"));
  EXPECT_EQ(doc.at("max_batch_size"), 8);
  EXPECT_EQ(doc.at("inputs"), nlohmann::json::parse(R"([{"name":"INPUT__0","dims":[64],"source":"config"}])"));
  EXPECT_EQ(doc.at("repetitions"), 15);
  EXPECT_EQ(doc.at("batch_sizes"), nlohmann::json({1, 4, 8}));

  ASSERT_EQ(doc.at("modes").size(), 3u);
  const auto& eager = doc.at("modes")[0];
  EXPECT_EQ(eager.at("mode"), "eager");
  ASSERT_TRUE(eager.at("measured").get<bool>());
  ASSERT_EQ(eager.at("batches").size(), 3u);
  std::vector<int> covered;
  for (const auto& b : eager.at("batches")) {
    covered.push_back(b.at("batch_size"));
    for (const char* span : {"compute", "launch", "h2d", "d2h", "wall"}) {
      const std::string what = std::string(span) + " at batch " + b.at("batch_size").dump();
      EXPECT_EQ(b.at(span).at("samples"), 15) << what;
      ExpectOrdered(b.at(span), what);
    }
    EXPECT_GT(b.at("compute").at("median_us").get<double>(), 0);
    EXPECT_GT(b.at("wall").at("median_us").get<double>(), 0);
    EXPECT_GE(b.at("wall").at("median_us").get<double>(), b.at("compute").at("median_us").get<double>());
    EXPECT_GT(b.at("items_per_s").get<double>(), 0);
  }
  EXPECT_THAT(covered, ElementsAre(1, 4, 8));
  const auto& graph = doc.at("modes")[1];
  EXPECT_EQ(graph.at("mode"), "cuda_graph");
  EXPECT_FALSE(graph.at("measured").get<bool>());
  EXPECT_THAT(graph.at("note").get<std::string>(), HasSubstr("CPU"));
  const auto& exact = doc.at("modes")[2];
  EXPECT_EQ(exact.at("mode"), "eager_exact");
  EXPECT_FALSE(exact.at("measured").get<bool>()) << "nothing to hold on the CPU";
  EXPECT_THAT(exact.at("note").get<std::string>(), HasSubstr("CPU"));

  const auto& search = doc.at("throughput");
  EXPECT_TRUE(search.at("measured").get<bool>());
  std::vector<int> searched;
  for (const auto& p : search.at("points")) {
    searched.push_back(p.at("batch_size"));
    EXPECT_GT(p.at("items_per_s").get<double>(), 0);
    EXPECT_EQ(p.at("above_max_batch_size").get<bool>(), p.at("batch_size").get<int>() > 8) << p;
  }
  EXPECT_THAT(searched, ElementsAre(1, 2, 4, 8, 16, 32)) << "past max_batch_size, up to --search-max-batch";
  EXPECT_EQ(search.at("stopped_by"), "search limit (--search-max-batch 32)");
  EXPECT_EQ(search.at("search_max_batch"), 32);
  EXPECT_TRUE(search.at("memory_limit_batch_size").is_null());
  EXPECT_GT(search.at("best_items_per_s").get<double>(), 0);
  EXPECT_THAT(searched, ::testing::Contains(search.at("best_batch_size").get<int>()));

  const auto& mistakes = doc.at("mistakes");
  EXPECT_EQ(mistakes.at("batch_size"), 8) << "the largest profiled size by default";
  ASSERT_EQ(mistakes.at("rows").size(), 4u);
  const auto& copy = mistakes.at("rows")[2];
  EXPECT_EQ(copy.at("name"), "includes the host-to-device copy");
  EXPECT_FALSE(copy.at("measured").get<bool>()) << "no device copy on the CPU";
  EXPECT_THAT(copy.at("note").get<std::string>(), HasSubstr("not applicable on the CPU"));
  EXPECT_TRUE(copy.at("mistaken_us").is_null()) << "absent, never a made-up figure";
  EXPECT_TRUE(copy.at("ratio").is_null());
  for (const auto& m : mistakes.at("rows")) {
    EXPECT_FALSE(m.at("name").get<std::string>().empty());
    EXPECT_GT(m.at("correct_us").get<double>(), 0) << m.at("name");
    if (&m == &copy) continue;
    EXPECT_TRUE(m.at("measured").get<bool>()) << m.at("name");
    EXPECT_GT(m.at("mistaken_us").get<double>(), 0) << m.at("name");
    EXPECT_GT(m.at("correct_us").get<double>(), 0) << m.at("name");
    EXPECT_NEAR(m.at("ratio").get<double>(), m.at("mistaken_us").get<double>() / m.at("correct_us").get<double>(),
                1e-9);
  }
  EXPECT_EQ(mistakes.at("rows")[0].at("name"), "no warm-up");

  std::ostringstream text;
  profile::PrintReport(*report, text);
  EXPECT_THAT(text.str(), HasSubstr("host-timed"));
  EXPECT_THAT(text.str(), HasSubstr("four classic timing mistakes (eager, batch size 8)"));
  EXPECT_THAT(text.str(), HasSubstr("INPUT__0 [64] (config)"));
  EXPECT_THAT(text.str(), HasSubstr("(> max_batch_size: the server never runs it)"));
  EXPECT_THAT(text.str(), HasSubstr("not applicable on the CPU"));
}

// A short profile on the CPU without the throughput search: one warm-up run and `repetitions`
// measured runs at each of `batch_sizes`.
profile::ProfileOptions ShortCpuProfile(const std::string& batch_sizes, int repetitions) {
  profile::ProfileOptions options;
  options.gpu = -1;
  options.batch_sizes = batch_sizes;
  options.warmup_runs = 1;
  options.repetitions = repetitions;
  options.throughput_search = false;
  return options;
}

TEST(ProfileTest, MistakesBatchSizeFlagStillChoosesTheSize) {
  testing::TempDir repo("cs_profile_mistakes");
  ASSERT_NO_FATAL_FAILURE(WriteMlpOf8(repo));
  profile::ProfileOptions options = ShortCpuProfile("1,8", 5);
  options.mistakes_batch_size = 3;  // not a profiled size: measured on its own
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->mistakes_batch_size, 3);
  ASSERT_EQ(report->mistakes.size(), 4u);
  EXPECT_GT(report->mistakes[1].mistaken_us, 0);
  // No search: the JSON says so with nulls, not with a best batch of 0.
  const nlohmann::json doc = nlohmann::json::parse(profile::ReportToJson(*report));
  const auto& search = doc.at("throughput");
  EXPECT_FALSE(search.at("measured").get<bool>());
  EXPECT_TRUE(search.at("points").empty());
  EXPECT_TRUE(search.at("best_batch_size").is_null());
  EXPECT_TRUE(search.at("best_items_per_s").is_null());
  EXPECT_TRUE(search.at("search_max_batch").is_null());
}

// A timing-mistakes size the model never runs is refused, naming the flag, the model and its limit.
TEST(ProfileTest, MistakesBatchSizeAboveTheModelMaximumIsRefused) {
  testing::TempDir repo("cs_profile_mistakes_max");
  ASSERT_NO_FATAL_FAILURE(WriteMlpOf8(repo));
  profile::ProfileOptions options;
  options.gpu = -1;
  options.repetitions = 2;
  options.throughput_search = false;
  options.mistakes_batch_size = 9;
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(report.status().message()), HasSubstr("--mistakes-batch-size 9: model 'mlp' runs batches of 1 to 8"));
}

// --model-version picks one of the versions the policy serves (default the highest, as a request's);
// one it does not serve is refused naming those it does; the report names the version profiled.
TEST(ProfileTest, ModelVersionPicksAServedVersion) {
  testing::TempDir repo("cs_profile_versions");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = "version_policy { specific { versions: [1, 3] } }";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  for (int version : {2, 3}) ASSERT_TRUE(testing::CopyModelVersion(repo.path(), "mlp", 1, "mlp", version));
  profile::ProfileOptions options = ShortCpuProfile("1", 3);
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->version, 3) << "the highest served";
  EXPECT_EQ(nlohmann::json::parse(profile::ReportToJson(*report)).at("version"), 3);
  std::ostringstream text;
  profile::PrintReport(*report, text);
  EXPECT_THAT(text.str(), HasSubstr("model 'mlp' version 3 on cpu"));
  options.model_version = 1;
  report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->version, 1);
  options.model_version = 2;  // on disk, but not in the policy
  report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(report.status().message()),
              HasSubstr("--model-version 2: model 'mlp' serves version(s) 1, 3"));
}

// AddSub: two FP32 inputs of dims [-1] (without the batch dim), max_batch_size 8.
absl::StatusOr<profile::ProfileReport> ProfileAddSub(const std::string& extra_config,
                                                     const profile::InputDims& shapes) {
  testing::TempDir repo("cs_profile_shapes");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = extra_config;
  if (absl::Status s = examples::WriteAddSub(repo.path(), "addsub", o); !s.ok()) return s;
  profile::ProfileOptions options;
  options.gpu = -1;
  options.batch_sizes = "1,4";
  options.warmup_runs = 1;
  options.repetitions = 3;
  options.search_max_batch = 4;
  options.shapes = shapes;
  return profile::ProfileModel(repo.path() + "/addsub", options);
}

TEST(ProfileTest, VariableDimsWithoutAShapeOrAWarmupSampleAreRefused) {
  auto report = ProfileAddSub("", {});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(report.status().message());
  EXPECT_THAT(message, HasSubstr("model 'addsub' input 'INPUT__0' has variable dims [-1]"));
  EXPECT_THAT(message, HasSubstr("--shape INPUT__0:N"));
  EXPECT_THAT(message, HasSubstr("model_warmup"));
}

// A --shape whose batch passes what the host can build (or int64 itself) is refused before any
// byte is allocated; before, 2^62 elements aborted the process and 2^59 wrapped to a 0-byte buffer.
TEST(ProfileTest, AShapeTooLargeToBuildIsRefused) {
  for (int64_t dim : {int64_t{1} << 62, int64_t{1} << 59, int64_t{1} << 32}) {
    auto report = ProfileAddSub("", {{"INPUT__0", {dim}}, {"INPUT__1", {5}}});
    ASSERT_FALSE(report.ok()) << dim;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << dim;
    EXPECT_THAT(std::string(report.status().message()),
                HasSubstr(absl::StrCat("model 'addsub': a batch of 8 with inputs INPUT__0:", dim, " INPUT__1:5 needs ")))
        << dim;
    EXPECT_THAT(std::string(report.status().message()), HasSubstr("lower --shape")) << dim;
  }
}

TEST(ProfileTest, VariableDimsComeFromShapeFlags) {
  auto report = ProfileAddSub("", {{"INPUT__0", {5}}, {"INPUT__1", {5}}});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->inputs.size(), 2u);
  for (const profile::InputShape& in : report->inputs) {
    EXPECT_THAT(in.dims, ElementsAre(5)) << in.name;
    EXPECT_EQ(in.source, "--shape") << in.name;
  }
  const nlohmann::json doc = nlohmann::json::parse(profile::ReportToJson(*report));
  EXPECT_EQ(doc.at("inputs")[1], nlohmann::json::parse(R"({"name":"INPUT__1","dims":[5],"source":"--shape"})"));
  std::ostringstream text;
  profile::PrintReport(*report, text);
  EXPECT_THAT(text.str(), HasSubstr("INPUT__0 [5] (--shape), INPUT__1 [5] (--shape)"));
}

TEST(ProfileTest, VariableDimsDefaultToTheFirstWarmupSampleAndAShapeOverridesIt) {
  const std::string warmup =
      R"(model_warmup [ { name: "seq7" batch_size: 1 )"
      R"(inputs { key: "INPUT__0" value { data_type: TYPE_FP32 dims: [ 7 ] random_data: true } } )"
      R"(inputs { key: "INPUT__1" value { data_type: TYPE_FP32 dims: [ 7 ] random_data: true } } } ])"
      "\n";
  auto report = ProfileAddSub(warmup, {});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->inputs.size(), 2u);
  EXPECT_THAT(report->inputs[0].dims, ElementsAre(7));
  EXPECT_EQ(report->inputs[0].source, "model_warmup 'seq7'");
  EXPECT_THAT(report->inputs[1].dims, ElementsAre(7));
  EXPECT_EQ(report->inputs[1].source, "model_warmup 'seq7'");

  // A --shape wins over the sample.
  auto both = ProfileAddSub(warmup, {{"INPUT__0", {3}}, {"INPUT__1", {3}}});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(both->inputs[0].dims, ElementsAre(3));
  EXPECT_EQ(both->inputs[0].source, "--shape");
}

TEST(ProfileTest, BadShapesAreRefusedWithTheInputNamed) {
  auto unknown = ProfileAddSub("", {{"INPUT__0", {5}}, {"INPUT__1", {5}}, {"NOPE", {5}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'NOPE', which is no input of model 'addsub'"));
  auto rank = ProfileAddSub("", {{"INPUT__0", {5, 2}}, {"INPUT__1", {5}}});
  ASSERT_FALSE(rank.ok());
  EXPECT_THAT(std::string(rank.status().message()), HasSubstr("--shape INPUT__0:5,2"));
  EXPECT_THAT(std::string(rank.status().message()), HasSubstr("has dims [-1]"));

  profile::InputDims shapes;
  ASSERT_TRUE(ParseShapeFlag("INPUT__0:3,224,224", &shapes).ok());
  EXPECT_THAT(shapes.at("INPUT__0"), ElementsAre(3, 224, 224));
  ASSERT_TRUE(ParseShapeFlag("a:b:4", &shapes).ok()) << "the last colon splits, as chronobench's";
  EXPECT_THAT(shapes.at("a:b"), ElementsAre(4));
  for (const char* bad : {"INPUT__0", ":4", "x:", "x:0", "x:4,", "x:-1", "x:a"}) {
    EXPECT_FALSE(ParseShapeFlag(bad, &shapes).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseShapeFlag("x:0", &shapes).message()), HasSubstr("dim '0'"));
}

TEST(ProfileTest, FixedShapeModelsNeedNoShape) {
  testing::TempDir repo("cs_profile_fixed");
  examples::ModelOptions o;
  o.max_batch_size = 0;  // no batch dim: the search is one size
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  profile::ProfileOptions options;
  options.gpu = -1;
  options.warmup_runs = 1;
  options.repetitions = 3;
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->throughput.points.size(), 1u);
  EXPECT_FALSE(report->throughput.points[0].above_max_batch_size);
  EXPECT_EQ(report->throughput.stopped_by, "the model does not batch (max_batch_size 0)");
  EXPECT_EQ(report->throughput.search_max_batch, 1) << "batch 1 is all that ran";
  std::ostringstream text;
  profile::PrintReport(*report, text);
  EXPECT_THAT(text.str(), HasSubstr("throughput search (eager; the model does not batch: batch 1 only)"));
  EXPECT_THAT(text.str(), ::testing::Not(HasSubstr("past max_batch_size"))) << text.str();
}

TEST(ProfileTest, MissingModelDirectoryFailsWithItsName) {
  profile::ProfileOptions options;
  options.gpu = -1;
  auto report = profile::ProfileModel("/nonexistent/model_dir", options);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(std::string(report.status().message()), HasSubstr("/nonexistent/model_dir"));
}

}  // namespace
}  // namespace chronoserve
