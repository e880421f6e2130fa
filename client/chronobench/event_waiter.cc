#include "client/chronobench/event_waiter.h"

#include <time.h>

#include <algorithm>

namespace chronoserve::client::bench {
namespace {

// `ns` from now on gRPC's monotonic clock, a completion queue's deadline.
gpr_timespec DeadlineIn(int64_t ns) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(ns, GPR_TIMESPAN));
}

}  // namespace

// A send time (open loop, idle gap) is kept by two waits. The worker waits on its completion queue
// until its SendWaker's alarm ends the wait a lead before the send time (a timed wait alone wakes up
// to 1 ms late: gRPC rounds its deadline up to a whole millisecond), then polls the queue (a zero
// deadline) for the rest. The lead follows how late recent wakes came (the waker's sleep ending, then
// the alarm's hop to this thread: 60-110 µs at the median on a 2-core VM), up to LeadNs() (20-100 µs
// by default: the 90th percentile of recent wakes plus a margin, capped), so the sends whose wake
// came within the lead are polled for what is left of it and sent on time; where the wakes' 90th
// percentile passes the cap (the 2-core VM under load), more than one send in ten is late by the
// difference, which schedule_lag shows. On the 2-core
// VM at 1,000 requests/s the polls took 15-25 µs of CPU a send (20-80 µs with two busy loops
// beside it, the lead then longer), the rest of the worker's work 110-145 µs. Once the wake for a
// send time has come, that send is polled for even if the lead shrank meanwhile. The CPU time of
// the polls that found nothing is left out of the saturation warning (PollNs). It does not yield
// between polls: on a machine with more runnable threads than CPUs, yielding made the median send
// 0.85 ms late (BENCHMARKS.md §33).

void EventWaiter::StartWaker(int64_t max_lead_ns) {
  waker_ = std::make_unique<SendWaker>(cq_, clock_, max_lead_ns);
  waker_->Start();
}

void EventWaiter::StopWaker() {
  if (waker_ != nullptr) waker_->Stop();
}

int64_t EventWaiter::OwnCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool EventWaiter::TakeEvent(gpr_timespec deadline) {
  Event event;
  if (cq_->AsyncNext(&event.tag, &event.ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
  event.received_ns = clock_->NowNs();
  ready_.push_back(event);
  return true;
}

bool EventWaiter::AwaitEvent(Wake wake) {
  const int64_t start_ns = clock_->NowNs();
  const int64_t wait_ns = std::max<int64_t>(wake.at_ns - start_ns, 0);
  // A send time: the waker's lead before it is polled, and all that is left of it once the wake
  // asked for it has come (the lead may have shrunk since: asking again would cost another round
  // trip, and the send its lateness).
  const int64_t poll_window_ns = wake.send ? waker_->LeadNs() : 0;
  if (wake.send && (wait_ns <= poll_window_ns || wake.at_ns == woken_send_ns_)) {
    // The CPU time of the polls that found nothing (this thread's clock: time spent yielded to
    // others is not counted; the poll that returns an event did the worker's receive work).
    const gpr_timespec poll = gpr_time_0(GPR_CLOCK_MONOTONIC);
    const int64_t cpu_start_ns = OwnCpuNs();
    int64_t cpu_before_ns = cpu_start_ns;
    for (int64_t now = start_ns; !TakeEvent(poll); now = clock_->NowNs()) {
      if (now >= wake.at_ns || stop_->load(std::memory_order_relaxed)) {
        poll_ns_.fetch_add(OwnCpuNs() - cpu_start_ns, std::memory_order_relaxed);
        return false;
      }
      cpu_before_ns = OwnCpuNs();
    }
    poll_ns_.fetch_add(cpu_before_ns - cpu_start_ns, std::memory_order_relaxed);
    return true;
  }
  if (!wake.send) return TakeEvent(DeadlineIn(wait_ns));
  // A send time farther off: the waker's alarm ends the wait where the poll window begins. The
  // deadline, which gRPC rounds up to a whole millisecond, only bounds the wait.
  waker_->WakeAt(wake.at_ns - poll_window_ns);
  wake_send_ns_ = wake.at_ns;
  send_waits_.fetch_add(1, std::memory_order_relaxed);
  if (!TakeEvent(DeadlineIn(wait_ns))) {
    send_waits_past_deadline_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The alarm's tag ended this wait: how late it came is the waker's own latency, not the worker's
  // (taken any other way, it may have waited on the queue while the worker was busy). OnWake
  // counts it as woken if it was the alarm for this send time.
  if (IsWake(ready_.back().tag)) ready_.back().woke = true;
  return true;
}

std::optional<EventWaiter::Event> EventWaiter::Next(Wake wake) {
  // Handling an event (recording it, copying outputs out, a stream's next read) and the sends
  // between events take time: once the events taken are all handled, the worker waits for the
  // next and then takes every one already queued, each stamped as it is taken, so an answer that
  // had arrived is not timed behind the client's own work. They are still handled one per turn, so
  // each completion frees its slot for the next send as soon as it is handled (handling them all
  // first let the load in flight sag, §31). Polling the queue on every turn instead cost 7-30 % of
  // the requests a second at concurrency 256 (§31), so a stream's next answer, whose read starts
  // only when the previous one is handled, is taken at the next wait.
  if (ready_.empty()) {
    if (!AwaitEvent(wake)) return std::nullopt;
    const gpr_timespec poll = gpr_time_0(GPR_CLOCK_MONOTONIC);
    while (TakeEvent(poll)) {
    }
  }
  return TakeReady();
}

std::optional<EventWaiter::Event> EventWaiter::TakeReady() {
  if (ready_.empty()) return std::nullopt;
  const Event event = ready_.front();
  ready_.pop_front();
  return event;
}

void EventWaiter::OnWake(const Event& event) {
  // A poll window has begun (or an earlier one asked for before): the worker's next turn looks at
  // the time. Once the wake for a send time has come, that send is polled for, whatever the lead.
  if (!waker_->OnAlarm(event.received_ns, event.woke)) return;
  woken_send_ns_ = wake_send_ns_;
  // Only the alarm for the time asked counts as a win: one for an earlier time, which came after
  // its send (a response ended that wait, or the deadline did), ends the next wait at once and
  // says nothing of the waker keeping time.
  if (event.woke) send_waits_woken_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace chronoserve::client::bench
