// HostKeepWarm (--host-keep-warm-ms): keeps the server's CPUs from halting while requests are
// coming. A request crosses several of the server's threads (gRPC's, the model's worker, the
// completion thread), and each hand-off wakes a thread that was asleep; on a virtual machine a
// halted CPU takes tens of µs to wake (the hypervisor must run it again). Here one thread per CPU,
// pinned to it and at SCHED_IDLE priority, spins with the CPU's pause instruction for as long as a
// request arrived within the horizon: the CPU never halts, and any real thread that wakes on it
// preempts the spinner at once. A spinner that finds its CPU taken by real work for a while (it was
// not running for 250 µs) steps aside for 10 ms: a busy CPU does not halt anyway, and the scheduler
// would otherwise still hand the spinner whole slices of it. So do all spinners while more than
// kMaxInFlight requests are in flight: the server's threads are awake then, and a spinner on the
// other hyperthread of a busy core slows it down. After the horizon without a request
// the spinners park (blocked, no CPU) until the next one. The price: idle CPUs show as busy (the
// server's CPU time grows by up to one core per CPU), and they draw more power.
// docs/GPU_PERFORMANCE.md, "Host keep-warm".
//
//   auto warm = HostKeepWarm::Start(CurrentThreadCpus(), absl::Seconds(60), SteadyClock::Get());
//   (*warm)->Touch(clock->NowNs());   // on every request's arrival: two atomic operations
#ifndef CHRONOSERVE_SERVER_CORE_HOST_KEEP_WARM_H_
#define CHRONOSERVE_SERVER_CORE_HOST_KEEP_WARM_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace chronoserve::server {

class HostKeepWarm {
 public:
  // One spinner per CPU in `cpus` (named cs-spin-<cpu>), parked until the first Touch. Fails,
  // naming the CPU, when a spinner cannot be pinned to its CPU or moved to SCHED_IDLE (the spinners
  // already started are stopped); INVALID_ARGUMENT for no CPUs or a horizon that is not positive.
  // `clock` must outlive the object.
  static absl::StatusOr<std::unique_ptr<HostKeepWarm>> Start(const std::vector<int>& cpus, absl::Duration horizon,
                                                             const Clock* clock);
  // Stops and joins the spinners.
  ~HostKeepWarm();
  HostKeepWarm(const HostKeepWarm&) = delete;
  HostKeepWarm& operator=(const HostKeepWarm&) = delete;

  // A request arrived at `now_ns`: the spinners spin until `now_ns` + horizon. Any thread; wait-free
  // unless the spinners are parked (then it wakes them).
  void Touch(int64_t now_ns);
  // Requests accepted and not yet answered, after every change (the dispatcher's count): above
  // kMaxInFlight the spinners step aside. Any thread; stores only when the side of the limit changes.
  void SetInFlight(int64_t in_flight);
  static constexpr int64_t kMaxInFlight = 4;

  const std::vector<int>& cpus() const { return cpus_; }
  absl::Duration horizon() const { return absl::Nanoseconds(horizon_ns_); }
  // Spinners awake now: spinning, or stepping aside from a busy CPU (0 when parked).
  int spinning() const;
  // How often a spinner stepped aside because real work had its CPU or the server was busy.
  int64_t busy_backoffs() const;
  // Waits until exactly `n` spinners spin, or `timeout` passes; whether it happened (tests).
  bool WaitForSpinning(int n, absl::Duration timeout) const;

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();

  HostKeepWarm(std::vector<int> cpus, int64_t horizon_ns, const Clock* clock);
  // The spinner of `cpu`: pins itself, takes SCHED_IDLE, reports in `started`, then spins or parks
  // until stopped.
  void Run(int cpu);
  // No request within the horizon (or none yet).
  bool Expired() const;

  const std::vector<int> cpus_;
  const int64_t horizon_ns_;
  const Clock* const clock_;
  std::atomic<int64_t> last_touch_ns_{kNever};
  std::atomic<bool> crowded_{false};  // more than kMaxInFlight requests in flight
  std::atomic<int> parked_{0};  // spinners blocked in Run's wait: Touch must wake them
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  int spinning_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t busy_backoffs_ ABSL_GUARDED_BY(mu_) = 0;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status start_error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_HOST_KEEP_WARM_H_
