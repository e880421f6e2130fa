// A mix of batch sizes (size -> number of batches), as a served point ran them, for the in-process
// reference to replay (bench_inprocess_throughput --batch-mix; issue 3's 85 %, BENCHMARKS §36).
#ifndef CHRONOSERVE_BENCHMARKS_BATCH_MIX_H_
#define CHRONOSERVE_BENCHMARKS_BATCH_MIX_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chronoserve::bench {

// "8:120,9:45" (batch size : batches) as a mix; a size given twice adds up. Sizes run from 1 to
// `max_batch_size` (when it is above 0), batches from 1 to 10^12; anything else is an error naming
// the entry.
absl::StatusOr<std::map<int64_t, int64_t>> ParseBatchMix(const std::string& text, int max_batch_size);

// The sizes of `count` batches taken from `mix` in its proportions and spread evenly (smooth
// weighted round-robin: each step the size furthest behind its share goes next), so any stretch of
// the run sees the mix. Empty when `mix` is, or `count` <= 0.
std::vector<int64_t> MixSchedule(const std::map<int64_t, int64_t>& mix, int count);

}  // namespace chronoserve::bench

#endif  // CHRONOSERVE_BENCHMARKS_BATCH_MIX_H_
