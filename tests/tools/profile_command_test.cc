// `chronoserve profile MODEL_DIR` runs the offline profiler from the server binary.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/client/subprocess.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

TEST(ProfileCommandTest, ServerBinaryProfilesAModelDirectory) {
  testing::TempDir repo("cs_profile_cmd");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  const std::string json_path = repo.path() + "/profile.json";
  auto process = testing::Subprocess::Start(
      {CHRONOSERVE_BIN, "profile", repo.path() + "/mlp", "--batch-sizes", "1,max", "--repetitions", "10",
       "--warmup-runs", "1", "--no-throughput-search", "--json", json_path});
  ASSERT_TRUE(process.ok()) << process.status();
  auto exit_code = (*process)->WaitForExit(absl::Seconds(120));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0);
  std::ifstream in(json_path);
  ASSERT_TRUE(in.good()) << "the command wrote " << json_path;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json report = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report.value("schema", ""), "chronoserve.profile/v2");
}

// Variable dims: refused without a size (exit 1, naming the input and the flag), profiled with
// repeated --shape flags (each flag one NAME:dims, the model directory after them still positional).
TEST(ProfileCommandTest, VariableDimsNeedShapeFlags) {
  testing::TempDir repo("cs_profile_cmd_shape");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub", o).ok());
  const std::vector<std::string> base = {CHRONOSERVE_BIN, "profile", "--repetitions", "10", "--warmup-runs", "1",
                                         "--search-max-batch", "8"};
  std::vector<std::string> refused = base;
  refused.push_back(repo.path() + "/addsub");
  auto no_shape = testing::RunProgram(refused, absl::Seconds(120));
  ASSERT_TRUE(no_shape.ok()) << no_shape.status();
  EXPECT_EQ(no_shape->first, 1) << no_shape->second;
  EXPECT_NE(no_shape->second.find("--shape INPUT__0:N"), std::string::npos) << no_shape->second;

  std::vector<std::string> shaped = base;
  for (const char* flag : {"--shape", "INPUT__0:6", "--shape", "INPUT__1:6"}) shaped.push_back(flag);
  shaped.push_back(repo.path() + "/addsub");
  auto with_shape = testing::RunProgram(shaped, absl::Seconds(120));
  ASSERT_TRUE(with_shape.ok()) << with_shape.status();
  EXPECT_EQ(with_shape->first, 0) << with_shape->second;
  EXPECT_NE(with_shape->second.find("INPUT__0 [6] (--shape), INPUT__1 [6] (--shape)"), std::string::npos)
      << with_shape->second;

  std::vector<std::string> bad = base;
  for (const char* flag : {"--shape", "INPUT__0:0"}) bad.push_back(flag);
  bad.push_back(repo.path());  // path() returns a copy: its c_str() in the list above would dangle
  auto bad_shape = testing::RunProgram(bad, absl::Seconds(120));
  ASSERT_TRUE(bad_shape.ok()) << bad_shape.status();
  EXPECT_EQ(bad_shape->first, 2) << "a bad flag exits 2: " << bad_shape->second;
}

// The methodology's floor as flags: fewer than 10 measured runs (p10/p90 would be the extremes), no
// warm-up run, or a --batch-sizes that is not a list of sizes exits 2 naming the flag; a size past
// max_batch_size, even past int32, is clipped to it.
TEST(ProfileCommandTest, FlagsBelowTheMethodologyOrMalformedExitTwo) {
  testing::TempDir repo("cs_profile_cmd_flags");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  const std::string dir = repo.path() + "/mlp";
  const struct {
    std::vector<std::string> flags;
    const char* says;
  } cases[] = {
      {{"--repetitions", "9"}, "--repetitions: '9' is not an integer from 10 to 1000000"},
      {{"--warmup-runs", "0"}, "--warmup-runs: '0' is not an integer from 1 to 1000000"},
      {{"--batch-sizes", "0"}, "--batch-sizes: '0' is not a positive integer or 'max'"},
      {{"--batch-sizes", "1,x"}, "--batch-sizes: 'x' is not a positive integer or 'max'"},
      // Base 10 like every other flag: CLI11 alone would read 0x10 as 16.
      {{"--seed", "0x10"}, "--seed: '0x10' is not an integer from 0 to 9223372036854775807"},
      {{"--seed", "-1"}, "--seed: '-1' is not an integer from 0 to 9223372036854775807"},
      {{"--batch-sizes", "1,,8"}, "--batch-sizes '1,,8': an empty entry"},
      // The report's path is checked before the profile runs, not after it.
      {{"--json", "/nonexistent-chronoserve-dir/p.json"},
       "--json '/nonexistent-chronoserve-dir/p.json': directory '/nonexistent-chronoserve-dir' does not exist"},
      {{"--json", ""}, "--json: a file path is needed"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {CHRONOSERVE_BIN, "profile", dir};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto run = testing::RunProgram(argv, absl::Seconds(120));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->first, 2) << c.says << ": " << run->second;
    EXPECT_NE(run->second.find(c.says), std::string::npos) << run->second;
    EXPECT_EQ(run->second.find("measured runs per batch size"), std::string::npos) << "refused before profiling: " << run->second;
  }
  const std::string json_path = repo.path() + "/clipped.json";
  auto clipped = testing::RunProgram({CHRONOSERVE_BIN, "profile", dir, "--batch-sizes", "1,5000000000", "--repetitions",
                                      "10", "--warmup-runs", "1", "--no-throughput-search", "--json", json_path},
                                     absl::Seconds(120));
  ASSERT_TRUE(clipped.ok()) << clipped.status();
  ASSERT_EQ(clipped->first, 0) << clipped->second;
  std::ifstream in(json_path);
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report.at("batch_sizes"), nlohmann::json::parse("[1, 4]")) << report.dump();
}

}  // namespace
}  // namespace chronoserve
