// ServerMetrics: outcomes, per-request vs per-batch observation, requests refused before queueing,
// many threads completing at once; the striped histograms' and counters' buckets, sums and exposition.
#include "server/telemetry/server_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/telemetry/live_state_collector.h"
#include "server/telemetry/striped_metrics.h"

namespace chronoserve::server::telemetry {
namespace {

class ServerMetricsTest : public ::testing::Test {
 protected:
  // What /metrics shows: the registry's counters and gauges, then ServerMetrics' histograms.
  static std::string Text(const prometheus::Registry& registry, const ServerMetrics& metrics) {
    std::vector<prometheus::MetricFamily> families = registry.Collect();
    for (auto& family : metrics.Collect()) families.push_back(std::move(family));
    return prometheus::TextSerializer().Serialize(families);
  }
  std::string Text() { return Text(registry_, metrics_); }
  static bool Has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }
  // One request of the batch a worker took at `dequeued_ns`; `counts_batch` as the worker marks
  // the batch's first request.
  void Finish(int64_t dequeued_ns, int64_t worker, bool counts_batch, const absl::Status& status = absl::OkStatus(),
              bool request_timing = true, bool outputs_lent = false) {
    InferRequest r;
    r.timeline.received_ns = 10;
    r.timeline.enqueued_ns = 20;
    BatchTiming b;
    b.dequeued_ns = dequeued_ns;
    b.staged_ns = dequeued_ns + 5;
    b.gpu_done_ns = dequeued_ns + 100;
    b.compute_ns = 80;
    b.batch_size = 3;
    b.worker = worker;
    b.request_timing = request_timing;
    b.outputs_lent = outputs_lent;
    r.timeline.SetBatch(b, counts_batch);
    r.timeline.output_done_ns = dequeued_ns + 110;
    metrics_.OnRequestDone(spec_, &r, r.timeline.Finalize(dequeued_ns + 120), status);
  }

  prometheus::Registry registry_;
  ServerMetrics metrics_{&registry_};
  ModelSpec spec_ = [] {
    ModelSpec s;
    s.name = "m";
    s.version = 2;
    return s;
  }();
};

TEST_F(ServerMetricsTest, CountsOutcomesAndBatchesOnce) {
  Finish(100, 0, true);  // batch A: three requests
  Finish(100, 0, false);
  Finish(100, 0, false, absl::InternalError("scatter failed"));
  Finish(100, 1, true);  // same stamp, other worker: batch B
  Finish(500, 0, true);  // batch C
  metrics_.OnRequestDone(spec_, nullptr, RequestTiming{}, absl::ResourceExhaustedError("queue full"));
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 4)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="internal",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="resource_exhausted",version="2"} 1)"));
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 5)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_compute_duration_seconds_count{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batch_size_sum{model="m",version="2"} 9)")) << text;
}

// Batches that sent outputs from the worker's own buffer are counted once each, beside all batches.
TEST_F(ServerMetricsTest, BatchesThatLentOutputsAreCountedOnce) {
  Finish(100, 0, true, absl::OkStatus(), true, /*outputs_lent=*/true);  // batch A, two requests
  Finish(100, 0, false, absl::OkStatus(), true, /*outputs_lent=*/true);
  Finish(200, 0, true);  // batch B: copied
  Finish(300, 0, true, absl::OkStatus(), /*request_timing=*/false, /*outputs_lent=*/true);  // batch C, untimed
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_outputs_lent_total{model="m",version="2"} 2)")) << text;
}

TEST_F(ServerMetricsTest, WithoutRequestTimingOnlyHostFiguresAndCounts) {
  Finish(100, 0, true, absl::OkStatus(), /*request_timing=*/false);
  Finish(200, 0, true, absl::OkStatus(), /*request_timing=*/false);
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_count{model="m",version="2"} 2)")) << text;
  // Host stamps, kept with request timing off like queue: received -> enqueued 10 ns, scattered ->
  // finalised 10 ns.
  EXPECT_TRUE(Has(text, R"(chronoserve_admit_duration_seconds_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_handback_duration_seconds_sum{model="m",version="2"} 2e-08)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_compute_duration_seconds_count{model="m",version="2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_h2d_duration_seconds_count{model="m",version="2"} 0)")) << text;
}

TEST_F(ServerMetricsTest, AFailedBatchFeedsOnlyTheStagesItFinishedAndNoBatchFigures) {
  // The worker's timelines of two failed batches, each the batch's marked (first) request:
  // GatherInputs failed (taken, never staged), and Finish failed after Wait (device work observed
  // done, outputs never scattered).
  auto fail = [this](bool staged, bool gpu_done) {
    InferRequest r;
    r.timeline.received_ns = 1'000;
    r.timeline.enqueued_ns = 2'000;
    BatchTiming b;
    b.dequeued_ns = 30'000;
    if (staged) b.staged_ns = 45'000;
    if (gpu_done) {
      b.gpu_done_ns = 90'000;
      b.h2d_ns = 7'000;
      b.compute_ns = 20'000;
      b.d2h_ns = 3'000;
    }
    b.batch_size = 4;
    r.timeline.SetBatch(b, /*counts_batch=*/true);
    metrics_.OnRequestDone(spec_, &r, r.timeline.Finalize(100'000), absl::InternalError("batch failed"));
  };
  fail(/*staged=*/false, /*gpu_done=*/false);
  fail(/*staged=*/true, /*gpu_done=*/true);
  Finish(200'000, 0, true);  // and one that succeeded
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="internal",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_count{model="m",version="2"} 3)")) << text;
  // Staged: the second failure (15 us) and the success (5 ns); never a 0 for the first failure.
  EXPECT_TRUE(Has(text, R"(chronoserve_input_stage_duration_seconds_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_input_stage_duration_seconds_sum{model="m",version="2"} 1.5005e-05)"))
      << text;
  // Only the success built a response.
  EXPECT_TRUE(Has(text, R"(chronoserve_output_stage_duration_seconds_count{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_handback_duration_seconds_count{model="m",version="2"} 1)")) << text;
  // Every request was admitted: the failures' 1 us each and the success's 10 ns.
  EXPECT_TRUE(Has(text, R"(chronoserve_admit_duration_seconds_count{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_admit_duration_seconds_sum{model="m",version="2"} 2.01e-06)")) << text;
  // Per-batch figures: the batch that succeeded only.
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batch_size_count{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batch_size_sum{model="m",version="2"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_compute_duration_seconds_count{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_h2d_duration_seconds_count{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_d2h_duration_seconds_count{model="m",version="2"} 1)")) << text;
}

TEST_F(ServerMetricsTest, ARequestThatFailedAloneInABatchThatSucceededStillCountsTheBatch) {
  // An output too large for its shared-memory region fails that request alone; the batch ran.
  Finish(100, 0, true, absl::InvalidArgumentError("output does not fit the region"));
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_compute_duration_seconds_count{model="m",version="2"} 1)")) << text;
}

TEST_F(ServerMetricsTest, OutcomeLabels) {
  EXPECT_EQ(ServerMetrics::OutcomeLabel(absl::StatusCode::kOk), "success");
  EXPECT_EQ(ServerMetrics::OutcomeLabel(absl::StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(ServerMetrics::OutcomeLabel(absl::StatusCode::kUnavailable), "unavailable");
}

TEST_F(ServerMetricsTest, ModelLoadGauges) {
  metrics_.RecordModelLoad("m", 2, 1'500'000'000, 250'000'000);
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_model_load_duration_seconds{model="m",version="2"} 1.5)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_model_warmup_duration_seconds{model="m",version="2"} 0.25)")) << text;
  // The request series exist from the load, at 0, before any request: rate() sees the first ones.
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batch_size_count{model="m",version="2"} 0)")) << text;
}

TEST_F(ServerMetricsTest, AStragglerOfAnEarlierBatchDoesNotCountItAgain) {
  // The completion pool finishes a batch's requests on several threads, so a later batch's first
  // request can finish before an earlier batch's last: only the marked request counts a batch.
  Finish(100, 0, true);   // batch A
  Finish(200, 0, true);   // batch B, worker 0 again
  Finish(100, 0, false);  // A's straggler
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batch_size_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 3)")) << text;
}

TEST_F(ServerMetricsTest, ThreadsCompletingAtOnceLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kBatches = 500;
  constexpr int kPerBatch = 4;
  ModelSpec other = spec_;
  other.name = "other";
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        for (int i = 0; i < kPerBatch; ++i) {
          InferRequest r;
          BatchTiming batch;
          batch.dequeued_ns = 1000 + b;
          batch.staged_ns = batch.dequeued_ns + 1;
          batch.gpu_done_ns = batch.dequeued_ns + 50;
          batch.compute_ns = 40 + t;
          batch.batch_size = kPerBatch;
          batch.worker = t;
          r.timeline.received_ns = 10;
          r.timeline.enqueued_ns = 20;
          r.timeline.SetBatch(batch, i == 0);
          r.timeline.output_done_ns = batch.gpu_done_ns + 1;
          // Every other request of thread 0 is another model's: its cached entry must not stick.
          const ModelSpec& spec = t == 0 && i % 2 == 1 ? other : spec_;
          const absl::Status status = i == 3 ? absl::DeadlineExceededError("late") : absl::OkStatus();
          metrics_.OnRequestDone(spec, &r, r.timeline.Finalize(batch.gpu_done_ns + 2), status);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string text = Text();
  // Thread 0 sent its odd requests (i = 1, 3) to "other": 2 per batch there, 2 here.
  const int here = (kThreads - 1) * kBatches * kPerBatch + kBatches * 2;
  const int there = kBatches * 2;
  const int late_here = (kThreads - 1) * kBatches;
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_request_duration_seconds_count{model="m",version="2"} )", here))) << text;
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_request_duration_seconds_count{model="other",version="2"} )", there)));
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_requests_total{model="m",outcome="success",version="2"} )",
                                     here - late_here)));
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_requests_total{model="m",outcome="deadline_exceeded",version="2"} )",
                                     late_here)));
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_requests_total{model="other",outcome="deadline_exceeded",version="2"} )",
                                     kBatches)));
  EXPECT_TRUE(Has(text, absl::StrCat(R"(chronoserve_batches_total{model="m",version="2"} )", kThreads * kBatches)));
  // Every thread's compute (40 + t ns) once per batch.
  const double compute_sum_ns = kBatches * (kThreads * 40.0 + kThreads * (kThreads - 1) / 2.0);
  const std::string sum_line = R"(chronoserve_compute_duration_seconds_sum{model="m",version="2"} )";
  const size_t at = text.find(sum_line);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + sum_line.size())), compute_sum_ns * 1e-9, 1e-15);
}

TEST_F(ServerMetricsTest, LatencyBucketsAreTheDecimalBoundsTheyWere) {
  // Dashboards select buckets by their `le` label: the bounds must be the doubles that the decimal
  // literals (and prometheus-cpp's own histograms before) gave, not nanoseconds times 1e-9.
  Finish(100, 0, true);
  const std::vector<double> expected = {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                                        2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
  for (const prometheus::MetricFamily& family : metrics_.Collect()) {
    if (family.type != prometheus::MetricType::Histogram || family.name == "chronoserve_batch_size") continue;
    ASSERT_FALSE(family.metric.empty()) << family.name;
    const auto& buckets = family.metric[0].histogram.bucket;
    ASSERT_EQ(buckets.size(), expected.size() + 1) << family.name;
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(buckets[i].upper_bound, expected[i]) << family.name << " " << i;
  }
  EXPECT_TRUE(Has(Text(), R"(chronoserve_queue_duration_seconds_bucket{model="m",version="2",le="2.5e-05"} 1)")) << Text();
}

// Spans of a few microseconds (a CUDA graph's launch, a small d2h) land in buckets of their own:
// with the first bucket at 10 us, 3 us and 8 us were one bucket and every quantile under it a guess.
TEST_F(ServerMetricsTest, MicrosecondSpansAreResolved) {
  Finish(20 + 3'000, 0, true);  // queued at 20 ns: queue 3 us
  Finish(20 + 8'000, 0, true);  // queue 8 us
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_bucket{model="m",version="2",le="2.5e-06"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_bucket{model="m",version="2",le="5e-06"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_bucket{model="m",version="2",le="1e-05"} 2)")) << text;
}

TEST_F(ServerMetricsTest, AFreshInstanceStartsFromNothing) {
  // The same thread and the same spec against a second ServerMetrics (which may reuse the first
  // one's address): its thread cache must not lead to the first one's metrics.
  Finish(100, 0, true);
  for (int round = 0; round < 3; ++round) {
    prometheus::Registry registry;
    auto metrics = std::make_unique<ServerMetrics>(&registry);
    InferRequest r;
    r.timeline.received_ns = 1;
    metrics->OnRequestDone(spec_, &r, r.timeline.Finalize(9), absl::OkStatus());
    const std::string text = Text(registry, *metrics);
    EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 1)")) << text;
    EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 1)")) << text;
  }
  EXPECT_TRUE(Has(Text(), R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 1)"));
}

TEST(StripedMetricsTest, BucketsIncludeTheirUpperBoundAndAccumulate) {
  StripedHistogram h({10, 20, 40}, 2.0);
  for (int64_t v : {-3, 0, 10, 11, 20, 39, 40, 41, 1000}) h.Observe(v);
  const prometheus::ClientMetric::Histogram s = h.Snapshot();
  ASSERT_EQ(s.bucket.size(), 4u);
  EXPECT_EQ(s.bucket[0].cumulative_count, 3u);  // -3, 0, 10
  EXPECT_EQ(s.bucket[1].cumulative_count, 5u);  // + 11, 20
  EXPECT_EQ(s.bucket[2].cumulative_count, 7u);  // + 39, 40
  EXPECT_EQ(s.bucket[3].cumulative_count, 9u);  // + 41, 1000
  EXPECT_DOUBLE_EQ(s.bucket[0].upper_bound, 5.0);
  EXPECT_DOUBLE_EQ(s.bucket[2].upper_bound, 20.0);
  EXPECT_TRUE(std::isinf(s.bucket[3].upper_bound));
  EXPECT_EQ(s.sample_count, 9u);
  EXPECT_DOUBLE_EQ(s.sample_sum, (-3 + 0 + 10 + 11 + 20 + 39 + 40 + 41 + 1000) * 0.5);
}

TEST(StripedMetricsTest, ExposedInPrometheusText) {
  StripedFamily<StripedHistogram> family("x_seconds", "help text", [] {
    return std::make_unique<StripedHistogram>(std::vector<int64_t>{1'000, 1'000'000}, 1e9);
  });
  family.Add({{"model", "a"}}).Observe(500);
  family.Add({{"model", "a"}}).Observe(2'000'000);
  family.Add({{"model", "b"}}).Observe(7'000);
  const std::string text = prometheus::TextSerializer().Serialize({family.Collect()});
  for (const char* line : {"# HELP x_seconds help text", "# TYPE x_seconds histogram",
                           R"(x_seconds_count{model="a"} 2)", R"(x_seconds_bucket{model="a",le="1e-06"} 1)",
                           R"(x_seconds_bucket{model="a",le="0.001"} 1)", R"(x_seconds_bucket{model="a",le="+Inf"} 2)",
                           R"(x_seconds_bucket{model="b",le="0.001"} 1)", R"(x_seconds_count{model="b"} 1)"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
  const std::string sum = R"(x_seconds_sum{model="a"} )";
  const size_t at = text.find(sum);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + sum.size())), 0.0020005, 1e-12);
}

TEST(StripedMetricsTest, CounterChildrenByLabels) {
  StripedFamily<StripedCounter> family("y_total", "counted", [] { return std::make_unique<StripedCounter>(); });
  StripedCounter& a = family.Add({{"outcome", "success"}});
  EXPECT_EQ(&family.Add({{"outcome", "success"}}), &a);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < 10000; ++i) a.Increment();
    });
  }
  for (auto& t : threads) t.join();
  family.Add({{"outcome", "internal"}}).Increment();
  EXPECT_EQ(a.Value(), 60000u);
  const std::string text = prometheus::TextSerializer().Serialize({family.Collect()});
  EXPECT_NE(text.find("# TYPE y_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(y_total{outcome="success"} 60000)" "\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(y_total{outcome="internal"} 1)" "\n"), std::string::npos) << text;
}

TEST(StripedMetricsTest, ConcurrentObservationsAllLand) {
  StripedHistogram h({100, 1000}, 1.0);
  constexpr int kThreads = 8;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < kEach; ++i) h.Observe((i * 7 + t) % 1500);
    });
  }
  for (auto& t : threads) t.join();
  const prometheus::ClientMetric::Histogram s = h.Snapshot();
  uint64_t le100 = 0, le1000 = 0;
  double sum = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) {
      const int v = (i * 7 + t) % 1500;
      le100 += v <= 100;
      le1000 += v <= 1000;
      sum += v;
    }
  }
  EXPECT_EQ(s.bucket[0].cumulative_count, le100);
  EXPECT_EQ(s.bucket[1].cumulative_count, le1000);
  EXPECT_EQ(s.sample_count, static_cast<uint64_t>(kThreads * kEach));
  EXPECT_DOUBLE_EQ(s.sample_sum, sum);
}

// The in-flight gauge reads its source at every scrape: 0 without one, the source's count with one,
// 0 again once it is reset (the server resets it before its dispatcher goes).
TEST(LiveStateCollectorTest, InflightGaugeReadsItsSourceAtScrape) {
  LiveStateCollector live;
  auto gauge = [&live]() -> double {
    for (const auto& family : live.Collect()) {
      if (family.name == "chronoserve_inflight_requests" && family.metric.size() == 1) return family.metric[0].gauge.value;
    }
    return -1;
  };
  EXPECT_EQ(gauge(), 0);
  int64_t count = 7;
  live.SetInflightSource([&count] { return count; });
  EXPECT_EQ(gauge(), 7);
  count = 3;
  EXPECT_EQ(gauge(), 3);
  live.SetInflightSource(nullptr);
  EXPECT_EQ(gauge(), 0);
}

}  // namespace
}  // namespace chronoserve::server::telemetry
