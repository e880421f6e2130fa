// Pacer: the intended send times of one open-loop worker. Constant: evenly spaced (computed from
// the index, so no drift accumulates); Poisson: exponential gaps from a seeded generator. A run of
// W workers at total rate R gives each worker R/W; constant workers are phase-shifted by 1/R so the
// union is evenly spaced at R, and independent Poisson streams of R/W sum to a Poisson stream of R.
// Owned and called by one worker thread.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_PACER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_PACER_H_

#include <cstdint>
#include <random>

#include "client/chronobench/bench_options.h"

namespace chronoserve::client::bench {

class Pacer {
 public:
  // Worker `worker` of `workers` sharing `total_rate_per_s`, schedule starting at `start_ns`.
  Pacer(Distribution distribution, double total_rate_per_s, int worker, int workers, int64_t start_ns,
        uint64_t seed);

  // The next intended send time (steady-clock ns); advances the schedule.
  int64_t Next();
  // The next intended send time without advancing.
  int64_t Peek() const { return next_ns_; }
  // Advances past every intended send time up to and including `now_ns`; how many there were (at
  // the end of a point, the schedule's sends that had come but were never made). Constant: exact,
  // without a step per time. Poisson: as Next() would, for the first million; beyond them the count
  // is drawn at once from the Poisson distribution of the time left.
  int64_t SkipThrough(int64_t now_ns);

 private:
  int64_t Compute();

  Distribution distribution_;
  double period_ns_;   // this worker's mean gap
  int64_t first_ns_;   // this worker's first send
  int64_t index_ = 0;
  double poisson_ns_ = 0;  // accumulated Poisson offset from first_ns_
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  int64_t next_ns_;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_PACER_H_
