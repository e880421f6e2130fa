#include "server/core/host_keep_warm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/cpu_set.h"
#include "common/thread_name.h"

namespace chronoserve::server {
namespace {

// The CPU's spin-wait hint: the loop yields the core's shared resources to its SMT sibling and
// draws less power than a bare loop.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Pauses between two looks at the clock (a few µs): the horizon is checked that often.
constexpr int kPausesPerCheck = 256;
// A spinner that finds this much time passed between two looks was not running: real work had its
// CPU. Then the CPU is busy and needs no keeping awake, while the scheduler still gives a SCHED_IDLE
// thread a slice of a busy CPU now and then (a whole slice, a millisecond or so, that a busy worker
// waits out): so the spinner steps aside for kBusyBackOff.
constexpr int64_t kTakenNs = 250'000;
constexpr absl::Duration kBusyBackOff = absl::Milliseconds(10);

struct SpinningIs {
  const HostKeepWarm* warm;
  int n;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostKeepWarm>> HostKeepWarm::Start(const std::vector<int>& cpus, absl::Duration horizon,
                                                                   const Clock* clock) {
  if (cpus.empty()) return absl::InvalidArgumentError("--host-keep-warm-ms: no CPU to keep warm");
  const int64_t horizon_ns = absl::ToInt64Nanoseconds(horizon);
  if (horizon_ns <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host-keep-warm-ms: the horizon must be positive, not ", absl::FormatDuration(horizon)));
  }
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::unique_ptr<HostKeepWarm> warm(new HostKeepWarm(std::move(sorted), horizon_ns, clock));
  for (int cpu : warm->cpus_) warm->threads_.emplace_back([w = warm.get(), cpu] { w->Run(cpu); });
  absl::Status error;
  {
    absl::MutexLock lock(&warm->mu_);
    HostKeepWarm* w = warm.get();
    warm->mu_.Await(absl::Condition(
        +[](HostKeepWarm* self) { return self->started_ == static_cast<int>(self->cpus_.size()); }, w));
    error = warm->start_error_;
  }
  if (!error.ok()) return error;  // the destructor stops the spinners that did start
  return warm;
}

HostKeepWarm::HostKeepWarm(std::vector<int> cpus, int64_t horizon_ns, const Clock* clock)
    : cpus_(std::move(cpus)), horizon_ns_(horizon_ns), clock_(clock) {}

HostKeepWarm::~HostKeepWarm() {
  {
    absl::MutexLock lock(&mu_);
    stop_.store(true);
    wake_.SignalAll();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void HostKeepWarm::Touch(int64_t now_ns) {
  // A busy server stores at most once a millisecond (or an eighth of a shorter horizon): the
  // spinners read this line, and every store would take it from all of them.
  const int64_t granularity_ns = std::min<int64_t>(horizon_ns_ / 8, 1'000'000);
  const int64_t last = last_touch_ns_.load(std::memory_order_relaxed);
  if (parked_.load(std::memory_order_relaxed) == 0 && last != kNever && now_ns - last < granularity_ns) return;
  // Paired with Run's park: either a parking spinner sees this touch, or this sees it parked.
  last_touch_ns_.store(now_ns);
  if (parked_.load() == 0) return;
  absl::MutexLock lock(&mu_);
  wake_.SignalAll();
}

void HostKeepWarm::SetInFlight(int64_t in_flight) {
  const bool crowded = in_flight > kMaxInFlight;
  if (crowded_.load(std::memory_order_relaxed) != crowded) crowded_.store(crowded, std::memory_order_relaxed);
}

bool HostKeepWarm::Expired() const {
  const int64_t last = last_touch_ns_.load();
  return last == kNever || clock_->NowNs() - last > horizon_ns_;
}

int HostKeepWarm::spinning() const {
  absl::MutexLock lock(&mu_);
  return spinning_;
}

int64_t HostKeepWarm::busy_backoffs() const {
  absl::MutexLock lock(&mu_);
  return busy_backoffs_;
}

bool HostKeepWarm::WaitForSpinning(int n, absl::Duration timeout) const {
  SpinningIs want{this, n};
  const bool reached = mu_.LockWhenWithTimeout(
      absl::Condition(+[](SpinningIs* w) { return w->warm->spinning_ == w->n; }, &want), timeout);
  mu_.Unlock();
  return reached;
}

void HostKeepWarm::Run(int cpu) {
  SetCurrentThreadName(absl::StrCat("cs-spin-", cpu));
  absl::Status ready = PinCurrentThread({cpu});
  if (ready.ok()) ready = SetCurrentThreadIdlePriority();
  mu_.Lock();
  ++started_;
  if (!ready.ok()) {
    if (start_error_.ok()) {
      start_error_ = absl::Status(ready.code(), absl::StrCat("--host-keep-warm-ms: the spinner of CPU ", cpu, ": ",
                                                             ready.message()));
    }
    mu_.Unlock();
    return;
  }
  while (true) {
    parked_.fetch_add(1);
    while (!stop_.load() && Expired()) wake_.Wait(&mu_);
    parked_.fetch_sub(1);
    if (stop_.load()) break;
    ++spinning_;
    mu_.Unlock();
    bool taken = false;
    int64_t last = SteadyClock::Now();
    while (!taken && !stop_.load(std::memory_order_relaxed) && !Expired()) {
      for (int i = 0; i < kPausesPerCheck; ++i) CpuRelax();
      const int64_t now = SteadyClock::Now();
      taken = now - last > kTakenNs || crowded_.load(std::memory_order_relaxed);
      last = now;
    }
    mu_.Lock();
    if (taken) {
      // Still counted as spinning: the horizon has not passed, the CPU is only busy.
      ++busy_backoffs_;
      wake_.WaitWithTimeout(&mu_, kBusyBackOff);
    }
    --spinning_;
  }
  mu_.Unlock();
}

}  // namespace chronoserve::server
