// EventWaiter: how a LoadWorker waits on its gRPC CompletionQueue. It takes the queue's events off,
// each stamped with the time it was taken (a response's time), and hands them to the worker oldest
// first: once those taken are handled, the next wait takes every event already queued, so an answer
// that had arrived is not timed behind the worker's own work. In open loop and idle-gap mode it keeps
// send times with a SendWaker (a second thread, "cb-wake", whose alarm ends the wait on the queue a
// lead before the send time) and polls the queue for the rest, counting the CPU time of the polls
// that found nothing (PollNs). Owned by a LoadWorker, which also owns the queue; everything on the
// worker thread except PollNs(), read from the TrialRunner's thread.
//
//   EventWaiter waiter(&cq, clock, &stop);
//   waiter.StartWaker();                                  // open loop, idle gap: send times to keep
//   if (auto event = waiter.Next({send_ns, /*send=*/true})) handle *event;
//   the event is the waker's (IsWake(event->tag)): waiter.OnWake(*event)
//   waiter.StopWaker();  while (auto event = waiter.TakeReady()) handle *event;  then drain the queue
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_EVENT_WAITER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_EVENT_WAITER_H_

#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>

#include "client/chronobench/send_waker.h"
#include "common/clock.h"

namespace chronoserve::client::bench {

class EventWaiter {
 public:
  // When the worker should wake up at the latest, and whether that is a send time (open loop, idle
  // gap) to be kept to the microsecond, or only a bound on the wait (closed loop, a blocked send).
  struct Wake {
    int64_t at_ns = 0;
    bool send = false;
  };
  // A completion-queue event and when it was taken off the queue (the response time).
  struct Event {
    void* tag = nullptr;
    bool ok = false;
    int64_t received_ns = 0;
    bool woke = false;  // the SendWaker's tag, and what ended the blocking wait after its WakeAt
  };

  // `cq`, `clock` and `stop` (set: the worker is stopping, polls end) outlive the waiter.
  EventWaiter(grpc::CompletionQueue* cq, const Clock* clock, const std::atomic<bool>* stop)
      : cq_(cq), clock_(clock), stop_(stop) {}
  EventWaiter(const EventWaiter&) = delete;
  EventWaiter& operator=(const EventWaiter&) = delete;

  // Creates and starts the SendWaker, its lead at most `max_lead_ns` (0: no polling before a send
  // time): there are send times to keep. Before any Next with a send.
  void StartWaker(int64_t max_lead_ns = WakeLead::kMaxNs);
  // Stops the SendWaker, if any; no alarm is set from here on, but one set before may still come off
  // the queue (IsWake still knows its tag).
  void StopWaker();
  // When every event taken is handled: waits for one until `wake`, then takes every one already
  // queued, each stamped with the time it was taken off the queue. Returns the oldest not yet
  // handed out; nullopt when none came by `wake`.
  std::optional<Event> Next(Wake wake);
  // The oldest event taken but not yet handed out, without waiting; nullopt when none.
  std::optional<Event> TakeReady();
  // The tag is the SendWaker's alarm.
  bool IsWake(void* tag) const { return waker_ != nullptr && tag == waker_->tag(); }
  // Frees the SendWaker's alarm whose tag came as `event`, noting whether the wake asked for the
  // last send time has come.
  void OnWake(const Event& event);
  // The CPU time of the polls that found nothing just before a send time, ns (any thread).
  int64_t PollNs() const { return poll_ns_.load(std::memory_order_relaxed); }
  // The blocking waits before a send time (each after a WakeAt), and how each ended: the waker's
  // alarm for that time (woken, counted by OnWake), the queue's own deadline, which gRPC rounds up
  // to a whole millisecond (past deadline: no alarm by the send time, a starved or failed waker), or
  // else a response or an alarm for an earlier time that came late. A working waker ends most of
  // those a response does not; a failed one, none (any thread).
  int64_t SendWaits() const { return send_waits_.load(std::memory_order_relaxed); }
  int64_t SendWaitsWoken() const { return send_waits_woken_.load(std::memory_order_relaxed); }
  int64_t SendWaitsPastDeadline() const { return send_waits_past_deadline_.load(std::memory_order_relaxed); }

 private:
  static constexpr int64_t kNoSend = std::numeric_limits<int64_t>::min();

  // The calling thread's CPU time, ns.
  static int64_t OwnCpuNs();
  // Waits for the next event until `wake`; false when none came. A send time is met by two waits:
  // on the queue until the SendWaker's alarm, its lead (LeadNs) before it (gRPC rounds a timed wait
  // up to whole milliseconds), then polling the queue for the rest (all of it once the alarm for
  // that send has come, even if the lead shrank since).
  bool AwaitEvent(Wake wake);
  // Appends the next event to ready_ if one comes by `deadline`.
  bool TakeEvent(gpr_timespec deadline);

  grpc::CompletionQueue* const cq_;
  const Clock* const clock_;
  const std::atomic<bool>* const stop_;
  std::atomic<int64_t> poll_ns_{0};
  std::atomic<int64_t> send_waits_{0};
  std::atomic<int64_t> send_waits_woken_{0};
  std::atomic<int64_t> send_waits_past_deadline_{0};
  std::deque<Event> ready_;  // events taken off the queue (stamped), not yet handled, oldest first
  std::unique_ptr<SendWaker> waker_;  // open loop, idle gap: its thread ends a wait before a send time
  int64_t wake_send_ns_ = kNoSend;    // the send time of the last WakeAt
  int64_t woken_send_ns_ = kNoSend;   // the send time whose wake has come
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_EVENT_WAITER_H_
