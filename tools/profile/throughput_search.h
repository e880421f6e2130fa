// The throughput search: items/s of one instance (eager) at batch sizes doubled from 1 until the
// memory limit. It does not stop at the config's max_batch_size (the server never batches past it,
// but where the memory runs out says how much headroom that setting leaves): it goes on to
// `max_batch` and stops earlier at an allocation failure, anywhere — the device, LibTorch's CPU
// allocator or the host's own memory for the inputs — reported as "memory limit at batch size N".
// Sizes above max_batch_size are marked. The backend runs an eager batch of any size (only CUDA
// graphs are bounded by max_batch_size), so the instance is the one profiled, unchanged.
// Single-threaded.
#ifndef CHRONOSERVE_TOOLS_PROFILE_THROUGHPUT_SEARCH_H_
#define CHRONOSERVE_TOOLS_PROFILE_THROUGHPUT_SEARCH_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"
#include "tools/profile/profile_runs.h"

namespace chronoserve::profile {

inline constexpr int64_t kDefaultSearchMaxBatch = 4096;

struct SearchOptions {
  int64_t max_batch = kDefaultSearchMaxBatch;  // the largest size tried (measured even if no power of 2)
  int warmup_runs = 20;                        // per size, before measuring
  int repetitions = 200;                       // measured runs per size
};

struct ThroughputPoint {
  int64_t batch_size = 0;
  double wall_median_us = 0;
  double items_per_s = 0;
  bool above_max_batch_size = false;  // larger than the config's max_batch_size: the server never runs it
};

struct ThroughputSearch {
  std::vector<ThroughputPoint> points;
  int64_t best_batch_size = 0;
  double best_items_per_s = 0;
  int64_t search_max_batch = 0;         // the SearchOptions::max_batch it ran under
  int64_t memory_limit_batch_size = 0;  // the size that ran out of memory; 0 = none did
  // "memory limit at batch size N", "search limit (--search-max-batch N)", "the model does not
  // batch (max_batch_size 0)", "input bytes limit at batch size N (...)" or "error at batch size N"
  std::string stopped_by;
  std::string stop_error;  // the failing run's error (the allocator's message), for the last two kinds of stop
};

// The sizes tried, ascending: powers of two from 1, plus the config's max_batch_size and
// `max_batch` (each when within `max_batch` and not a power of two); {1} for a model that does
// not batch.
std::vector<int64_t> SearchSizes(int max_batch_size, int64_t max_batch);

// Runs the search on `instance` with synthetic batches of `spec` at `dims`.
ThroughputSearch SearchThroughput(server::ModelInstance& instance, const server::ModelSpec& spec,
                                  const InputDims& dims, const SearchOptions& options, std::mt19937_64& rng);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_THROUGHPUT_SEARCH_H_
