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
  lead_ns_ = std::clamp(*p90 + kMarginNs, kMinNs, kMaxNs);
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
  absl::MutexLock lock(&mu_);
  wake_at_ns_ = at_ns;
}

void SendWaker::OnAlarm(int64_t taken_ns) {
  int64_t late_ns = -1;
  {
    absl::MutexLock lock(&mu_);
    armed_ = false;
    if (wake_at_ns_ == kNever) late_ns = std::max<int64_t>(taken_ns - fired_for_ns_, 0);
  }
  if (late_ns >= 0) lead_.Add(late_ns);
}

void SendWaker::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  // Set with a past deadline, the alarm fired within Set; should it not have, its tag comes back now.
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
    // A deadline already past: the tag goes on the queue within Set, on this thread. Outside the
    // lock, so that the woken owner's OnAlarm does not wait for Set to return.
    mu_.Unlock();
    alarm_.Set(cq_, gpr_inf_past(GPR_CLOCK_MONOTONIC), tag());
    mu_.Lock();
  }
}

}  // namespace chronoserve::client::bench
