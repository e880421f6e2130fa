#include "common/otlp/batch_span_processor.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace chronoserve::otlp {

BatchSpanProcessor::BatchSpanProcessor(std::unique_ptr<SpanExporter> exporter,
                                       const BatchSpanProcessorOptions& options)
    : options_(options), exporter_(std::move(exporter)) {}

BatchSpanProcessor::~BatchSpanProcessor() {
  // An owner that forgot Shutdown still must not leave a thread behind; give the flush no time.
  Shutdown(absl::Now());
}

void BatchSpanProcessor::Start() {
  absl::MutexLock lock(&mu_);
  if (running_ || shut_down_) return;
  next_export_ = NextExport();
  thread_ = std::thread([this] {
    SetCurrentThreadName("cs-otlp-export");
    Run();
  });
  mu_.Await(absl::Condition(&running_));
}

bool BatchSpanProcessor::OnEnd(std::vector<SpanData>&& spans) {
  if (spans.empty()) return true;
  absl::MutexLock lock(&mu_);
  if (stop_ || queue_.size() + spans.size() > options_.max_queue_size) {
    stats_.dropped += spans.size();
    return false;
  }
  stats_.accepted += spans.size();
  std::move(spans.begin(), spans.end(), std::back_inserter(queue_));
  return true;
}

bool BatchSpanProcessor::ShouldWake() const {
  // With no schedule delay, any queued span is due (the thread waits for one, never spins).
  const bool due_now = options_.schedule_delay <= absl::ZeroDuration() && !queue_.empty();
  return stop_ || taken_ < flush_target_ || queue_.size() >= options_.max_export_batch_size || due_now;
}

absl::Time BatchSpanProcessor::NextExport() const {
  return options_.schedule_delay <= absl::ZeroDuration() ? absl::InfiniteFuture() : absl::Now() + options_.schedule_delay;
}

std::vector<SpanData> BatchSpanProcessor::TakeBatch() {
  const size_t n = std::min(queue_.size(), options_.max_export_batch_size);
  std::vector<SpanData> batch(std::make_move_iterator(queue_.begin()),
                              std::make_move_iterator(queue_.begin() + static_cast<long>(n)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
  taken_ += n;
  return batch;
}

void BatchSpanProcessor::Run() {
  absl::MutexLock lock(&mu_);
  running_ = true;
  while (!abandon_) {
    mu_.AwaitWithDeadline(absl::Condition(this, &BatchSpanProcessor::ShouldWake), next_export_);
    ExportDue();
    next_export_ = NextExport();
    if (stop_) break;
  }
  thread_done_ = true;
}

void BatchSpanProcessor::ExportDue() {
  while (!queue_.empty() && !abandon_) {
    std::vector<SpanData> batch = TakeBatch();
    const size_t size = batch.size();
    mu_.Unlock();
    ExportBatch(std::move(batch));
    mu_.Lock();
    finished_ += size;
    // A stop, or a flush whose spans are still queued, drains on; read both again after the export
    // (the lock was released): else a Shutdown that came then would leave a partial batch behind. A
    // flush drains only the spans accepted before it, so spans that keep arriving cannot hold it.
    const bool drain = stop_ || taken_ < flush_target_;
    if (!drain && queue_.size() < options_.max_export_batch_size) break;
  }
}

void BatchSpanProcessor::ExportBatch(std::vector<SpanData> batch) {
  const absl::StatusOr<ExportResult> result = exporter_->Export(batch, absl::Now() + options_.export_timeout);
  // Written after the lock is released: OnEnd (the request path) never waits on stderr.
  std::string warning;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.export_calls;
    if (result.ok()) {
      // The exporter clamps to [0, sent]; a SpanExporter of another make is held to that here.
      const uint64_t rejected =
          std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(0, result->rejected_spans)), batch.size());
      stats_.exported += batch.size() - rejected;
      if (rejected > 0) warning = CountRejected(rejected, result->error_message);
      if (failing_ && warning.empty()) {
        warning = absl::StrCat("trace export works again; ", stats_.export_failed, " span(s) lost to failed exports so far");
      }
      failing_ = false;
    } else {
      stats_.export_failed += batch.size();
      // The first failure of a kind (a collector down, then one refusing the data, are two stories),
      // and then one in 100 exports, so a collector that stays down does not flood the log.
      const absl::StatusCode code = result.status().code();
      if (!failing_ || code != last_failure_ || stats_.export_calls % 100 == 0) {
        warning = absl::StrCat("trace export failed (", absl::StatusCodeToString(code), "), ", stats_.export_failed,
                               " span(s) lost so far: ", result.status().message());
      }
      failing_ = true;
      last_failure_ = code;
    }
  }
  if (!warning.empty()) CS_LOG(WARNING) << warning;
}

std::string BatchSpanProcessor::CountRejected(uint64_t rejected, const std::string& reason) {
  stats_.rejected += rejected;
  // The first rejection and then one export in 100 that rejected spans: a collector that refuses
  // every batch (e.g. a size limit) is reported, not logged per batch forever.
  if (rejecting_exports_++ % 100 != 0) return "";
  return absl::StrCat("the trace collector rejected ", rejected, " span(s) of an export (", stats_.rejected,
                      " rejected so far): ", reason.empty() ? "(no reason given)" : reason);
}

bool BatchSpanProcessor::ForceFlush(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!running_ || thread_done_) return queue_.empty();
  // The queue is first in, first out: once as many spans as were accepted by now have been through
  // an export, every one of them has.
  const uint64_t target = stats_.accepted;
  flush_target_ = std::max(flush_target_, target);
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= target || thread_done_; };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  return finished_ >= target;
}

void BatchSpanProcessor::Shutdown(absl::Time deadline) {
  std::optional<size_t> abandoned;  // spans still queued when the flush ran out of time
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
    if (running_ && !mu_.AwaitWithDeadline(absl::Condition(&thread_done_), deadline)) {
      // The export thread stops after the export in progress, which the cancel below ends.
      abandon_ = true;
      abandoned = queue_.size();
    }
  }
  if (abandoned.has_value()) {
    CS_LOG(WARNING) << "trace flush did not finish by its deadline; cancelling the exporter (" << *abandoned
                    << " span(s) still queued are dropped)";
  }
  exporter_->Shutdown();  // cancels an export or backoff still in progress
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  stats_.dropped += queue_.size();
  queue_.clear();
}

SpanProcessorStats BatchSpanProcessor::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace chronoserve::otlp
