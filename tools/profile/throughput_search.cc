#include "tools/profile/throughput_search.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::profile {

std::vector<int64_t> SearchSizes(int max_batch_size, int64_t max_batch) {
  if (max_batch_size <= 0) return {1};
  std::vector<int64_t> sizes;
  for (int64_t size = 1; size <= max_batch; size *= 2) {
    sizes.push_back(size);
    if (size > max_batch / 2) break;  // the next doubling would pass max_batch (and never overflows)
  }
  for (int64_t extra : {static_cast<int64_t>(max_batch_size), max_batch}) {
    if (extra >= 1 && extra <= max_batch) sizes.push_back(extra);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

ThroughputSearch SearchThroughput(server::ModelInstance& instance, const server::ModelSpec& spec,
                                  const InputDims& dims, const SearchOptions& options, std::mt19937_64& rng) {
  ThroughputSearch search;
  // A model that does not batch runs batch 1 only, whatever the limit asked for.
  search.search_max_batch = spec.max_batch_size > 0 ? options.max_batch : 1;
  search.stopped_by = spec.max_batch_size > 0
                          ? absl::StrCat("search limit (--search-max-batch ", options.max_batch, ")")
                          : "the model does not batch (max_batch_size 0)";
  for (int64_t size : SearchSizes(spec.max_batch_size, options.max_batch)) {
    // Past the server's bound on a synthetic request, the host's memory, not the model, would be
    // what the search measures (or takes down).
    const std::optional<int64_t> bytes = server::SyntheticRequestBytes(spec, size, dims);
    if (!bytes || *bytes > server::kMaxWarmupRequestBytes) {
      search.stopped_by = absl::StrCat("input bytes limit at batch size ", size, " (a batch's inputs may hold ",
                                       server::kMaxWarmupRequestBytes >> 30, " GiB)");
      break;
    }
    absl::StatusOr<std::vector<RunSample>> samples = [&]() -> absl::StatusOr<std::vector<RunSample>> {
      absl::StatusOr<std::unique_ptr<SyntheticBatch>> batch = MakeBatch(spec, size, dims, rng);
      if (!batch.ok()) return batch.status();
      absl::StatusOr<std::vector<RunSample>> warm = RunMany(instance, **batch, options.warmup_runs);
      if (!warm.ok()) return warm.status();
      return RunMany(instance, **batch, options.repetitions);
    }();
    if (!samples.ok()) {
      const bool memory = IsOutOfMemory(samples.status());
      if (memory) search.memory_limit_batch_size = size;
      search.stopped_by = absl::StrCat(memory ? "memory limit" : "error", " at batch size ", size);
      search.stop_error = std::string(samples.status().message());
      break;
    }
    const BatchProfile p = Summarise(size, *samples);
    search.points.push_back(
        {size, p.wall_us.median, p.items_per_s, spec.max_batch_size > 0 && size > spec.max_batch_size});
    if (p.items_per_s > search.best_items_per_s) {
      search.best_items_per_s = p.items_per_s;
      search.best_batch_size = size;
    }
  }
  return search;
}

}  // namespace chronoserve::profile
