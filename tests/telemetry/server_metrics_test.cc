// ServerMetrics: outcomes, per-request vs per-batch observation, requests refused before queueing.
#include "server/telemetry/server_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

namespace chronoserve::server::telemetry {
namespace {

class ServerMetricsTest : public ::testing::Test {
 protected:
  std::string Text() { return prometheus::TextSerializer().Serialize(registry_.Collect()); }
  static bool Has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }
  void Finish(int64_t dequeued_ns, int64_t worker, const absl::Status& status = absl::OkStatus(),
              bool request_timing = true) {
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
    r.timeline.SetBatch(b);
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
  Finish(100, 0);  // batch A: three requests
  Finish(100, 0);
  Finish(100, 0, absl::InternalError("scatter failed"));
  Finish(100, 1);  // same stamp, other worker: batch B
  Finish(500, 0);  // batch C
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

TEST_F(ServerMetricsTest, WithoutRequestTimingOnlyHostFiguresAndCounts) {
  Finish(100, 0, absl::OkStatus(), /*request_timing=*/false);
  Finish(200, 0, absl::OkStatus(), /*request_timing=*/false);
  const std::string text = Text();
  EXPECT_TRUE(Has(text, R"(chronoserve_requests_total{model="m",outcome="success",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_request_duration_seconds_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_queue_duration_seconds_count{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_batches_total{model="m",version="2"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_compute_duration_seconds_count{model="m",version="2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(chronoserve_h2d_duration_seconds_count{model="m",version="2"} 0)")) << text;
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
}

}  // namespace
}  // namespace chronoserve::server::telemetry
