// Exact nearest-rank percentiles for the benchmarks, which keep every sample.
#ifndef CHRONOSERVE_BENCHMARKS_PERCENTILE_H_
#define CHRONOSERVE_BENCHMARKS_PERCENTILE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace chronoserve::bench {

// The p-th percentile (0 < p <= 100, nearest rank) of nanosecond samples, in microseconds; 0 when empty.
inline double PercentileUs(std::vector<int64_t> ns, double p) {
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * ns.size()));
  return static_cast<double>(ns[std::min(ns.size() - 1, rank == 0 ? 0 : rank - 1)]) / 1000.0;
}

}  // namespace chronoserve::bench

#endif  // CHRONOSERVE_BENCHMARKS_PERCENTILE_H_
