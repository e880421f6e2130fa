// bench_served_path end to end on the CPU (the benchmark's numbers are not checked: they are not
// tests): the example mlp with dynamic batching, requests kept in flight by two feeder threads
// through the server's own path; its report must account for every answer it counted.
#include <stdlib.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/client/subprocess.h"
#include "common/remove_tree.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

constexpr absl::Duration kRunTimeout = absl::Seconds(120);  // loading and warming the mlp takes seconds

class ServedPathBenchmarkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "served_path_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(examples::WriteMlp(dir_ + "/models", "mlp", examples::ModelOptions{}).ok());
  }
  void TearDown() override {
    // RemoveTree, not std::filesystem::remove_all: see common/remove_tree.h.
    if (!dir_.empty()) RemoveTree(dir_);
  }

  // Runs the benchmark on the mlp with `extra` flags; its exit code and output.
  std::pair<int, std::string> Run(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {SERVED_PATH_BIN, "--model-repository", dir_ + "/models", "--concurrency", "8",
                                     "--threads", "2", "--duration-ms", "300", "--warmup-requests", "20",
                                     "--json", json_path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto run = testing::RunProgram(argv, kRunTimeout);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : std::pair<int, std::string>{-1, ""};
  }
  std::string json_path() const { return dir_ + "/served_path.json"; }
  nlohmann::json Report() const { return nlohmann::json::parse(std::ifstream(json_path())); }

  std::string dir_;
};

TEST_F(ServedPathBenchmarkTest, AnswersEveryRequestAndCountsTheBatchesItRan) {
  auto [code, output] = Run({"-m", "mlp"});
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("served path without gRPC: mlp, concurrency 8, 2 feeder threads"), std::string::npos) << output;
  EXPECT_NE(output.find("time by phase"), std::string::npos) << "the worker's phases, as the server logs them";
  const nlohmann::json report = Report();
  ASSERT_EQ(report["runs"].size(), 1u);
  const nlohmann::json& run = report["runs"][0];
  EXPECT_EQ(run["errors"], 0);
  const int64_t responses = run["responses"];
  EXPECT_GT(responses, 0);
  EXPECT_GT(run["throughput_items_per_s"].get<double>(), 0);
  EXPECT_GT(run["latency_us"]["e2e"]["p99"].get<double>(), 0);
  EXPECT_LE(run["latency_us"]["e2e"]["p50"].get<double>(), run["latency_us"]["e2e"]["p99"].get<double>());

  // Every counted answer gave its batch's size, within 1..max_batch_size (8). A batch of b one-item
  // requests sent b answers that each said b: batches = sum(answers / b), and the items per batch
  // are the answers over that; the mean over answers weighs each batch by its size.
  const nlohmann::json& executed = run["batch_size_executed"];
  int64_t by_size = 0;
  double batches = 0;
  double size_sum = 0;
  for (const auto& [size, n] : executed["responses_by_size"].items()) {
    const int64_t b = std::stoll(size);
    EXPECT_GE(b, 1);
    EXPECT_LE(b, 8);
    by_size += n.get<int64_t>();
    batches += n.get<double>() / static_cast<double>(b);
    size_sum += n.get<double>() * static_cast<double>(b);
  }
  EXPECT_EQ(by_size, responses);
  ASSERT_GT(batches, 0);
  EXPECT_NEAR(executed["per_batch_mean"].get<double>(), static_cast<double>(responses) / batches, 1e-6);
  EXPECT_NEAR(executed["mean"].get<double>(), size_sum / static_cast<double>(responses), 1e-6);

  // The CPU by thread name (every thread, however idle): the feeders in place of gRPC's threads,
  // and the server's worker; the process is their sum.
  const nlohmann::json& threads = report["cpu_cores"]["threads"];
  EXPECT_TRUE(threads.contains("sp-feeder")) << threads.dump();
  EXPECT_TRUE(threads.contains("cs-worker")) << threads.dump();
  double sum = 0;
  for (const auto& [name, cores] : threads.items()) {
    EXPECT_GE(cores.get<double>(), 0) << name;
    sum += cores.get<double>();
  }
  EXPECT_NEAR(report["cpu_cores"]["process"].get<double>(), sum, 1e-9);
}

TEST_F(ServedPathBenchmarkTest, WithoutRequestTimingNoBatchSizesAreClaimed) {
  auto [code, output] = Run({"-m", "mlp", "--request-timing", "off"});
  ASSERT_EQ(code, 0) << output;
  const nlohmann::json run = Report()["runs"][0];
  EXPECT_GT(run["responses"].get<int64_t>(), 0);
  EXPECT_TRUE(run["batch_size_executed"].is_null()) << run.dump();
}

TEST_F(ServedPathBenchmarkTest, AModelThatIsNotThereFailsNamingIt) {
  auto [code, output] = Run({"-m", "nope"});
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("nope"), std::string::npos) << output;
  EXPECT_FALSE(std::filesystem::exists(json_path()));
}

}  // namespace
}  // namespace chronoserve
