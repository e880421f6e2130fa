#include "tools/profile/sample_spread.h"

#include <algorithm>
#include <cmath>

namespace chronoserve::profile {

double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
}

Spread SpreadOf(const std::vector<double>& samples) {
  Spread s;
  s.samples = static_cast<int64_t>(samples.size());
  s.p10 = Quantile(samples, 0.10);
  s.median = Quantile(samples, 0.50);
  s.p90 = Quantile(samples, 0.90);
  return s;
}

}  // namespace chronoserve::profile
