// StallWatch: when a wait for completions (the warm-up, --measurement-request-count) has stalled:
// no request completed for a limit while requests were in flight all along. Time with nothing in
// flight (an open loop's gap between sends, however long a Poisson draw makes it; an idle gap) is
// no stall: the server is not being waited for. Owned by the TrialRunner's wait, on its thread.
//
//   StallWatch watch(limit_ns, clock->NowNs(), completed);
//   each tick: if (watch.Stalled(clock->NowNs(), completed, in_flight)) fail the point;
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_STALL_WATCH_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_STALL_WATCH_H_

#include <cstdint>

namespace chronoserve::client::bench {

class StallWatch {
 public:
  // Starts at `now_ns` with `completed` requests finished so far.
  StallWatch(int64_t limit_ns, int64_t now_ns, int64_t completed)
      : limit_ns_(limit_ns), since_ns_(now_ns), completed_(completed) {}

  // Looks at the counts at `now_ns`: `completed` so far, `in_flight` now. True once no request
  // completed for `limit_ns` and requests were in flight at every look in that time.
  bool Stalled(int64_t now_ns, int64_t completed, int64_t in_flight);
  // How long requests in flight have gone without a completion, at `now_ns`.
  int64_t StalledNs(int64_t now_ns) const { return now_ns - since_ns_; }

 private:
  const int64_t limit_ns_;
  int64_t since_ns_;    // the last look that saw a completion or nothing in flight
  int64_t completed_;   // as of that look
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_STALL_WATCH_H_
