// The profiler's building blocks: a synthetic batch (one request of `items` rows of random inputs,
// never zeros), one timed Execute (the instance's spans plus the host wall time around it), many of
// them, and their per-span spread. Shared by the modes, the throughput search and the timing
// mistakes. Single-threaded: one caller drives one instance.
#ifndef CHRONOSERVE_TOOLS_PROFILE_PROFILE_RUNS_H_
#define CHRONOSERVE_TOOLS_PROFILE_PROFILE_RUNS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"
#include "tools/profile/sample_spread.h"

namespace chronoserve::profile {

// Per input name: the dims (without the batch dim) every synthetic request gives it.
using InputDims = std::map<std::string, std::vector<int64_t>>;

// One executed batch: the instance's spans plus the host wall time around Execute.
struct RunSample {
  server::BatchTiming timing;
  int64_t wall_ns = 0;
};

// A batch of one request and the strings its outputs are written into.
struct SyntheticBatch {
  server::Batch batch;
  std::vector<std::string> outputs;
};

// One batch size in one mode; every figure in microseconds.
struct BatchProfile {
  int64_t batch_size = 0;
  Spread h2d_us, compute_us, launch_us, d2h_us, wall_us;
  double items_per_s = 0;  // batch_size / median wall time
};

// A batch of `items` rows (ignored when the model does not batch) with every input at `dims`.
// RESOURCE_EXHAUSTED ("out of memory") when the host cannot allocate its bytes.
absl::StatusOr<std::unique_ptr<SyntheticBatch>> MakeBatch(const server::ModelSpec& spec, int64_t items,
                                                          const InputDims& dims, std::mt19937_64& rng);

absl::StatusOr<RunSample> RunOnce(server::ModelInstance& instance, SyntheticBatch& batch);
absl::StatusOr<std::vector<RunSample>> RunMany(server::ModelInstance& instance, SyntheticBatch& batch, int count);

double Us(int64_t ns);
// `field(sample)` (nanoseconds) of every sample, in microseconds.
template <typename Field>
std::vector<double> UsOf(const std::vector<RunSample>& samples, Field field) {
  std::vector<double> v;
  v.reserve(samples.size());
  for (const RunSample& s : samples) v.push_back(Us(field(s)));
  return v;
}
BatchProfile Summarise(int64_t batch_size, const std::vector<RunSample>& samples);

// An allocation failure, from any allocator the profiler reaches: LibTorch's CUDA caching allocator
// ("CUDA out of memory"), a CUDA runtime call (cudaErrorMemoryAllocation), LibTorch's CPU allocator
// ("DefaultCPUAllocator: can't allocate memory") or the host's new (std::bad_alloc).
bool IsOutOfMemory(const absl::Status& status);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_PROFILE_RUNS_H_
