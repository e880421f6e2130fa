// BatchSpanProcessor: the bounded hand-off between the request path and the span exporter, with the
// OpenTelemetry SDK's defaults (queue 2048 spans, batches of 512, a 5 s schedule delay, a 30 s
// export timeout). OnEnd never blocks: when the queue is full the spans are dropped and counted.
// One export thread, owned here, drains the queue; Shutdown flushes what is queued, bounded by a
// deadline, then cancels the exporter.
//
//   BatchSpanProcessor p(std::move(exporter), {});
//   p.Start();                         // returns once the export thread runs
//   p.OnEnd(std::move(spans));         // any thread; never blocks
//   p.Shutdown(absl::Now() + absl::Seconds(5));
#ifndef CHRONOSERVE_COMMON_OTLP_BATCH_SPAN_PROCESSOR_H_
#define CHRONOSERVE_COMMON_OTLP_BATCH_SPAN_PROCESSOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/otlp/span_exporter.h"

namespace chronoserve::otlp {

struct BatchSpanProcessorOptions {
  size_t max_queue_size = 2048;  // spans
  size_t max_export_batch_size = 512;
  absl::Duration schedule_delay = absl::Seconds(5);  // zero: each span exported as soon as it is queued
  absl::Duration export_timeout = absl::Seconds(30);  // absl::InfiniteDuration(): no limit (Shutdown still cancels)
};

struct SpanProcessorStats {
  uint64_t accepted = 0;       // spans queued
  uint64_t dropped = 0;        // spans refused because the queue was full
  uint64_t exported = 0;       // spans the receiver accepted
  uint64_t rejected = 0;       // spans the receiver answered for but rejected (OTLP partial success)
  uint64_t export_failed = 0;  // spans lost in exports that failed after retries
  uint64_t export_calls = 0;   // Export() calls made
};

class BatchSpanProcessor {
 public:
  BatchSpanProcessor(std::unique_ptr<SpanExporter> exporter, const BatchSpanProcessorOptions& options);
  ~BatchSpanProcessor();
  BatchSpanProcessor(const BatchSpanProcessor&) = delete;
  BatchSpanProcessor& operator=(const BatchSpanProcessor&) = delete;

  // Starts the export thread; returns once it runs.
  void Start();
  // Queues all of `spans` (one request's spans stay together) or, if they do not fit, drops them
  // all and counts them. Never blocks beyond a short mutex hold. False when dropped.
  bool OnEnd(std::vector<SpanData>&& spans);
  // Exports everything queued before the call (not what arrives meanwhile); true when done by
  // `deadline`.
  bool ForceFlush(absl::Time deadline);
  // Flushes the queue (bounded by `deadline`), cancels the exporter, joins the thread. Idempotent.
  // Spans still queued at the deadline are dropped (counted in stats().dropped).
  void Shutdown(absl::Time deadline);

  SpanProcessorStats stats() const;

 private:
  void Run();
  bool ShouldWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the next scheduled export is due: schedule_delay from now, or never with no delay (each
  // span is then due as it comes, ShouldWake).
  absl::Time NextExport() const;
  // Moves up to one batch out of the queue.
  std::vector<SpanData> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Exports full batches, or drains the queue while a stop is pending or a flush's spans are still
  // queued (also one requested during an export). Releases mu_ around each export.
  void ExportDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExportBatch(std::vector<SpanData> batch);
  // Counts one answered export's rejected spans; now and then returns a warning that gives the
  // collector's reason (to be logged once the lock is released), else "".
  std::string CountRejected(uint64_t rejected, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BatchSpanProcessorOptions options_;
  std::unique_ptr<SpanExporter> exporter_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::deque<SpanData> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool abandon_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown's deadline passed: export no more
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Spans counted in order of acceptance: taken out of the queue for an export, and through one
  // (whatever its outcome); a flush waits for finished_ to pass the spans accepted before it.
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flush_target_ ABSL_GUARDED_BY(mu_) = 0;  // the largest such count a flush waits for
  absl::Time next_export_ ABSL_GUARDED_BY(mu_);
  SpanProcessorStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t rejecting_exports_ ABSL_GUARDED_BY(mu_) = 0;  // answered exports that rejected spans
  // The last export failed (with last_failure_): a failure of another kind, and the first success
  // after failures, are logged.
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusCode last_failure_ ABSL_GUARDED_BY(mu_) = absl::StatusCode::kOk;
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_BATCH_SPAN_PROCESSOR_H_
