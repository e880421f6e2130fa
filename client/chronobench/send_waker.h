// SendWaker: wakes a thread blocked on its gRPC CompletionQueue at a given time, to tens of
// microseconds and without spinning. gRPC rounds a timed wait on a queue (AsyncNext) up to a whole
// millisecond; a SendWaker's own thread ("cb-wake") waits for the time on a futex with 1 ns of timer
// slack instead, then sets a grpc::Alarm on the queue with a deadline already past, so that gRPC puts
// the alarm's tag on the queue at once and it ends the owner's wait. That still takes its time (the
// end of the futex wait, then the alarm's hop to the owner's thread: 60-110 µs at the median on a
// 2-core VM), so the owner asks for LeadNs() before the time it must keep and polls the rest;
// LeadNs() follows how late recent wakes came. Owned by a LoadWorker and used from its thread
// (everything public); the waker's thread touches nothing but the wake time and the alarm.
//
//   SendWaker waker(&cq, clock);
//   waker.Start();
//   waker.WakeAt(t - waker.LeadNs());  cq.AsyncNext(..., deadline t)
//   the wait ended with tag(): waker.OnAlarm(taken_ns, /*sample=*/true);  // the time asked for
//                       // has come (true), or an earlier one asked for before: the caller looks at
//                       // the clock. Taken some other way (a poll): OnAlarm(taken_ns, false)
//   waker.Stop();  // then take the queue's events (the alarm's tag among them) until its shutdown
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_SEND_WAKER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_SEND_WAKER_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace chronoserve::client::bench {

// How long before a time a wake should be asked for: nine in ten of the last kSamples wakes came
// within it (plus kMarginNs), bounded to [kMinNs, max] (max: kMaxNs unless given; below kMinNs,
// max itself); the max until kMinSamples came. Used
// on one thread.
class WakeLead {
 public:
  static constexpr size_t kSamples = 64;
  static constexpr size_t kMinSamples = 8;
  static constexpr int64_t kMarginNs = 10'000;
  static constexpr int64_t kMinNs = 20'000;
  // The default cap (--max-send-poll-us 100). Wakes later than the cap make sends late rather than
  // poll longer: polls of up to 500 µs took a whole core per worker at 5,000 sends/s on the H100
  // host, and kept one worker from 20,000 sends/s, which a 100 µs cap reached with a median lag of
  // 4 µs (docs/BENCHMARKS.md §35). If the waker's thread is starved, the fallback is the owner's own
  // wait deadline: the send time, which gRPC rounds up to a whole millisecond, so sends can then be
  // up to about 1 ms late (it shows in schedule_lag). Such a wake ends no wait: it is no sample.
  static constexpr int64_t kMaxNs = 100'000;
  static constexpr int64_t kInitialNs = kMaxNs;  // until kMinSamples wakes came

  // The lead stays at or below `max_ns` (chronobench's --max-send-poll-us; 0: no lead, no polling).
  explicit WakeLead(int64_t max_ns = kMaxNs) : max_ns_(std::max<int64_t>(max_ns, 0)), lead_ns_(max_ns_) {}

  // A wake that came `late_ns` after the time asked for.
  void Add(int64_t late_ns);
  int64_t ns() const { return lead_ns_; }

 private:
  std::array<int64_t, kSamples> late_ns_{};  // a ring: the last kSamples
  size_t added_ = 0;
  int64_t max_ns_;
  int64_t lead_ns_;
};

class SendWaker {
 public:
  // `cq` and `clock` outlive the waker; `clock` tells the time WakeAt is given in. LeadNs() stays at
  // or below `max_lead_ns`.
  SendWaker(grpc::CompletionQueue* cq, const Clock* clock, int64_t max_lead_ns = WakeLead::kMaxNs)
      : cq_(cq), clock_(clock), lead_(max_lead_ns) {}
  ~SendWaker();
  SendWaker(const SendWaker&) = delete;
  SendWaker& operator=(const SendWaker&) = delete;

  // Starts the waker's thread.
  void Start();
  // Puts tag() on the queue at `at_ns` (the clock's time), replacing the time asked for before (one
  // not yet reached is forgotten). A time already past puts it there at once.
  void WakeAt(int64_t at_ns);
  // How long before a time to ask for it, so that its tag is off the queue by then (WakeLead over
  // the recent wakes).
  int64_t LeadNs() const { return lead_.ns(); }
  // The owner took tag() off the queue at `taken_ns`: the alarm may be set again (until then a time
  // asked for waits: a grpc::Alarm is set again only once its tag is back). True when the alarm
  // came for the time last asked for (false: for an earlier one, replaced since). How late it came
  // feeds LeadNs only when `sample` is set and it came for that time: the owner sets `sample` when
  // this tag is what ended its blocking wait after that WakeAt, so that the owner's own work (a
  // completion handled while the alarm fired, the tag then taken by a poll) never counts as the
  // waker's latency.
  bool OnAlarm(int64_t taken_ns, bool sample);
  // Joins the thread, then cancels the alarm (a no-op once it has fired, as it usually has; if not,
  // its tag comes back with ok = false). Either way the owner keeps taking the queue's events until
  // its shutdown: a tag set before may be there. Idempotent.
  void Stop();
  // The tag the alarm puts on the queue: distinct from any other object's address.
  void* tag() { return this; }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  void Run();
  // The thread has something to do: stop, or a time to wake at and the alarm free.
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (wake_at_ns_ != kNever && !armed_);
  }

  grpc::CompletionQueue* const cq_;
  const Clock* const clock_;
  std::thread thread_;
  grpc::Alarm alarm_;  // set on the waker's thread; cancelled by Stop once the thread is joined
  WakeLead lead_;      // the owner's thread
  int64_t asked_ns_ = kNever;  // the owner's thread: the time WakeAt was last given

  mutable absl::Mutex mu_;
  int64_t wake_at_ns_ ABSL_GUARDED_BY(mu_) = kNever;
  int64_t fired_for_ns_ ABSL_GUARDED_BY(mu_) = 0;  // the time the alarm was last set for
  bool armed_ ABSL_GUARDED_BY(mu_) = false;  // the alarm was set; its tag is not yet back
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_SEND_WAKER_H_
