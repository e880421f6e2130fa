// The offline profiler on the CPU (CI): a real MLP (max_batch_size 8) through the real backend, few
// repetitions. Checks the report's shape and invariants (medians > 0, p10 <= median <= p90, every
// batch size covered, four mistakes), the JSON schema, and the batch-size list parsing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/test_repository.h"
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
}

TEST(ProfileTest, ProfilesAnMlpOnTheCpu) {
  testing::TempDir repo("cs_profile");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  profile::ProfileOptions options;
  options.gpu = -1;
  options.batch_sizes = "1,4,max";
  options.warmup_runs = 2;
  options.repetitions = 15;
  auto report = profile::ProfileModel(repo.path() + "/mlp", options);
  ASSERT_TRUE(report.ok()) << report.status();

  const nlohmann::json doc = nlohmann::json::parse(profile::ReportToJson(*report));
  EXPECT_EQ(doc.at("schema"), profile::kProfileSchema);
  EXPECT_EQ(doc.at("model"), "mlp");
  EXPECT_EQ(doc.at("device"), "cpu");
  EXPECT_FALSE(doc.at("device_timed").get<bool>());
  EXPECT_THAT(doc.at("timing_note").get<std::string>(), HasSubstr("host-timed"));
  EXPECT_EQ(doc.at("max_batch_size"), 8);
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
  std::vector<int> searched;
  for (const auto& p : search.at("points")) {
    searched.push_back(p.at("batch_size"));
    EXPECT_GT(p.at("items_per_s").get<double>(), 0);
  }
  EXPECT_THAT(searched, ElementsAre(1, 2, 4, 8));
  EXPECT_EQ(search.at("stopped_by"), "max_batch_size");
  EXPECT_GT(search.at("best_items_per_s").get<double>(), 0);
  EXPECT_THAT(searched, ::testing::Contains(search.at("best_batch_size").get<int>()));

  const auto& mistakes = doc.at("mistakes");
  EXPECT_EQ(mistakes.at("batch_size"), 1);
  ASSERT_EQ(mistakes.at("rows").size(), 4u);
  for (const auto& m : mistakes.at("rows")) {
    EXPECT_FALSE(m.at("name").get<std::string>().empty());
    EXPECT_GT(m.at("mistaken_us").get<double>(), 0) << m.at("name");
    EXPECT_GT(m.at("correct_us").get<double>(), 0) << m.at("name");
    EXPECT_NEAR(m.at("ratio").get<double>(), m.at("mistaken_us").get<double>() / m.at("correct_us").get<double>(),
                1e-9);
  }
  EXPECT_EQ(mistakes.at("rows")[0].at("name"), "no warm-up");

  std::ostringstream text;
  profile::PrintReport(*report, text);
  EXPECT_THAT(text.str(), HasSubstr("host-timed"));
  EXPECT_THAT(text.str(), HasSubstr("four classic timing mistakes"));
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
