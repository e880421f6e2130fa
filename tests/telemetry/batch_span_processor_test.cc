// BatchSpanProcessor with fake exporters: batching, flush, bounded queue with counted drops while
// the exporter is stuck, and a shutdown that honours its deadline.
#include "common/otlp/batch_span_processor.h"

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::BatchSpanProcessor;
using otlp::BatchSpanProcessorOptions;
using otlp::SpanData;
using otlp::SpanExporter;
using otlp::SpanProcessorStats;

// Records what it receives.
class RecordingExporter final : public SpanExporter {
 public:
  absl::Status Export(const std::vector<SpanData>& spans, absl::Time) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(spans.size());
    total_ += spans.size();
    return absl::OkStatus();
  }
  void Shutdown() override {}
  std::vector<size_t> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  absl::Mutex mu_;
  std::vector<size_t> batches_;
  size_t total_ = 0;
};

// Blocks every Export until released or shut down (a collector that hangs).
class StuckExporter final : public SpanExporter {
 public:
  absl::Status Export(const std::vector<SpanData>&, absl::Time deadline) override {
    absl::MutexLock lock(&mu_);
    if (!entered_.HasBeenNotified()) entered_.Notify();
    mu_.AwaitWithDeadline(absl::Condition(&released_), deadline);
    return released_ ? absl::UnavailableError("collector down") : absl::DeadlineExceededError("stuck");
  }
  void Shutdown() override {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  absl::Notification entered_;

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

std::vector<SpanData> Spans(size_t n) {
  std::vector<SpanData> spans(n);
  for (size_t i = 0; i < n; ++i) spans[i].name = "s" + std::to_string(i);
  return spans;
}

TEST(BatchSpanProcessorTest, ExportsFullBatchesWithoutWaitingForTheDelay) {
  auto exporter = std::make_unique<RecordingExporter>();
  RecordingExporter* rec = exporter.get();
  BatchSpanProcessorOptions options;
  options.max_export_batch_size = 4;
  options.schedule_delay = absl::Hours(1);  // only a full batch can trigger the export
  BatchSpanProcessor p(std::move(exporter), options);
  p.Start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(p.OnEnd(Spans(3)));  // 9 spans: two full batches
  ASSERT_TRUE(p.ForceFlush(absl::Now() + absl::Seconds(10)));
  const std::vector<size_t> batches = rec->batches();
  size_t total = 0;
  for (size_t b : batches) {
    EXPECT_LE(b, 4u);
    total += b;
  }
  EXPECT_EQ(total, 9u);
  EXPECT_EQ(p.stats().exported, 9u);
  p.Shutdown(absl::Now() + absl::Seconds(10));
}

TEST(BatchSpanProcessorTest, ShutdownFlushesWhatIsQueued) {
  auto exporter = std::make_unique<RecordingExporter>();
  BatchSpanProcessorOptions options;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor p(std::move(exporter), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(7)));
  p.Shutdown(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(p.stats().exported, 7u);
  EXPECT_FALSE(p.OnEnd(Spans(1)));  // after shutdown: dropped, counted
  EXPECT_EQ(p.stats().dropped, 1u);
}

TEST(BatchSpanProcessorTest, FullQueueDropsAndCountsWithoutBlocking) {
  auto exporter = std::make_unique<StuckExporter>();
  StuckExporter* stuck = exporter.get();
  BatchSpanProcessorOptions options;
  options.max_queue_size = 20;
  options.max_export_batch_size = 5;
  BatchSpanProcessor p(std::move(exporter), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(5)));  // taken by the export thread, which then hangs
  ASSERT_TRUE(stuck->entered_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const absl::Time start = absl::Now();
  size_t accepted = 0, dropped = 0;
  for (int i = 0; i < 100; ++i) (p.OnEnd(Spans(3)) ? accepted : dropped) += 3;
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // never waited on the exporter
  EXPECT_EQ(accepted, 18u);  // 6 requests of 3 spans fit in 20; a request's spans stay together
  EXPECT_EQ(dropped, 300u - 18u);
  EXPECT_EQ(p.stats().dropped, dropped);
  // Shutdown with a short deadline returns although the exporter is stuck.
  p.Shutdown(absl::Now() + absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const SpanProcessorStats s = p.stats();
  EXPECT_EQ(s.exported, 0u);
  EXPECT_EQ(s.accepted, 5u + 18u);
  // Every accepted span is accounted for: lost in a failed export or dropped at shutdown.
  EXPECT_EQ(s.export_failed + (s.dropped - dropped), 23u);
}

}  // namespace
}  // namespace chronoserve::server::telemetry
