// Checks a chronobench JSON report against the schema of issue 5 / docs/CHRONOBENCH.md. Shared
// by the unit test (synthetic report) and the end-to-end test (the binary's real output).
#ifndef CHRONOSERVE_TESTS_CLIENT_REPORT_SCHEMA_H_
#define CHRONOSERVE_TESTS_CLIENT_REPORT_SCHEMA_H_

#include <algorithm>
#include <string>
#include <vector>

#include "client/chronobench/bench_options.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace chronoserve::client::bench::testing {

// `keys`: the percentiles the report gives (its sweep.percentiles), ascending.
inline void ExpectLatencySummary(const nlohmann::json& s, const std::string& what,
                                 const std::vector<std::string>& keys = {"p50", "p90", "p95", "p99", "p99_9"}) {
  ASSERT_TRUE(s.is_object()) << what << ": " << s.dump();
  double previous = 0;
  for (const std::string& key : keys) {
    ASSERT_TRUE(s.contains(key) && s[key].is_number()) << what << " lacks " << key;
    EXPECT_GE(s[key].get<double>(), previous) << what << " " << key << " below the lower percentile";
    previous = s[key].get<double>();
  }
  ASSERT_TRUE(s.contains("mean") && s["mean"].is_number()) << what;
  EXPECT_GE(s["mean"].get<double>(), 0) << what;
}

// `with_server_spans`: the server returned timing (chronoserve does), so every span is present.
inline void ExpectReportSchema(const nlohmann::json& report, bool with_server_spans) {
  ASSERT_TRUE(report.is_object());
  ASSERT_TRUE(report.contains("server") && report["server"].is_object());
  ASSERT_TRUE(report.contains("model") && report["model"].is_object());
  ASSERT_TRUE(report.contains("runs") && report["runs"].is_array());
  ASSERT_FALSE(report["runs"].empty());
  ASSERT_TRUE(report.contains("sweep") && report["sweep"]["percentiles"].is_array());
  std::vector<std::string> keys;
  for (const auto& p : report["sweep"]["percentiles"]) keys.push_back(PercentileKey(p.get<double>()));
  // The console and HTML tables show p50 and p99: whatever --percentiles asked, they are there.
  EXPECT_NE(std::find(keys.begin(), keys.end(), "p50"), keys.end()) << report["sweep"].dump();
  EXPECT_NE(std::find(keys.begin(), keys.end(), "p99"), keys.end()) << report["sweep"].dump();
  for (const auto& run : report["runs"]) {
    ASSERT_TRUE(run.contains("mode") && run["mode"].is_string());
    const std::string mode = run["mode"];
    const char* key = mode == "concurrency" ? "concurrency" : mode == "rate" ? "rate" : "idle_gap_ms";
    ASSERT_TRUE(mode == "concurrency" || mode == "rate" || mode == "idle_gap") << mode;
    EXPECT_TRUE(run.contains(key) && run[key].is_number()) << mode;
    EXPECT_TRUE(run.contains("batch_size") && run["batch_size"].is_number_integer());
    EXPECT_TRUE(run.contains("requests") && run["requests"].is_number_integer());
    EXPECT_TRUE(run.contains("errors") && run["errors"].is_number_integer());
    EXPECT_TRUE(run.contains("throughput_rps") && run["throughput_rps"].is_number());
    EXPECT_TRUE(run.contains("stable") && run["stable"].is_boolean());
    ASSERT_TRUE(run.contains("unanswered_at_end") && run["unanswered_at_end"].is_number_integer()) << mode;
    EXPECT_GE(run["unanswered_at_end"].get<int64_t>(), 0);
    ASSERT_TRUE(run.contains("unsent_at_end") && run["unsent_at_end"].is_number_integer()) << mode;
    EXPECT_GE(run["unsent_at_end"].get<int64_t>(), 0);
    ASSERT_TRUE(run.contains("sent_total") && run["sent_total"].is_number_integer()) << mode;
    EXPECT_GE(run["sent_total"].get<int64_t>(), 0);
    ASSERT_TRUE(run.contains("launch_bound_responses") && run["launch_bound_responses"].is_number_integer());
    ASSERT_TRUE(run.contains("device_timed_responses") && run["device_timed_responses"].is_number_integer());
    EXPECT_LE(run["launch_bound_responses"].get<int64_t>(), run["device_timed_responses"].get<int64_t>());
    ASSERT_TRUE(run.contains("clamped_values") && run["clamped_values"].is_object()) << mode;
    EXPECT_TRUE(run["clamped_values"]["saturated"].is_number_integer()) << run["clamped_values"].dump();
    EXPECT_TRUE(run["clamped_values"]["negative"].is_number_integer()) << run["clamped_values"].dump();
    ASSERT_TRUE(run.contains("latency_us") && run["latency_us"].is_object());
    const auto& latency = run["latency_us"];
    ExpectLatencySummary(latency["e2e"], "e2e", keys);
    for (const char* span : {"transport", "server_total", "queue", "input_stage", "h2d", "compute", "launch",
                             "d2h", "output_stage", "admit", "handback", "device_gap"}) {
      ASSERT_TRUE(latency.contains(span)) << span;
      if (with_server_spans) ExpectLatencySummary(latency[span], span, keys);
    }
    if (!with_server_spans) continue;
    // Items per executed batch counts each batch once: a harmonic mean of the sizes the responses
    // gave, so between their smallest and their (per-response) mean, 1% for the histogram's rounding.
    const auto& executed = run["batch_size_executed"];
    ASSERT_TRUE(executed.is_object()) << mode;
    ASSERT_TRUE(executed.contains("per_batch_mean") && executed["per_batch_mean"].is_number()) << executed.dump();
    const double per_batch = executed["per_batch_mean"].get<double>();
    EXPECT_GE(per_batch, executed["min"].get<double>() * 0.99) << executed.dump();
    EXPECT_LE(per_batch, executed["mean"].get<double>() * 1.01) << executed.dump();
  }
}

}  // namespace chronoserve::client::bench::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_REPORT_SCHEMA_H_
