// `chronoserve profile MODEL_DIR` runs the offline profiler from the server binary.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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
      {CHRONOSERVE_BIN, "profile", repo.path() + "/mlp", "--batch-sizes", "1,max", "--repetitions", "5",
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
  EXPECT_EQ(report.value("schema", ""), "chronoserve.profile/v1");
}

}  // namespace
}  // namespace chronoserve
