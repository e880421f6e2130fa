// Spread: the median and p10/p90 of a set of samples (linear interpolation between order
// statistics, so p10 <= median <= p90 always). Pure function; thread-safe.
#ifndef CHRONOSERVE_TOOLS_PROFILE_SAMPLE_SPREAD_H_
#define CHRONOSERVE_TOOLS_PROFILE_SAMPLE_SPREAD_H_

#include <cstdint>
#include <vector>

namespace chronoserve::profile {

struct Spread {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  int64_t samples = 0;
};

// Quantile q in [0, 1] of `samples` (any order); 0 for an empty set.
double Quantile(std::vector<double> samples, double q);

Spread SpreadOf(const std::vector<double>& samples);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_SAMPLE_SPREAD_H_
