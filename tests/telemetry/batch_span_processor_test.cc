// BatchSpanProcessor with fake exporters: batching, flush, bounded queue with counted drops while
// the exporter is stuck, a shutdown that honours its deadline and one that comes during an export.
#include "common/otlp/batch_span_processor.h"

#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/fakes/finishes_within.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::BatchSpanProcessor;
using otlp::BatchSpanProcessorOptions;
using otlp::ExportResult;
using otlp::SpanData;
using otlp::SpanExporter;
using otlp::SpanProcessorStats;

// Records what it receives.
class RecordingExporter final : public SpanExporter {
 public:
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(spans.size());
    total_ += spans.size();
    return ExportResult{};
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
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>&, absl::Time deadline) override {
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

// Holds the first Export until the test calls Release(); later exports pass at once. Counts spans.
class GatedExporter final : public SpanExporter {
 public:
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time deadline) override {
    absl::MutexLock lock(&mu_);
    if (!entered_.HasBeenNotified()) {
      entered_.Notify();
      if (!mu_.AwaitWithDeadline(absl::Condition(&released_), deadline)) {
        return absl::DeadlineExceededError("never released");
      }
    }
    exported_ += spans.size();
    return ExportResult{};
  }
  void Shutdown() override {}
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  size_t exported() {
    absl::MutexLock lock(&mu_);
    return exported_;
  }
  // Whether `n` spans were exported within `timeout`.
  bool AwaitExported(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exported_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  absl::Notification entered_;

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  size_t exported_ ABSL_GUARDED_BY(mu_) = 0;
};

// Answers every export OK but rejects `rejected` of its spans (OTLP partial success); a count
// larger than the batch rejects the whole batch.
class RejectingExporter final : public SpanExporter {
 public:
  explicit RejectingExporter(int64_t rejected) : rejected_(rejected) {}
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>&, absl::Time) override {
    return ExportResult{rejected_, "span too large"};
  }
  void Shutdown() override {}

 private:
  const int64_t rejected_;
};

std::vector<SpanData> Spans(size_t n) {
  std::vector<SpanData> spans(n);
  for (size_t i = 0; i < n; ++i) spans[i].name = "s" + std::to_string(i);
  return spans;
}

// Every Export hands the processor `more` new spans before it returns (spans that keep arriving, as
// under load), until Stop(); counts the spans exported by name.
class FeedingExporter final : public SpanExporter {
 public:
  explicit FeedingExporter(size_t more) : more_(more) {}
  void FeedInto(BatchSpanProcessor* processor) { processor_ = processor; }
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time) override {
    {
      absl::MutexLock lock(&mu_);
      for (const SpanData& s : spans) ++exported_[s.name];
    }
    if (!stopped_.load()) {
      std::vector<SpanData> arriving(more_);
      for (SpanData& s : arriving) s.name = "later";
      processor_->OnEnd(std::move(arriving));
    }
    return ExportResult{};
  }
  void Shutdown() override {}
  void Stop() { stopped_.store(true); }
  size_t exported(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return exported_[name];
  }

 private:
  const size_t more_;
  BatchSpanProcessor* processor_ = nullptr;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  std::map<std::string, size_t> exported_ ABSL_GUARDED_BY(mu_);
};

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

// OTEL_BSP_SCHEDULE_DELAY=0: each span is exported as soon as it is queued, and the export thread
// waits for the next one rather than spinning (it once would have: a deadline of "now" every turn).
TEST(BatchSpanProcessorTest, NoScheduleDelayExportsEachSpanAsItComesWithoutSpinning) {
  auto exporter = std::make_unique<GatedExporter>();
  GatedExporter* gated = exporter.get();
  gated->Release();
  BatchSpanProcessorOptions options;
  options.schedule_delay = absl::ZeroDuration();
  BatchSpanProcessor p(std::move(exporter), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(1)));
  ASSERT_TRUE(gated->entered_.WaitForNotificationWithTimeout(absl::Seconds(10))) << "the span was not exported";
  // Idle now: over a fixed 300 ms the process uses next to no CPU (a spinning thread would use it all).
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  absl::SleepFor(absl::Milliseconds(300));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  const double cpu_ms = (after.tv_sec - before.tv_sec) * 1e3 + (after.tv_nsec - before.tv_nsec) / 1e6;
  EXPECT_LT(cpu_ms, 100.0) << "the export thread spins while the queue is empty";
  ASSERT_TRUE(p.OnEnd(Spans(2)));
  EXPECT_TRUE(gated->AwaitExported(3, absl::Seconds(10))) << "the next spans, exported without a flush";
  p.Shutdown(absl::Now() + absl::Seconds(10));
}

// A flush waits for the spans queued before it, not for the queue to empty: with spans arriving
// during every export (8 for each batch of 4 taken) the queue never empties, and the flush used to
// run to its deadline.
TEST(BatchSpanProcessorTest, AFlushEndsOnceTheSpansBeforeItAreExportedWhileMoreKeepArriving) {
  auto exporter = std::make_unique<FeedingExporter>(8);
  FeedingExporter* feeding = exporter.get();
  BatchSpanProcessorOptions options;
  options.max_export_batch_size = 4;
  options.max_queue_size = 64;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor p(std::move(exporter), options);
  feeding->FeedInto(&p);
  std::vector<SpanData> before(10);
  for (SpanData& s : before) s.name = "before";
  ASSERT_TRUE(p.OnEnd(std::move(before)));
  p.Start();
  const absl::Time start = absl::Now();
  EXPECT_TRUE(p.ForceFlush(start + absl::Seconds(20)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(feeding->exported("before"), 10u);
  EXPECT_LT(took, absl::Seconds(10)) << "the flush waited for spans that came after it";
  feeding->Stop();
  p.Shutdown(absl::Now() + absl::Seconds(10));
  const SpanProcessorStats stats = p.stats();
  EXPECT_EQ(stats.accepted, stats.exported) << "what was queued was exported at shutdown";
  EXPECT_GT(stats.accepted, 10u);
}

TEST(BatchSpanProcessorTest, SpansTheCollectorRejectsAreCountedAsRejectedNotExported) {
  BatchSpanProcessorOptions options;
  options.max_export_batch_size = 5;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor p(std::make_unique<RejectingExporter>(2), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(5)));
  ASSERT_TRUE(p.OnEnd(Spans(3)));  // two exports: 5 spans, then 3
  ASSERT_TRUE(p.ForceFlush(absl::Now() + absl::Seconds(10)));
  p.Shutdown(absl::Now() + absl::Seconds(10));
  const SpanProcessorStats s = p.stats();
  EXPECT_EQ(s.export_calls, 2u);
  EXPECT_EQ(s.rejected, 4u);
  EXPECT_EQ(s.exported, 8u - 4u);
  EXPECT_EQ(s.export_failed, 0u);
  EXPECT_EQ(s.accepted, s.exported + s.rejected);
}

TEST(BatchSpanProcessorTest, ARejectedCountAboveTheBatchRejectsTheBatchOnly) {
  BatchSpanProcessorOptions options;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor p(std::make_unique<RejectingExporter>(1000), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(3)));
  p.Shutdown(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(p.stats().rejected, 3u);
  EXPECT_EQ(p.stats().exported, 0u);
}

// Answers each Export with the next of its scripted results (OK once they run out).
class ScriptedExporter final : public SpanExporter {
 public:
  explicit ScriptedExporter(std::vector<absl::Status> results) : results_(std::move(results)) {}
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>&, absl::Time) override {
    absl::MutexLock lock(&mu_);
    if (next_ >= results_.size() || results_[next_].ok()) {
      ++next_;
      return ExportResult{};
    }
    return results_[next_++];
  }
  void Shutdown() override {}

 private:
  absl::Mutex mu_;
  const std::vector<absl::Status> results_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

// A failing collector is logged at its first failure, again when the failure changes kind (a
// collector down, then one refusing the data: only the first used to be logged), and once when
// exports work again; not at every failure of the same kind.
TEST(BatchSpanProcessorTest, ExportFailuresAreLoggedByKindAndTheRecoveryToo) {
  BatchSpanProcessorOptions options;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor p(std::make_unique<ScriptedExporter>(std::vector<absl::Status>{
                           absl::UnavailableError("connection refused"), absl::UnavailableError("connection refused"),
                           absl::InvalidArgumentError("bad span"), absl::OkStatus()}),
                       options);
  p.Start();
  ::testing::internal::CaptureStderr();
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE(p.OnEnd(Spans(2)));
    ASSERT_TRUE(p.ForceFlush(absl::Now() + absl::Seconds(10))) << "export " << k;
  }
  p.Shutdown(absl::Now() + absl::Seconds(10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(p.stats().export_failed, 6u);
  EXPECT_EQ(p.stats().exported, 2u);
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("trace export failed (UNAVAILABLE), 2 span(s) lost so far: connection refused"), 1u) << log;
  EXPECT_EQ(count("trace export failed (UNAVAILABLE)"), 1u) << "the same kind again is not logged: " << log;
  EXPECT_EQ(count("trace export failed (INVALID_ARGUMENT), 6 span(s) lost so far: bad span"), 1u) << log;
  EXPECT_EQ(count("trace export works again; 6 span(s) lost to failed exports so far"), 1u) << log;
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
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // never waited on the exporter (which hangs)
  EXPECT_EQ(accepted, 18u);  // 6 requests of 3 spans fit in 20; a request's spans stay together
  EXPECT_EQ(dropped, 300u - 18u);
  EXPECT_EQ(p.stats().dropped, dropped);
  // Shutdown with a short deadline returns although the exporter is stuck.
  p.Shutdown(absl::Now() + absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const SpanProcessorStats s = p.stats();
  EXPECT_EQ(s.exported, 0u);
  EXPECT_EQ(s.accepted, 5u + 18u);
  // The export that hung fails when shutdown cancels it; past the deadline nothing more is sent,
  // so what was still queued is dropped.
  EXPECT_EQ(s.export_failed, 5u);
  EXPECT_EQ(s.dropped - dropped, 18u);
}

TEST(BatchSpanProcessorTest, ShutdownDuringAnExportStillExportsWhatWasQueuedMeanwhile) {
  auto exporter = std::make_unique<GatedExporter>();
  GatedExporter* gate = exporter.get();
  constexpr size_t kBatch = 4;
  BatchSpanProcessorOptions options;
  options.max_queue_size = 1 << 20;  // below, only a stop can refuse spans
  options.max_export_batch_size = kBatch;
  options.schedule_delay = absl::Hours(1);  // only a full batch, a flush or a stop exports
  BatchSpanProcessor p(std::move(exporter), options);
  p.Start();
  ASSERT_TRUE(p.OnEnd(Spans(kBatch)));  // a full batch goes at once and is held in Export
  ASSERT_TRUE(gate->entered_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(p.OnEnd(Spans(kBatch - 1)));  // less than a batch: only a drain sends it

  absl::Notification shut_down;
  std::thread stopper([&] {
    p.Shutdown(absl::Now() + absl::Seconds(30));
    shut_down.Notify();
  });
  // Shutdown has taken effect once OnEnd refuses spans (the queue has room). Whole batches offered
  // until then keep the queue at kBatch - 1 spans past a batch boundary.
  size_t offered_before_stop = 0;
  bool stop_seen = false;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10); absl::Now() < give_up;) {
    if (!p.OnEnd(Spans(kBatch))) {
      stop_seen = true;
      break;
    }
    offered_before_stop += kBatch;
    std::this_thread::yield();
  }
  gate->Release();
  testing::FinishesWithin("Shutdown with a held export", absl::Seconds(20), [&] { stopper.join(); });
  ASSERT_TRUE(stop_seen) << "Shutdown never stopped accepting spans";
  EXPECT_TRUE(shut_down.HasBeenNotified());
  const size_t accepted = kBatch + (kBatch - 1) + offered_before_stop;
  const SpanProcessorStats s = p.stats();
  EXPECT_EQ(s.accepted, accepted);
  EXPECT_EQ(s.exported, accepted) << "spans queued during the held export were left behind";
  EXPECT_EQ(gate->exported(), accepted);
  EXPECT_EQ(s.export_failed, 0u);
  EXPECT_EQ(s.dropped, kBatch) << "only the batch refused after the stop";
}

}  // namespace
}  // namespace chronoserve::server::telemetry
