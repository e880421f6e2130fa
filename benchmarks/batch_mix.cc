#include "benchmarks/batch_mix.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chronoserve::bench {
namespace {
// Bounds each size's batches so that the schedule's sums (at most 128 sizes on a batching model)
// stay far inside int64.
constexpr int64_t kMaxMixBatches = 1'000'000'000'000;
}  // namespace

absl::StatusOr<std::map<int64_t, int64_t>> ParseBatchMix(const std::string& text, int max_batch_size) {
  std::map<int64_t, int64_t> mix;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    int64_t size = 0, batches = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &size) || !absl::SimpleAtoi(parts[1], &batches) ||
        size < 1 || batches < 1 || batches > kMaxMixBatches || (max_batch_size > 0 && size > max_batch_size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch-mix '", text, "': '", entry, "' is not SIZE:BATCHES with 1 <= SIZE",
          max_batch_size > 0 ? absl::StrCat(" <= max_batch_size ", max_batch_size) : "", " and 1 <= BATCHES <= ",
          kMaxMixBatches));
    }
    if ((mix[size] += batches) > kMaxMixBatches) {
      return absl::InvalidArgumentError(absl::StrCat("--batch-mix '", text, "': more than ", kMaxMixBatches,
                                                     " batches of size ", size));
    }
  }
  return mix;
}

std::vector<int64_t> MixSchedule(const std::map<int64_t, int64_t>& mix, int count) {
  std::vector<int64_t> sizes;
  if (mix.empty() || count <= 0) return sizes;
  int64_t total = 0;
  for (const auto& [size, batches] : mix) total += batches;
  std::map<int64_t, int64_t> credit;
  sizes.reserve(count);
  for (int i = 0; i < count; ++i) {
    int64_t next = 0, most = std::numeric_limits<int64_t>::min();
    for (const auto& [size, batches] : mix) {
      if ((credit[size] += batches) > most) most = credit[size], next = size;
    }
    credit[next] -= total;
    sizes.push_back(next);
  }
  return sizes;
}

}  // namespace chronoserve::bench
