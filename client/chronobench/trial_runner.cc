#include "client/chronobench/trial_runner.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/chronobench/load_worker.h"
#include "client/chronobench/stall_watch.h"
#include "common/status_macros.h"

namespace chronoserve::client::bench {
namespace {

constexpr int kStableWindows = 3;
constexpr int64_t kTickNs = 200'000'000;  // progress / wait granularity
// A wait for completions fails once none came, while requests were in flight, for this many
// measurement intervals (at least kMinStallNs) plus the request timeout.
constexpr int64_t kStallIntervals = 20;
constexpr int64_t kMinStallNs = 2'000'000'000;

// SplitMix64's step: distinct inputs give unrelated outputs.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

int64_t TotalCompleted(const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  int64_t n = 0;
  for (const auto& w : workers) n += w->completed();
  return n;
}

// Requests finished and recorded in a window: completed less those discarded as sent in the warm-up.
int64_t TotalMeasured(const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  int64_t n = 0;
  for (const auto& w : workers) {
    const int64_t completed = w->completed();  // first: a discard after it can only lower the count
    n += completed - w->discarded();
  }
  return n;
}

// Requests sent and not yet finished, over all workers.
int64_t TotalInFlight(const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  int64_t n = 0;
  for (const auto& w : workers) {
    const int64_t completed = w->completed();  // first: a send after it can only add to the count
    n += w->sent() - completed;
  }
  return n;
}

absl::StatusOr<LatencyRecorder> TakeAll(const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  LatencyRecorder merged;
  for (const auto& w : workers) RETURN_IF_ERROR(merged.Merge(w->TakeRecorder()));
  return merged;
}

// Waits until the clock passes `until_ns`, reporting progress each tick.
void WaitUntil(const RunnerContext& ctx, int64_t until_ns, const std::function<std::string()>& status) {
  for (int64_t now = ctx.clock->NowNs(); now < until_ns; now = ctx.clock->NowNs()) {
    absl::SleepFor(absl::Nanoseconds(std::min(kTickNs, until_ns - now)));
    if (ctx.progress) ctx.progress(status());
  }
}

// How long a wait for completions may go without one, while requests are in flight, before the
// point fails. Without a bound a model that never answers hangs chronobench when no request can
// fail by itself (--streaming, or --timeout-ms 0). Only a stall counts: a slow model that keeps
// answering is waited for, and so is a gap with nothing in flight (an idle gap, or an open loop's
// gap between sends, which a Poisson draw makes arbitrarily long: e^-3, 5 % of the gaps at 1/s,
// passed the 2 s minimum plus one mean period this wait once allowed).
int64_t StallLimitNs(const RunnerContext& ctx) {
  double limit_ns = std::max(static_cast<double>(kStallIntervals) * static_cast<double>(ctx.measurement.interval_ms) * 1e6,
                             static_cast<double>(kMinStallNs));
  limit_ns += static_cast<double>(ctx.timeout_ms) * 1e6;
  return static_cast<int64_t>(std::min(limit_ns, 1e18));
}

using Count = int64_t (*)(const std::vector<std::unique_ptr<LoadWorker>>& workers);

// Waits until `count` (TotalCompleted, TotalMeasured) is `target` past `base`, reporting progress each
// tick; DEADLINE_EXCEEDED naming `what` once none completed for StallLimitNs while requests were in
// flight.
absl::Status AwaitCompletions(const PointSpec& spec, const RunnerContext& ctx,
                              const std::vector<std::unique_ptr<LoadWorker>>& workers, Count count, int64_t base,
                              int64_t target, const std::string& what, const std::function<std::string()>& status) {
  const int64_t limit_ns = StallLimitNs(ctx);
  StallWatch watch(limit_ns, ctx.clock->NowNs(), TotalCompleted(workers));
  while (count(workers) - base < target) {
    absl::SleepFor(absl::Nanoseconds(kTickNs));
    if (ctx.progress) ctx.progress(status());
    const int64_t now = ctx.clock->NowNs();
    const int64_t in_flight = TotalInFlight(workers);
    if (watch.Stalled(now, TotalCompleted(workers), in_flight)) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: no response for %.1f s with %d requests in flight while waiting for %s (%d of %d completed): the "
          "server or model is stuck (the wait gives up after the larger of %d x --measurement-interval and %.0f s, "
          "plus --timeout-ms, without a response while requests are in flight)",
          spec.Label(), static_cast<double>(watch.StalledNs(now)) / 1e9, in_flight, what,
          count(workers) - base, target, kStallIntervals, static_cast<double>(kMinStallNs) / 1e9));
    }
  }
  return absl::OkStatus();
}

bool Within(double a, double b, double c, double percentage) {
  const double mean = (a + b + c) / 3;
  if (mean <= 0) return false;
  const double limit = mean * percentage / 100.0;
  return std::abs(a - mean) <= limit && std::abs(b - mean) <= limit && std::abs(c - mean) <= limit;
}

void AddWarnings(const PointSpec& spec, const std::vector<WindowSummary>& windows, int max_trials, int threads,
                 PointResult* result) {
  const LatencyRecorder& r = result->recorder;
  if (!result->stable && max_trials < kStableWindows) {
    result->warnings.push_back(absl::StrCat("not judged stable: --max-trials ", max_trials, " is below ", kStableWindows,
                                            " and stability compares the last ", kStableWindows,
                                            " windows; figures are from ", max_trials, " window(s), treat with care"));
  } else if (!result->stable) {
    result->warnings.push_back(absl::StrCat("did not stabilise within ", max_trials,
                                            " trials: figures are from the last windows, treat with care"));
  }
  if (r.errors() > 0) {
    std::string codes;
    for (const auto& [code, n] : r.errors_by_code()) absl::StrAppend(&codes, codes.empty() ? "" : ", ", GrpcCodeName(code), " ", n);
    // Failures answered at once pull e2e down; a majority of them makes it their figure, not the model's.
    result->warnings.push_back(absl::StrCat(
        r.errors(), " requests failed (", codes, "); their latency is in e2e",
        r.errors() > r.successes() ? absl::StrCat(": they are most of the point (", r.successes(),
                                                  " answered OK), so e2e is mostly the failures' latency, "
                                                  "not the model's; the server columns are the OK answers'")
                                   : ""));
  }
  if (r.without_timing() > 0) {
    result->warnings.push_back(absl::StrCat(
        r.without_timing(), " of ", r.successes(),
        " responses carried no server timing chronobench could read (a server started with --request-timing off, "
        "or not chronoserve; or timing.* parameters of another type than int64): the server columns cover only "
        "responses that had it"));
  }
  if (r.timing_violations() > 0) {
    result->warnings.push_back(absl::StrCat(r.timing_violations(), " responses had inconsistent server timing "
                                            "(negative span, stages > server_total, or server_total > e2e)"));
  }
  if (spec.mode == LoadMode::kRate && spec.rate > 0) {
    const int64_t lag_p99 = r.schedule_lag().ValueAtPercentile(99);
    const double period_ns = 1e9 / spec.rate;
    if (lag_p99 > std::max(1e6, 0.1 * period_ns)) {
      result->warnings.push_back(absl::StrFormat(
          "client fell behind its schedule: p99 send lag %.3f ms (e2e counts from the intended time)", lag_p99 / 1e6));
    }
  }
  if (std::optional<std::string> launch_bound = LaunchBoundWarning(r)) result->warnings.push_back(*std::move(launch_bound));
  if (std::optional<std::string> clamped = ClampedValuesWarning(r)) result->warnings.push_back(*std::move(clamped));
  if (std::optional<std::string> busy = BusyClientWarning(*result, threads)) result->warnings.push_back(*std::move(busy));
}

}  // namespace

uint64_t PointSeed(uint64_t run_seed, int point) {
  return SplitMix64(SplitMix64(run_seed) ^ static_cast<uint64_t>(point));
}

std::vector<WorkerPlan> PlanWorkers(const PointSpec& spec, const RunnerContext& ctx) {
  WorkerPlan base;
  base.mode = spec.mode;
  base.distribution = ctx.distribution;
  base.timeout_ms = ctx.timeout_ms;
  base.streaming = ctx.streaming;
  base.connection_affinity = ctx.connection_affinity;
  base.traceparent_rate = ctx.traceparent_rate;
  // Workers are built afresh for every point: with the run's seed as it is, each point would repeat
  // the previous one's draws (the same trace and span ids, request for request).
  base.seed = PointSeed(ctx.seed, spec.index);
  base.max_send_poll_ns = ctx.max_send_poll_ns;
  int workers = 1;
  if (spec.mode == LoadMode::kConcurrency) {
    workers = static_cast<int>(std::min<int64_t>(spec.concurrency, ctx.threads));
  } else if (spec.mode == LoadMode::kRate) {
    workers = ctx.threads;
  }
  base.workers = workers;
  base.total_rate_per_s = spec.rate;
  base.idle_gap_ns = static_cast<int64_t>(std::llround(spec.idle_gap_ms * 1e6));
  std::vector<WorkerPlan> plans(workers, base);
  for (int w = 0; w < workers; ++w) {
    plans[w].in_flight = static_cast<int>(spec.concurrency / workers + (w < spec.concurrency % workers ? 1 : 0));
  }
  return plans;
}

std::optional<std::string> BusyClientWarning(const PointResult& point, int threads) {
  // Over the windows the figures come from (the last reported_windows).
  const std::vector<WindowSummary>& windows = point.windows;
  const size_t reported = std::min<size_t>(windows.size(), static_cast<size_t>(std::max(point.reported_windows, 0)));
  double busiest = 0;
  for (size_t i = windows.size() - reported; i < windows.size(); ++i) {
    busiest = std::max(busiest, windows[i].client_cpu_busiest);
  }
  if (busiest <= 0.9) return std::nullopt;
  // Failed calls return at once, so a client sending into errors is always busy: not the client's fault.
  const LatencyRecorder& r = point.recorder;
  if (r.errors() > r.successes()) return std::nullopt;
  // More threads give more workers only in open loop and in a closed loop with more requests in
  // flight than threads (PlanWorkers); else each worker's own work a request is the limit.
  const PointSpec& spec = point.spec;
  const bool threads_help =
      spec.mode == LoadMode::kRate || (spec.mode == LoadMode::kConcurrency && spec.concurrency > threads);
  return absl::StrFormat("a client worker thread was %.0f%% busy: the client may be the bottleneck (%s)",
                         busiest * 100,
                         threads_help ? "raise --threads"
                                      : "more --threads would add no worker here: give the client faster or less busy CPUs");
}

std::optional<std::string> UnansweredWarning(const PointResult& point) {
  const Histogram& e2e = point.recorder.metric(Metric::kE2e);
  const int64_t unanswered = point.unanswered_at_end + point.unsent_at_end;
  const bool none_measured = e2e.count() == 0;
  if (unanswered == 0 || (!none_measured && point.oldest_unanswered_ns <= e2e.max())) return std::nullopt;
  const std::string which =
      point.unsent_at_end == 0
          ? "cancelled, in no window"
          : absl::StrFormat("%d in flight, cancelled; %d due by the schedule but never sent, the client behind it; "
                            "in no window",
                            point.unanswered_at_end, point.unsent_at_end);
  const std::string against =
      none_measured ? "and the point reports no e2e at all: its latency is unknown, not low"
                    : absl::StrFormat("longer than the reported e2e max %.3f ms: the reported tail is understated",
                                      e2e.max() / 1e6);
  return absl::StrFormat("%d requests were still unanswered when the point ended (%s); the oldest had waited %.3f ms, %s",
                         unanswered, which, point.oldest_unanswered_ns / 1e6, against);
}

bool BehindSchedule(const PointResult& point) {
  return point.unsent_at_end > 0 && point.oldest_unsent_ns > kUnsentSlackNs;
}

std::optional<absl::Status> NothingMeasured(const PointResult& point) {
  const LatencyRecorder& r = point.recorder;
  if (r.successes() + r.errors() > 0) return std::nullopt;
  std::string why;
  switch (point.spec.mode) {
    case LoadMode::kRate:
      why = "no request whose send time came in them was answered: the client may be too far behind its schedule "
            "(see unsent_at_end; lower the rate or give chronobench more CPU), or the server too slow";
      break;
    case LoadMode::kIdleGap:
      why = "a window may be shorter than the gap and a response (raise --measurement-interval or "
            "--measurement-request-count)";
      break;
    case LoadMode::kConcurrency:
      why = "no request sent in them was answered (a server slower than the windows: raise "
            "--measurement-interval or --measurement-request-count)";
      break;
  }
  std::string message = absl::StrCat(point.spec.Label(), ": no request was measured in the reported windows: ", why);
  if (std::optional<std::string> unanswered = UnansweredWarning(point)) absl::StrAppend(&message, "; ", *unanswered);
  absl::StrAppend(&message, "; the point has no figures, and the sweep stops here");
  // Requests answered after the warm-up but outside the windows (closed loop always leaves its
  // concurrency in flight at the end), the client on its schedule: the windows were too short.
  // Nothing answered after the warm-up while requests waited, or the schedule outran the client: a
  // server (or client) that did not keep up. The warm-up's answers say nothing of the server after it.
  const bool answered_elsewhere = point.finished_after_warmup > 0;
  const bool late = BehindSchedule(point) || (!answered_elsewhere && point.unanswered_at_end > 0);
  return late ? absl::DeadlineExceededError(message) : absl::FailedPreconditionError(message);
}

std::optional<absl::Status> EveryRequestFailed(const PointResult& point) {
  const LatencyRecorder& r = point.recorder;
  if (r.successes() > 0 || r.errors() == 0) return std::nullopt;
  int code = 0;
  int64_t most = 0;
  std::string codes;
  for (const auto& [c, n] : r.errors_by_code()) {
    absl::StrAppend(&codes, codes.empty() ? "" : ", ", GrpcCodeName(c), " ", n);
    if (n > most) {
      code = c;
      most = n;
    }
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat(point.spec.Label(), ": every one of the ", r.errors(),
                                   " requests measured failed (", codes,
                                   "): the server went away or refuses this load; the sweep stops here"));
}

std::optional<std::string> LateAlarmWarning(const PointResult& point) {
  const int64_t past = point.send_waits_past_deadline;
  if (past < 10 || past * 2 <= point.send_waits_woken) return std::nullopt;
  return absl::StrFormat(
      "the client's send-time alarms came late: %d of %d waits before a send ran to gRPC's deadline, rounded up to "
      "the millisecond, so sends were up to 1 ms late (schedule_lag): the client's threads were short of CPU "
      "(give chronobench more CPU, fewer --threads, or a machine of its own)",
      past, past + point.send_waits_woken);
}

std::string PointSpec::Label() const {
  std::string s;
  switch (mode) {
    case LoadMode::kConcurrency: s = absl::StrCat("concurrency ", concurrency); break;
    case LoadMode::kRate: s = absl::StrCat("rate ", ExactNumber(rate), "/s"); break;
    case LoadMode::kIdleGap: s = absl::StrCat("idle gap ", ExactNumber(idle_gap_ms), " ms"); break;
  }
  return absl::StrCat(s, ", batch ", batch_size);
}

bool WindowsAreStable(const std::vector<WindowSummary>& windows, double percentage) {
  if (windows.size() < kStableWindows) return false;
  const auto& a = windows[windows.size() - 3];
  const auto& b = windows[windows.size() - 2];
  const auto& c = windows[windows.size() - 1];
  if (a.successes == 0 || b.successes == 0 || c.successes == 0) return false;
  return Within(a.throughput_rps, b.throughput_rps, c.throughput_rps, percentage) &&
         Within(a.p50_ns, b.p50_ns, c.p50_ns, percentage);
}

namespace {

// One closed window: what the workers recorded and its summary.
struct Window {
  LatencyRecorder recorder;
  WindowSummary summary;
};

absl::StatusOr<Window> MeasureWindow(const PointSpec& spec, int trial, const RunnerContext& ctx,
                                     const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  const MeasurementOptions& m = ctx.measurement;
  const int64_t window_start = ctx.clock->NowNs();
  std::vector<int64_t> cpu_before;
  // Busy = CPU time less the polling before send times (waiting, though on the CPU).
  for (const auto& w : workers) cpu_before.push_back(w->BusyCpuNs());
  const int64_t measured_start = TotalMeasured(workers);
  auto status = [&] {
    return absl::StrFormat("%s: trial %d/%d, %d requests", spec.Label(), trial, m.max_trials,
                           TotalMeasured(workers) - measured_start);
  };
  WaitUntil(ctx, window_start + m.interval_ms * 1'000'000, status);
  RETURN_IF_ERROR(AwaitCompletions(spec, ctx, workers, &TotalMeasured, measured_start, m.window_min_requests,
                                   "--measurement-request-count", status));
  Window window;
  ASSIGN_OR_RETURN(window.recorder, TakeAll(workers));
  WindowSummary& summary = window.summary;
  summary.duration_s = static_cast<double>(ctx.clock->NowNs() - window_start) / 1e9;
  summary.successes = window.recorder.successes();
  summary.errors = window.recorder.errors();
  // Every OK answer in the window, those to requests sent in the warm-up too (they are in no latency
  // figure): else the first window would miss about one latency's worth of answers.
  summary.throughput_rps = static_cast<double>(window.recorder.answered_ok()) / summary.duration_s;
  summary.p50_ns = window.recorder.metric(Metric::kE2e).ValueAtPercentile(50);
  for (size_t w = 0; w < workers.size(); ++w) {
    const int64_t busy_ns = workers[w]->BusyCpuNs() - cpu_before[w];
    const double busy = static_cast<double>(busy_ns) / 1e9 / summary.duration_s;
    summary.client_cpu_busiest = std::max(summary.client_cpu_busiest, busy);
  }
  return window;
}

// The warm-up, then windows until stable or out of trials, merged; the workers keep running.
absl::StatusOr<PointResult> Measure(const PointSpec& spec, const RunnerContext& ctx,
                                    const std::vector<std::unique_ptr<LoadWorker>>& workers) {
  const MeasurementOptions& m = ctx.measurement;
  RETURN_IF_ERROR(AwaitCompletions(
      spec, ctx, workers, &TotalCompleted, 0, m.warmup_requests, "the warm-up requests (--warmup-requests)",
      [&] { return absl::StrCat(spec.Label(), ": warm-up ", TotalCompleted(workers), "/", m.warmup_requests); }));
  // The warm-up is over: what it recorded is dropped, and requests sent before now, answered later
  // (closed loop's whole first wave), are in no window either.
  for (const auto& w : workers) w->StartMeasuring();

  PointResult result;
  result.spec = spec;
  std::deque<Window> recent;  // the last kStableWindows windows
  for (int trial = 1; trial <= m.max_trials; ++trial) {
    ASSIGN_OR_RETURN(Window window, MeasureWindow(spec, trial, ctx, workers));
    result.windows.push_back(window.summary);
    recent.push_back(std::move(window));
    if (recent.size() > kStableWindows) recent.pop_front();
    if (WindowsAreStable(result.windows, m.stability_percentage)) {
      result.stable = true;
      break;
    }
  }
  for (const Window& w : recent) {
    RETURN_IF_ERROR(result.recorder.Merge(w.recorder));
    result.duration_s += w.summary.duration_s;
  }
  result.reported_windows = static_cast<int>(recent.size());
  result.traced = result.recorder.traced();  // over the same windows as the requests
  result.throughput_rps = static_cast<double>(result.recorder.answered_ok()) / result.duration_s;
  result.items_per_s = result.throughput_rps * static_cast<double>(spec.batch_size);
  AddWarnings(spec, result.windows, m.max_trials, ctx.threads, &result);
  return result;
}

}  // namespace

absl::StatusOr<PointResult> RunPoint(const PointSpec& spec, const inference::ModelInferRequest& request,
                                     const RunnerContext& ctx) {
  WorkerShared shared{ctx.stubs, &request, ctx.clock, ctx.tracer, spec.batch_size, ctx.shm_layout};
  std::vector<std::unique_ptr<LoadWorker>> workers;
  const std::vector<WorkerPlan> plans = PlanWorkers(spec, ctx);
  for (size_t w = 0; w < plans.size(); ++w) workers.push_back(std::make_unique<LoadWorker>(w, plans[w], shared));
  for (auto& w : workers) {  // shared-memory slots, before any load
    if (absl::Status prepared = w->Prepare(); !prepared.ok()) {
      // The slots the others made unregistered by one deadline, as below.
      const absl::Time deadline = absl::Now() + ShmSlotPool::kUnregisterTimeout;
      for (auto& v : workers) v->Stop(deadline);
      return prepared;
    }
  }
  const int64_t start_ns = ctx.clock->NowNs() + 1'000'000;
  for (auto& w : workers) w->Start(start_ns);
  absl::StatusOr<PointResult> measured = Measure(spec, ctx, workers);
  // On failure too: what is stuck in flight is cancelled. One deadline for every worker's
  // shared-memory regions, so that a frozen server holds the point up 10 s, not 10 s a worker.
  const absl::Time unregister_deadline = absl::Now() + ShmSlotPool::kUnregisterTimeout;
  // One moment for every worker, before any stops: a worker's teardown (its calls cancelled, its
  // regions unregistered) must not count as the others' unsent time.
  const int64_t stop_ns = ctx.clock->NowNs();
  for (auto& w : workers) w->RequestStop(stop_ns);
  for (auto& w : workers) w->Stop(unregister_deadline);
  PointResult result;
  if (measured.ok()) {
    result = *std::move(measured);
  } else {  // what the workers left is still worth reporting (a frozen server: all it did not answer)
    result.spec = spec;
    result.failure = measured.status();
  }
  for (const auto& w : workers) {
    result.unanswered_at_end += w->drained();
    result.unsent_at_end += w->unsent();
    result.sent_total += w->sent();
    result.oldest_unanswered_ns = std::max(result.oldest_unanswered_ns, w->oldest_unanswered_ns());
    result.oldest_unsent_ns = std::max(result.oldest_unsent_ns, w->oldest_unsent_ns());
    result.finished_after_warmup += w->completed_while_measuring();
    result.send_waits_woken += w->SendWaitsWoken();
    result.send_waits_past_deadline += w->SendWaitsPastDeadline();
  }
  if (!result.failure.ok()) return result;
  if (std::optional<absl::Status> failed = EveryRequestFailed(result)) {
    result.failure = *std::move(failed);
  } else if (std::optional<absl::Status> nothing = NothingMeasured(result)) {
    result.failure = *std::move(nothing);
  } else {
    if (std::optional<std::string> unanswered = UnansweredWarning(result)) {
      result.warnings.push_back(*std::move(unanswered));
    }
    if (std::optional<std::string> late = LateAlarmWarning(result)) result.warnings.push_back(*std::move(late));
  }
  return result;
}

}  // namespace chronoserve::client::bench
