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
  if (next_ns_ > now_ns) return 0;
  if (distribution_ == Distribution::kConstant) {
    // The last index whose time is at most now, found from the period and settled against Compute's
    // rounding: no step per send time (a worker far behind a high rate has billions of them).
    auto time_of = [this](int64_t k) { return first_ns_ + static_cast<int64_t>(std::llround(static_cast<double>(k) * period_ns_)); };
    int64_t last = static_cast<int64_t>(std::floor(static_cast<double>(now_ns - first_ns_) / period_ns_));
    while (time_of(last + 1) <= now_ns) ++last;
    while (last >= index_ && time_of(last) > now_ns) --last;
    const int64_t skipped = last - index_ + 1;
    index_ = last + 1;
    next_ns_ = Compute();
    return skipped;
  }
  // Poisson: one draw a send time, as sending them would, up to a bound; past it the rest of the
  // interval's count is drawn at once (a Poisson count of the mean the time left holds) and the next
  // time is an exponential gap after now (the process has no memory).
  constexpr int64_t kMaxSteps = 1'000'000;
  int64_t skipped = 0;
  for (; next_ns_ <= now_ns && skipped < kMaxSteps; ++skipped) Next();
  if (next_ns_ <= now_ns) {
    // The one at next_ns_, and those after it (a Poisson count of mean 0 is 0; the distribution
    // itself needs a mean above 0).
    const double mean = static_cast<double>(now_ns - next_ns_) / period_ns_;
    int64_t count = 1;
    if (mean > 0) {
      std::poisson_distribution<int64_t> more(mean);
      count += more(rng_);
    }
    skipped += count;
    index_ += count;
    poisson_ns_ = static_cast<double>(now_ns - first_ns_) + gap_(rng_);
    next_ns_ = Compute();
    // A gap under half a nanosecond rounds onto now: that time had come too.
    for (; next_ns_ <= now_ns; ++skipped) Next();
  }
  return skipped;
}

}  // namespace chronoserve::client::bench
