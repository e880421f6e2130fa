// The recorder's error handling and counts (errors, traced requests, transport, clamped values)
// and the launch-bound warning, on synthetic measurements (no server).
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "client/chronobench/console_report.h"
#include "client/chronobench/json_report.h"
#include "client/chronobench/latency_recorder.h"
#include "client/chronobench/trial_runner.h"
#include "gtest/gtest.h"
#include "tests/client/csv_parse.h"
#include "tests/client/report_fixtures.h"

namespace chronoserve::client::bench {
namespace {

using testing::MakePoint;
using testing::MakeReport;
using testing::OkRecord;

TEST(RecorderTest, ErrorsKeepTheirLatencyButNoSpans) {
  LatencyRecorder r;
  RequestRecord failed;
  failed.done_ns = 7'000'000;
  failed.grpc_code = 4;  // DEADLINE_EXCEEDED
  r.Record(failed);
  EXPECT_EQ(r.errors(), 1);
  EXPECT_EQ(r.errors_by_code().at(4), 1);
  EXPECT_EQ(r.metric(Metric::kE2e).count(), 1);
  EXPECT_EQ(r.metric(Metric::kCompute).count(), 0);
  EXPECT_STREQ(GrpcCodeName(4), "DEADLINE_EXCEEDED");
}

// The warm-up's end: a request intended to be sent before it (the closed loop's first wave,
// answered after the warm-up's last completion) is discarded, counted as such and nowhere else; one
// sent at or after it is measured, OK or not. Merged recorders add their discards.
TEST(RecorderTest, RequestsSentBeforeTheMeasurementStartAreDiscarded) {
  std::mt19937_64 rng(17);
  const RequestRecord ok = OkRecord(rng);  // intended at 1 s
  LatencyRecorder r;
  EXPECT_TRUE(r.Record(ok)) << "nothing is discarded before a cutoff is set";
  r = LatencyRecorder();
  r.DiscardSentBefore(ok.intended_ns + 1);
  EXPECT_EQ(r.measure_from_ns(), ok.intended_ns + 1);
  RequestRecord failed = ok;
  failed.grpc_code = 14;  // UNAVAILABLE
  failed.traced = true;
  failed.timing.reset();
  EXPECT_FALSE(r.Record(ok));
  EXPECT_FALSE(r.Record(failed));
  EXPECT_EQ(r.discarded(), 2);
  EXPECT_EQ(r.discarded_successes(), 1) << "the OK one";
  EXPECT_EQ(r.answered_ok(), 1) << "throughput counts an OK answer to a warm-up request";
  EXPECT_EQ(r.successes() + r.errors() + r.traced() + r.without_timing(), 0);
  for (int m = 0; m < kMetricCount; ++m) EXPECT_EQ(r.metric(static_cast<Metric>(m)).count(), 0) << m;
  EXPECT_EQ(r.schedule_lag().count(), 0);
  EXPECT_EQ(r.batch_size().count(), 0);

  RequestRecord at_cutoff = OkRecord(rng, /*lag_ns=*/5'000);
  at_cutoff.intended_ns += 1;
  at_cutoff.sent_ns += 1;
  at_cutoff.done_ns += 1;
  failed.intended_ns = failed.sent_ns = at_cutoff.intended_ns + 10;
  EXPECT_TRUE(r.Record(at_cutoff));
  EXPECT_TRUE(r.Record(failed));
  EXPECT_EQ(r.successes(), 1);
  EXPECT_EQ(r.errors(), 1);
  EXPECT_EQ(r.traced(), 1);
  EXPECT_EQ(r.metric(Metric::kE2e).count(), 2);
  EXPECT_EQ(r.discarded(), 2);

  LatencyRecorder merged;
  ASSERT_TRUE(merged.Merge(r).ok());
  ASSERT_TRUE(merged.Merge(r).ok());
  EXPECT_EQ(merged.discarded(), 4);
  EXPECT_EQ(merged.successes(), 2);
  EXPECT_EQ(merged.answered_ok(), 4) << "two measured, two discarded, all OK";
}

// A code outside 0..16 (a server's error_code parameter) counts as UNKNOWN, with the real
// UNKNOWNs; the JSON adds them up instead of keeping the last one.
TEST(RecorderTest, InvalidCodesCountAsUnknownAndAddUp) {
  EXPECT_EQ(ValidGrpcCode(14), 14);
  EXPECT_EQ(ValidGrpcCode(42), 2);
  EXPECT_EQ(ValidGrpcCode(-1), 2);
  EXPECT_EQ(ValidGrpcCode((int64_t{1} << 32) + 14), 2) << "not truncated to UNAVAILABLE";
  PointResult p = MakePoint(LoadMode::kConcurrency, 1, 1000);  // one UNAVAILABLE
  for (int code : {2, 42, 2, 99}) {
    RequestRecord failed;
    failed.done_ns = 3'000'000;
    failed.grpc_code = code;
    p.recorder.Record(failed);
  }
  EXPECT_EQ(p.recorder.errors(), 5);
  EXPECT_EQ(p.recorder.errors_by_code().at(2), 4);
  EXPECT_EQ(p.recorder.errors_by_code().size(), 2u);
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  report.points = {p};
  const nlohmann::json run = ReportToJson(report)["runs"][0];
  EXPECT_EQ(run["errors_by_code"], (nlohmann::json{{"UNAVAILABLE", 1}, {"UNKNOWN", 4}})) << run["errors_by_code"];
}

// traced_requests covers the same requests as "requests": those a window recorded, OK or not.
TEST(RecorderTest, TracedRequestsAreCountedWithTheRequestsTheyBelongTo) {
  std::mt19937_64 rng(3);
  LatencyRecorder window;
  for (int i = 0; i < 10; ++i) {
    RequestRecord r = OkRecord(rng);
    r.traced = i % 3 == 0;  // 0, 3, 6, 9
    window.Record(r);
  }
  RequestRecord failed;
  failed.done_ns = 2'000'000;
  failed.grpc_code = 1;  // CANCELLED
  failed.traced = true;
  window.Record(failed);
  EXPECT_EQ(window.traced(), 5);
  LatencyRecorder merged;
  ASSERT_TRUE(merged.Merge(window).ok());
  ASSERT_TRUE(merged.Merge(window).ok());
  EXPECT_EQ(merged.traced(), 10);
  EXPECT_EQ(merged.successes() + merged.errors(), 22);
}

TEST(RecorderTest, TransportIsPerRequestResidualAndViolationsAreCounted) {
  LatencyRecorder r;
  RequestRecord rec;
  rec.sent_ns = 0;
  rec.done_ns = 300'000;
  RequestTiming t;
  t.compute_ns = 100'000;
  t.server_total_ns = 120'000;
  rec.timing = t;
  r.Record(rec);
  EXPECT_NEAR(r.metric(Metric::kTransport).ValueAtPercentile(50), 180'000, 180);
  EXPECT_EQ(r.timing_violations(), 0);
  t.server_total_ns = 400'000;  // longer than the client saw: impossible, so reported
  rec.timing = t;
  r.Record(rec);
  EXPECT_EQ(r.timing_violations(), 1);
}

// Histograms clamp what lies outside their range; the recorder sums it, the report says where.
TEST(RecorderTest, ClampedValuesAreReportedNotHidden) {
  std::mt19937_64 rng(5);
  PointResult p = MakePoint(LoadMode::kConcurrency, 1, 1000);
  EXPECT_EQ(p.recorder.saturated_values(), 0);
  EXPECT_EQ(p.recorder.negative_values(), 0);
  EXPECT_FALSE(ClampedValuesWarning(p.recorder).has_value());
  RequestRecord hung = OkRecord(rng);
  hung.timing.reset();
  hung.done_ns = hung.sent_ns + Histogram::kDefaultMaxValue + 5'000'000;  // past the ~18 min range
  p.recorder.Record(hung);
  RequestRecord early = OkRecord(rng);
  early.done_ns = early.sent_ns + early.timing->server_total_ns - 1'000;  // transport -1 us
  p.recorder.Record(early);
  EXPECT_EQ(p.recorder.saturated_values(), 1 + 1) << "e2e and e2e_actual_send";
  EXPECT_EQ(p.recorder.negative_values(), 1) << "transport";
  const std::optional<std::string> warning = ClampedValuesWarning(p.recorder);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("2 above the range recorded as its maximum (e2e 1, e2e_actual_send 1"), std::string::npos)
      << *warning;
  EXPECT_NE(warning->find("1 negative recorded as 0 (transport 1)"), std::string::npos) << *warning;

  LatencyRecorder merged;  // the counts survive the merge of the workers' recorders
  ASSERT_TRUE(merged.Merge(p.recorder).ok());
  EXPECT_EQ(merged.saturated_values(), 2);
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  report.points = {p};
  const nlohmann::json run = ReportToJson(report)["runs"][0];
  EXPECT_EQ(run["clamped_values"], (nlohmann::json{{"saturated", 2}, {"negative", 1}})) << run["clamped_values"];
}

// Each response says the size of the batch it ran in, so a large batch speaks through many
// responses: the items per executed batch is the harmonic mean of what they say, not the mean.
TEST(RecorderTest, ItemsPerBatchCountsEachBatchOnce) {
  std::mt19937_64 rng(0xba7c);
  auto answered_in = [&rng](int64_t batch_items) {
    RequestRecord rec = OkRecord(rng);
    rec.timing->batch_size = batch_items;
    return rec;
  };
  LatencyRecorder ones;  // one-item requests: a batch of 16, then four batches of 1
  for (int i = 0; i < 16; ++i) ones.Record(answered_in(16));
  for (int i = 0; i < 4; ++i) ones.Record(answered_in(1));
  EXPECT_DOUBLE_EQ(ones.batch_size().mean(), (16.0 * 16 + 4) / 20) << "per response";
  EXPECT_DOUBLE_EQ(ones.items_per_batch(), 20.0 / 5) << "20 items in 5 batches";

  LatencyRecorder pairs;  // two-item requests: a batch of 8 items (4 requests), one of 2 items
  for (int i = 0; i < 4; ++i) pairs.Record(answered_in(8));
  pairs.Record(answered_in(2));
  EXPECT_DOUBLE_EQ(pairs.items_per_batch(), 10.0 / 2);
  RequestRecord untimed = OkRecord(rng);
  untimed.timing.reset();
  pairs.Record(untimed);  // a response without timing says nothing about its batch
  EXPECT_DOUBLE_EQ(pairs.items_per_batch(), 10.0 / 2);

  LatencyRecorder later;  // another window of the one-item point: a batch of 8
  for (int i = 0; i < 8; ++i) later.Record(answered_in(8));
  LatencyRecorder merged;  // windows merge: 28 items in 6 batches
  ASSERT_TRUE(merged.Merge(ones).ok());
  ASSERT_TRUE(merged.Merge(later).ok());
  EXPECT_DOUBLE_EQ(merged.items_per_batch(), 28.0 / 6);
  EXPECT_EQ(merged.responses_by_batch_size(), (std::map<int64_t, int64_t>{{1, 4}, {8, 8}, {16, 16}}));
  EXPECT_EQ(LatencyRecorder().items_per_batch(), 0) << "no response gave its batch size";

  BenchReport report = MakeReport(LoadMode::kConcurrency);
  report.points = {MakePoint(LoadMode::kConcurrency, 1, 1000)};
  report.points[0].recorder = ones;
  const nlohmann::json run = ReportToJson(report)["runs"][0];
  EXPECT_DOUBLE_EQ(run["batch_size_executed"]["per_batch_mean"].get<double>(), 4.0) << run["batch_size_executed"];
  EXPECT_DOUBLE_EQ(run["batch_size_executed"]["mean"].get<double>(), 13.0);
  EXPECT_EQ(run["batch_size_executed"]["responses_by_size"], (nlohmann::json{{"1", 4}, {"16", 16}}));
  const auto rows = testing::ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ(std::stod((*rows)[1][testing::Column((*rows)[0], "batch_size_executed_per_batch_mean")]), 4.0);
  EXPECT_NE(TableRow(report.points[0]).find("    4.0 "), std::string::npos) << TableRow(report.points[0]);

  // Responses that said batch size 0 (no batch) are in the histogram but not in the items per batch.
  LatencyRecorder zeros;
  zeros.Record(answered_in(0));
  EXPECT_EQ(zeros.batch_size_responses(), 0);
  report.points[0].recorder = zeros;
  EXPECT_TRUE(ReportToJson(report)["runs"][0]["batch_size_executed"]["per_batch_mean"].is_null());
  EXPECT_NE(TableRow(report.points[0]).find("      - "), std::string::npos) << TableRow(report.points[0]);
}

// A device-timed response with this launch and compute (µs), from a CUDA graph or not.
RequestRecord DeviceTimed(int64_t launch_us, int64_t compute_us, bool graph) {
  RequestRecord rec;
  rec.sent_ns = 0;
  RequestTiming t;
  t.device_timed = true;
  t.cuda_graph = graph;
  t.launch_ns = launch_us * 1000;
  t.compute_ns = compute_us * 1000;
  t.server_total_ns = t.compute_ns + 50'000;
  rec.timing = t;
  rec.done_ns = t.server_total_ns + 100'000;
  return rec;
}

TEST(LaunchBoundTest, HalfTheDeviceTimedResponsesLaunchBoundSuggestsGraphs) {
  LatencyRecorder r;
  for (int i = 0; i < 6; ++i) r.Record(DeviceTimed(410 + i, 430 + i, false));  // 0.95: launch-bound
  for (int i = 0; i < 4; ++i) r.Record(DeviceTimed(100, 430, false));          // 0.23: not
  RequestRecord host_timed = DeviceTimed(500, 100, false);
  host_timed.timing->device_timed = false;  // CPU spans: never launch-bound, not counted
  r.Record(host_timed);
  EXPECT_EQ(r.device_timed(), 10);
  EXPECT_EQ(r.launch_bound(), 6);
  EXPECT_EQ(r.launch_bound_graphs(), 0);
  const std::optional<std::string> warning = LaunchBoundWarning(r);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("launch-bound: in 60% of the device-timed responses"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("p50 launch 41"), std::string::npos) << *warning;  // 410-415 us
  EXPECT_NE(warning->find("optimization { cuda { graphs: true } }"), std::string::npos) << *warning;

  LatencyRecorder merged;  // counts survive the merge of the workers' recorders
  ASSERT_TRUE(merged.Merge(r).ok());
  EXPECT_EQ(merged.launch_bound(), 6);
  EXPECT_EQ(merged.device_timed(), 10);
}

TEST(LaunchBoundTest, FewLaunchBoundOrHostTimedResponsesGiveNoWarning) {
  LatencyRecorder some;
  for (int i = 0; i < 4; ++i) some.Record(DeviceTimed(400, 430, false));
  for (int i = 0; i < 6; ++i) some.Record(DeviceTimed(10, 430, false));
  EXPECT_EQ(some.launch_bound(), 4);
  EXPECT_FALSE(LaunchBoundWarning(some).has_value()) << "4 of 10 is not most of the responses";

  LatencyRecorder cpu;
  RequestRecord host_timed = DeviceTimed(500, 100, false);
  host_timed.timing->device_timed = false;
  for (int i = 0; i < 5; ++i) cpu.Record(host_timed);
  EXPECT_EQ(cpu.device_timed(), 0);
  EXPECT_FALSE(LaunchBoundWarning(cpu).has_value()) << "host-timed spans say nothing about launches";
  EXPECT_FALSE(LaunchBoundWarning(LatencyRecorder()).has_value());
}

TEST(LaunchBoundTest, GraphReplaysThatAreLaunchBoundSuggestLargerBatches) {
  LatencyRecorder r;
  for (int i = 0; i < 8; ++i) r.Record(DeviceTimed(9, 10, true));
  EXPECT_EQ(r.launch_bound_graphs(), 8);
  const std::optional<std::string> warning = LaunchBoundWarning(r);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("already were CUDA graph replays"), std::string::npos) << *warning;
  EXPECT_EQ(warning->find("graphs: true"), std::string::npos) << *warning;
}

}  // namespace
}  // namespace chronoserve::client::bench
