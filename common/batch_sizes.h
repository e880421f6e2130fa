// Items per executed batch, from the batch sizes a set of answers reported (timing.batch_size). A
// batch of b items answers each of its requests with b, so a plain mean over answers counts the
// batch once per request in it and leans to large batches. Requests of k items each: a batch of b
// items answers b / k of them, each adding 1 / b here, so the sum is batches / k and answers / sum
// = items / batches: the harmonic mean of the sizes. Used by chronobench's recorder and by
// bench_served_path, which both keep the answers by size.
#ifndef CHRONOSERVE_COMMON_BATCH_SIZES_H_
#define CHRONOSERVE_COMMON_BATCH_SIZES_H_

#include <cstdint>
#include <map>

namespace chronoserve {

// `answers_by_size`: batch size (above 0) -> answers that gave it. 0 when there are none.
inline double ItemsPerBatch(const std::map<int64_t, int64_t>& answers_by_size) {
  double answers = 0;
  double inverse_sum = 0;
  for (const auto& [size, n] : answers_by_size) {
    if (size <= 0 || n <= 0) continue;
    answers += static_cast<double>(n);
    inverse_sum += static_cast<double>(n) / static_cast<double>(size);
  }
  return inverse_sum > 0 ? answers / inverse_sum : 0.0;
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_BATCH_SIZES_H_
