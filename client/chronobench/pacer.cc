#include "client/chronobench/pacer.h"

#include <cmath>

namespace chronoserve::client::bench {

Pacer::Pacer(Distribution distribution, double total_rate_per_s, int worker, int workers,
             int64_t start_ns, uint64_t seed)
    : distribution_(distribution),
      period_ns_(1e9 * workers / total_rate_per_s),
      first_ns_(start_ns + static_cast<int64_t>(std::llround(1e9 * worker / total_rate_per_s))),
      rng_(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(worker) + 1),
      gap_(1.0 / period_ns_) {
  if (distribution_ == Distribution::kPoisson) {
    first_ns_ = start_ns;  // Poisson streams need no phase: each starts with a random gap
    poisson_ns_ = gap_(rng_);
  }
  next_ns_ = Compute();
}

int64_t Pacer::Compute() {
  if (distribution_ == Distribution::kConstant) {
    return first_ns_ + static_cast<int64_t>(std::llround(static_cast<double>(index_) * period_ns_));
  }
  return first_ns_ + static_cast<int64_t>(std::llround(poisson_ns_));
}

int64_t Pacer::Next() {
  const int64_t current = next_ns_;
  ++index_;
  if (distribution_ == Distribution::kPoisson) poisson_ns_ += gap_(rng_);
  next_ns_ = Compute();
  return current;
}

int64_t Pacer::SkipThrough(int64_t now_ns) {
  int64_t skipped = 0;
  for (; next_ns_ <= now_ns; ++skipped) Next();
  return skipped;
}

}  // namespace chronoserve::client::bench
