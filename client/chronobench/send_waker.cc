#include "client/chronobench/send_waker.h"

#include <sys/prctl.h>

#include <grpc/support/time.h>

#include <algorithm>

#include "absl/time/time.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace chronoserve::client::bench {

void WakeLead::Add(int64_t late_ns) {
  late_ns_[added_++ % kSamples] = late_ns;
  const size_t n = std::min(added_, kSamples);
  if (n < kMinSamples) return;
  std::array<int64_t, kSamples> sorted = late_ns_;
  auto p90 = sorted.begin() + n * 9 / 10;
  std::nth_element(sorted.begin(), p90, sorted.begin() + n);
  lead_ns_ = std::clamp(*p90 + kMarginNs, std::min(kMinNs, max_ns_), max_ns_);
}

SendWaker::~SendWaker() {
  if (thread_.joinable()) {
    CS_LOG(ERROR) << "SendWaker destroyed while running; stopping it";
    Stop();
  }
}

void SendWaker::Start() {
  thread_ = std::thread([this] {
    SetCurrentThreadName("cb-wake");
    Run();
  });
}

void SendWaker::WakeAt(int64_t at_ns) {
  asked_ns_ = at_ns;
  absl::MutexLock lock(&mu_);
  wake_at_ns_ = at_ns;
}

bool SendWaker::OnAlarm(int64_t taken_ns, bool sample) {
  int64_t fired_for_ns = 0;
  {
    absl::MutexLock lock(&mu_);
    armed_ = false;
    fired_for_ns = fired_for_ns_;
  }
  // An alarm for an earlier time, replaced since, may have waited on the queue while the owner was
  // busy: how late it was taken says nothing of the waker.
  const bool asked = fired_for_ns == asked_ns_;
  if (asked && sample) lead_.Add(std::max<int64_t>(taken_ns - fired_for_ns, 0));
  return asked;
}

void SendWaker::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  // Set with a past deadline, the alarm has usually fired already (then this does nothing); should
  // it not have, its tag comes back now, cancelled. The owner's drain takes the tag either way.
  alarm_.Cancel();
}

void SendWaker::Run() {
  // A timed wait ends within the thread's timer slack after its time; the default 50 µs would make
  // every wake (and so every open-loop send) that much late. Only this thread's slack changes.
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (!Ready()) {
      mu_.Await(absl::Condition(this, &SendWaker::Ready));
      continue;
    }
    const int64_t at_ns = wake_at_ns_;
    const int64_t wait_ns = at_ns - clock_->NowNs();
    if (wait_ns > 0) {
      // Until the time, unless it changes (a new time, or the stop) first: then look again.
      auto changed = [this, at_ns]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || wake_at_ns_ != at_ns;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Nanoseconds(wait_ns));
      continue;
    }
    wake_at_ns_ = kNever;
    fired_for_ns_ = at_ns;
    armed_ = true;
    // A deadline already past: gRPC puts the tag on the queue at once (within Set on some versions,
    // from its timer thread on others; nothing here depends on which). Outside the lock, so that a
    // woken owner's OnAlarm does not wait for Set to return.
    mu_.Unlock();
    alarm_.Set(cq_, gpr_inf_past(GPR_CLOCK_MONOTONIC), tag());
    mu_.Lock();
  }
}

}  // namespace chronoserve::client::bench
