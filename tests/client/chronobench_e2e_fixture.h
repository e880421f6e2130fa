// ChronobenchE2eTest: the fixture of chronobench's end-to-end tests (chronobench_e2e_test.cc: the
// load modes through the library; chronobench_binary_test.cc: the binary and its files). One
// chronoserve binary on 127.0.0.1 serves mlp (max batch 64), and `versioned` (versions 1 and 2),
// from a TestDir for the whole suite;
// Options() are short runs against it, Run() fails the test on any failed point, and
// ExpectBreakdownConsistent checks TIMING.md's invariants on a point. In a named namespace, so that
// the tests of both files share one fixture class (gtest requires it of a suite) and one server.
#ifndef CHRONOSERVE_TESTS_CLIENT_CHRONOBENCH_E2E_FIXTURE_H_
#define CHRONOSERVE_TESTS_CLIENT_CHRONOBENCH_E2E_FIXTURE_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "client/chronobench/benchmark.h"
#include "client/chronobench/trial_runner.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tools/example_models.h"

namespace chronoserve::client::bench::testing {

class ChronobenchE2eTest : public ::testing::Test {
 protected:
  using TestDir = chronoserve::testing::TestDir;
  using Subprocess = chronoserve::testing::Subprocess;

  static void SetUpTestSuite() {
    auto suite = chronoserve::testing::StartServerInNewDir("chronobench", [](const std::string& repository) {
      examples::ModelOptions mlp;
      mlp.max_batch_size = 64;
      RETURN_IF_ERROR(examples::WriteMlp(repository, "mlp", mlp));
      // "versioned": versions 1 and 2 (the same weights), both served.
      mlp.max_batch_size = 8;
      mlp.extra_config = "version_policy { all { } }";
      RETURN_IF_ERROR(examples::WriteMlp(repository, "versioned", mlp));
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(repository) / "versioned" / "2", ec);
      std::filesystem::copy_file(std::filesystem::path(repository) / "versioned" / "1" / "model.pt",
                                 std::filesystem::path(repository) / "versioned" / "2" / "model.pt", ec);
      if (ec) return absl::InternalError(ec.message());
      return absl::OkStatus();
    });
    ASSERT_TRUE(suite.ok()) << suite.status();
    suite_ = suite->release();
    dir_ = &suite_->dir.path();
    url_ = &suite_->server.url;
    server_ = suite_->server.process.get();
  }
  static void TearDownTestSuite() {
    delete suite_;  // the server, then its directory
    suite_ = nullptr;
    dir_ = url_ = nullptr;
    server_ = nullptr;
  }

  BenchOptions Options() const {
    BenchOptions o;
    o.target.url = *url_;
    o.target.model = "mlp";
    o.target.timeout_ms = 10'000;
    o.measurement.interval_ms = 300;
    o.measurement.warmup_requests = 5;
    o.measurement.max_trials = 3;
    o.measurement.stability_percentage = 50;
    o.load.threads = 2;
    return o;
  }

  // `progress` (may be null) as RunnerContext says: called about every 200 ms on the calling
  // thread while a point runs.
  static BenchReport Run(const BenchOptions& options,
                         const std::function<void(const std::string&)>& progress = nullptr) {
    auto bench = Benchmark::Create(options, SteadyClock::Get());
    EXPECT_TRUE(bench.ok()) << bench.status();
    if (!bench.ok()) return {};
    auto report = (*bench)->Run(nullptr, progress);
    EXPECT_TRUE(report.ok()) << report.status();
    if (report.ok() && report->failed_point.has_value()) {
      ADD_FAILURE() << report->failed_point->label << ": " << report->failed_point->message;
    }
    return report.ok() ? *std::move(report) : BenchReport{};
  }

  // TIMING.md's invariants, on what the client measured.
  static void ExpectBreakdownConsistent(const PointResult& p) {
    const LatencyRecorder& r = p.recorder;
    EXPECT_GT(r.successes(), 0) << p.spec.Label();
    EXPECT_EQ(r.errors(), 0) << p.spec.Label();
    EXPECT_EQ(r.without_timing(), 0) << "chronoserve always returns timing.*";
    EXPECT_EQ(r.timing_violations(), 0) << p.spec.Label();
    EXPECT_EQ(r.metric(Metric::kCompute).count(), r.successes());
    EXPECT_EQ(r.metric(Metric::kTransport).negative(), 0);
    EXPECT_LE(r.metric(Metric::kServerTotal).max(), r.metric(Metric::kE2eActualSend).max());
    EXPECT_GE(r.batch_size().min(), p.spec.batch_size);
    EXPECT_EQ(r.metric(Metric::kE2e).count(), r.successes());
    EXPECT_GT(p.throughput_rps, 0);
  }

  static inline chronoserve::testing::ServerInDir* suite_ = nullptr;  // removed at the end of the suite
  static inline const std::string* dir_ = nullptr;  // suite_'s directory
  static inline const std::string* url_ = nullptr;
  static inline Subprocess* server_ = nullptr;
};

// The shared-memory regions registered with the server at `url`; -1 when it cannot say.
inline int RegisteredRegions(const std::string& url) {
  auto status = InferenceClient::Connect(url, std::chrono::seconds(30))->SystemSharedMemoryStatus();
  return status.ok() ? status->regions_size() : -1;
}

}  // namespace chronoserve::client::bench::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_CHRONOBENCH_E2E_FIXTURE_H_
