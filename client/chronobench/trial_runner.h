// TrialRunner: measures one sweep point. It starts the workers, discards the warm-up requests
// (every request sent before the warm-up ended, whenever it is answered), then closes measurement
// windows (trials) of --measurement-interval until the last three agree within
// --stability-percentage in throughput and p50 end-to-end latency, or --max-trials is reached (then
// the point is reported as not stable). The reported figures merge the per-worker recorders of the
// last three windows. A wait for completions (warm-up, --measurement-request-count) that sees none
// for a bounded time while requests are in flight fails the point with DEADLINE_EXCEEDED. Runs on
// the caller's thread; owns the workers it starts and stops them on failure too.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_TRIAL_RUNNER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_TRIAL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/chronobench/bench_options.h"
#include "client/chronobench/client_tracer.h"
#include "client/chronobench/latency_recorder.h"
#include "client/chronobench/load_worker.h"
#include "client/chronobench/send_waker.h"
#include "client/chronobench/shm_slot_pool.h"
#include "client/chronobench/channel_stubs.h"
#include "common/clock.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

// One point of a sweep.
struct PointSpec {
  LoadMode mode = LoadMode::kConcurrency;
  int64_t concurrency = 1;
  double rate = 0;          // requests/s
  double idle_gap_ms = 0;
  int64_t batch_size = 1;
  int index = 0;            // its place in the sweep (0, 1, ...): seeds its workers (PointSeed)
  std::string Label() const;  // "concurrency 4", "rate 200/s", "idle gap 200 ms" (+ ", batch 8")
};

// One measurement window.
struct WindowSummary {
  double duration_s = 0;
  int64_t successes = 0;      // OK responses (the JSON's "requests" is successes + errors)
  int64_t errors = 0;
  double throughput_rps = 0;  // OK responses per second
  int64_t p50_ns = 0;         // end-to-end
  double client_cpu_busiest = 0;  // busiest worker thread's CPU share of the window (0..1)
};

struct PointResult {
  PointSpec spec;
  LatencyRecorder recorder;  // merged over the reported windows
  std::vector<WindowSummary> windows;
  int reported_windows = 0;
  bool stable = false;
  double duration_s = 0;      // of the reported windows
  double throughput_rps = 0;  // OK responses per second
  double items_per_s = 0;     // throughput_rps * batch size
  int64_t traced = 0;         // of the reported windows' requests, those that carried a traceparent
  // Requests still in flight when the point ended: cancelled, recorded in no window (closed loop
  // leaves up to its concurrency in flight), and how long the oldest of them had waited (as e2e).
  int64_t unanswered_at_end = 0;
  // Open loop: send times of the schedule that had come when the point ended but were never sent
  // (the client was behind it), in no window either. oldest_unanswered_ns covers them too.
  int64_t unsent_at_end = 0;
  int64_t oldest_unanswered_ns = 0;
  // Of the unsent ones, how long the oldest had waited at the end (0 with none): a send time that
  // came in the last moments before the stop is no sign of a client behind its schedule.
  int64_t oldest_unsent_ns = 0;
  // Requests finished (answered or failed, in a window or not) after the warm-up: none, with
  // requests in flight at the end, is a server that stopped answering.
  int64_t finished_after_warmup = 0;
  // Every request the point sent, its warm-up's and those answered between windows included: the
  // count a server's counters moved by for the point (each answered, or cancelled at the end).
  int64_t sent_total = 0;
  // Open loop and idle gap, over the whole point (warm-up included): of the workers' waits before a
  // send time, those their SendWaker's alarm ended and those gRPC's millisecond-rounded deadline
  // ended, the alarm not having come by the send time (LoadWorker::SendWaitsWoken). 0 in closed loop.
  int64_t send_waits_woken = 0;
  int64_t send_waits_past_deadline = 0;
  std::vector<std::string> warnings;
  // Not OK: the point failed after its workers ran (no request measured, every one failed, a
  // server that stopped answering); the counts above that were gathered are kept, the figures not.
  absl::Status failure;
};

// What every point shares.
struct RunnerContext {
  std::vector<ChannelStubs>* stubs = nullptr;  // one per channel
  const Clock* clock = nullptr;
  MeasurementOptions measurement;
  Distribution distribution = Distribution::kConstant;
  int threads = 1;             // worker threads to spread load over
  int64_t timeout_ms = 0;
  bool streaming = false;      // ModelStreamInfer instead of unary calls
  bool connection_affinity = true;   // each worker on its own channels (ChannelForSend)
  double traceparent_rate = 0;
  ClientTracer* tracer = nullptr;  // exports traced requests' client spans; null: none
  const ShmLayout* shm_layout = nullptr;  // set: tensors in system shared memory (per point's batch)
  uint64_t seed = 1;           // --seed; each point's workers get PointSeed(seed, point.index)
  int64_t max_send_poll_ns = WakeLead::kMaxNs;  // --max-send-poll-us
  // Called about every 200 ms with a one-line status (for the terminal progress line).
  std::function<void(const std::string&)> progress;
};

// The seed of the workers of sweep point `point` (their traceparent sampling, trace and span ids,
// Poisson gaps), from the run's --seed: fixed by the two, so a run is reproduced by its --seed, and
// unrelated between points, so that the k-th request of a worker draws other ids at every point.
uint64_t PointSeed(uint64_t run_seed, int point);

// How `spec`'s load is split over the workers of `context` (one plan each).
std::vector<WorkerPlan> PlanWorkers(const PointSpec& spec, const RunnerContext& context);

// True when the last three windows have throughput and p50 each within `percentage` % of their
// mean (and all three saw OK responses).
bool WindowsAreStable(const std::vector<WindowSummary>& windows, double percentage);

// A warning when a request unanswered at the end (in flight, or due by an open loop's schedule and
// never sent) had waited longer than any e2e the point reports: its latency, never recorded, lies
// beyond the reported tail. Nullopt otherwise (requests merely in flight at the end, as closed loop
// always has, are no reason to warn).
std::optional<std::string> UnansweredWarning(const PointResult& point);

// How long an unsent send time may have waited at the stop and still be no sign of a client behind
// its schedule: the alarms before a send may come up to 1 ms late (LateAlarmWarning).
constexpr int64_t kUnsentSlackNs = 1'000'000;

// Whether an open-loop point ended behind its schedule: a send time that had waited past
// kUnsentSlackNs at the stop was never sent.
bool BehindSchedule(const PointResult& point);

// A point whose reported windows hold no request at all has no figures: the status that fails it
// and stops the sweep (DEADLINE_EXCEEDED for a server that answered nothing after the warm-up while
// requests waited, or a client behind its schedule (BehindSchedule); FAILED_PRECONDITION otherwise:
// windows too short for the server's answers or an idle gap),
// saying what may have caused it for the point's load mode. Nullopt otherwise.
std::optional<absl::Status> NothingMeasured(const PointResult& point);

// A point whose every measured request failed (the server killed, refusing the load) is not a
// measurement: the status (the most frequent failure's code, the point's label and the counts by
// code) that fails the point and stops the sweep, so chronobench exits 1. Nullopt when any request
// succeeded or none was measured.
std::optional<absl::Status> EveryRequestFailed(const PointResult& point);

// A warning when the workers' send-time alarms lost to gRPC's millisecond-rounded deadline in more
// than a third of the waits the two ended (at least 10 of them): the client's own threads got no
// CPU in time, so sends were late by up to a millisecond (schedule_lag) through no fault of the
// server. Nullopt otherwise (a working waker on a loaded 2-core VM lost 2-10 % of its waits).
std::optional<std::string> LateAlarmWarning(const PointResult& point);

// A warning when a client worker thread was over 90 % busy in a reported window (and most requests
// did not fail, which return at once and keep any client busy): the client may be the limit. It
// says to raise --threads only where that adds workers (open loop; a closed loop with more in
// flight than `threads`); else the client's CPUs are the limit. Nullopt otherwise.
std::optional<std::string> BusyClientWarning(const PointResult& point, int threads);

// Runs `spec` sending `request` until stable or out of trials. An error: the point could not start
// (shared-memory slots). A point that failed once its workers ran comes back with `failure` set and
// what its workers left unanswered and unsent (the figures are not to be used).
absl::StatusOr<PointResult> RunPoint(const PointSpec& spec, const inference::ModelInferRequest& request,
                                     const RunnerContext& context);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_TRIAL_RUNNER_H_
