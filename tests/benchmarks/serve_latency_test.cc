// bench_serve_latency end to end on the CPU against the real chronoserve binary (its figures are not
// checked: they are not tests): every transport it offers here, its report's rows, and the
// shared-memory runs with and without the client's copies. --shared-memory cuda needs a CUDA build
// (tests/gpu ran it through run_shared_memory.sh); here it must refuse clearly.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/cuda_shared_memory.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

constexpr absl::Duration kRunTimeout = absl::Seconds(120);

class ServeLatencyBenchmarkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto suite = testing::StartServerInNewDir("serve_latency_test", [](const std::string& repository) {
      examples::ModelOptions mlp;
      mlp.max_batch_size = 8;
      return examples::WriteMlp(repository, "mlp", mlp);
    });
    ASSERT_TRUE(suite.ok()) << suite.status();
    suite_ = suite->release();
  }
  static void TearDownTestSuite() {
    delete suite_;
    suite_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(suite_, nullptr); }

  // Runs the benchmark on the mlp (batch 4, 30 requests) with `extra` flags; exit code and output.
  std::pair<int, std::string> Run(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {SERVE_LATENCY_BIN, "-u", suite_->server.url, "-m", "mlp", "-b", "4", "-n", "30",
                                     "--warmup-requests", "5", "--json", json_path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto run = testing::RunProgram(argv, kRunTimeout);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : std::pair<int, std::string>{-1, ""};
  }
  std::string json_path() const { return suite_->dir.path() + "/serve_latency.json"; }
  nlohmann::json Report() const { return nlohmann::json::parse(std::ifstream(json_path())); }

  static inline testing::ServerInDir* suite_ = nullptr;
};

TEST_F(ServeLatencyBenchmarkTest, TheMessagePathReportsEveryServerSpan) {
  auto [code, output] = Run({});
  ASSERT_EQ(code, 0) << output;
  const nlohmann::json report = Report();
  EXPECT_EQ(report["requests"], 30);
  EXPECT_EQ(report["errors"], 0);
  EXPECT_EQ(report["shared_memory"], "none");
  for (const char* row : {"e2e", "transport", "server_total", "admit", "compute", "outside_gpu_spans"}) {
    EXPECT_TRUE(report["latency_us"].contains(row)) << row;
  }
  EXPECT_FALSE(report["latency_us"].contains("call")) << "the call is e2e without shared memory";
}

TEST_F(ServeLatencyBenchmarkTest, SharedMemoryWithAndWithoutTheClientsCopies) {
  for (bool preload : {false, true}) {
    SCOPED_TRACE(preload ? "preloaded" : "client copies");
    std::vector<std::string> flags = {"--shared-memory", "system"};
    if (preload) flags.push_back("--preload-shared-memory");
    auto [code, output] = Run(flags);
    ASSERT_EQ(code, 0) << output;
    EXPECT_NE(output.find(preload ? "system shared memory, preloaded" : "system shared memory (e2e includes"),
              std::string::npos)
        << output;
    const nlohmann::json report = Report();
    EXPECT_EQ(report["requests"], 30);
    EXPECT_EQ(report["errors"], 0);
    EXPECT_EQ(report["preloaded_shared_memory"], preload);
    for (const char* row : {"call", "client_copies", "call_outside_gpu_spans"}) {
      EXPECT_TRUE(report["latency_us"].contains(row)) << row;
    }
    const double e2e = report["latency_us"]["e2e"]["p50"], call = report["latency_us"]["call"]["p50"];
    EXPECT_GE(e2e, call) << "e2e holds the call";
  }
}

TEST_F(ServeLatencyBenchmarkTest, CudaSharedMemoryWithoutCudaRefusesClearly) {
  if (client::CudaSharedMemory::Available()) GTEST_SKIP() << "this bench_serve_latency has CUDA";
  auto [code, output] = Run({"--shared-memory", "cuda"});
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("--shared-memory cuda needs a build with CUDA"), std::string::npos) << output;
}

}  // namespace
}  // namespace chronoserve
