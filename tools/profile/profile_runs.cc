#include "tools/profile/profile_runs.h"

#include <new>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::profile {

absl::StatusOr<std::unique_ptr<SyntheticBatch>> MakeBatch(const server::ModelSpec& spec, int64_t items,
                                                          const InputDims& dims, std::mt19937_64& rng) {
  try {
    auto b = std::make_unique<SyntheticBatch>();
    b->batch.push_back(server::MakeSyntheticRequest(spec, items, &b->outputs, rng, dims));
    return b;
  } catch (const std::bad_alloc&) {
    // The throughput search doubles the batch until something gives: the host's memory is a limit
    // like the device's, reported the same way.
    return absl::ResourceExhaustedError(
        absl::StrCat("host memory for the inputs of a batch of ", items, " items: std::bad_alloc (out of memory)"));
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the inputs of a batch of ", items, " items are larger than one buffer can hold"));
  }
}

absl::StatusOr<RunSample> RunOnce(server::ModelInstance& instance, SyntheticBatch& batch) {
  RunSample s;
  const int64_t start = SteadyClock::Now();
  s.timing.dequeued_ns = start;
  RETURN_IF_ERROR(instance.Execute(batch.batch, &s.timing));
  s.wall_ns = SteadyClock::Now() - start;
  return s;
}

absl::StatusOr<std::vector<RunSample>> RunMany(server::ModelInstance& instance, SyntheticBatch& batch, int count) {
  std::vector<RunSample> samples;
  samples.reserve(count);
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(RunSample s, RunOnce(instance, batch));
    samples.push_back(s);
  }
  return samples;
}

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

namespace {

template <typename Field>
Spread SpreadUs(const std::vector<RunSample>& samples, Field field) {
  return SpreadOf(UsOf(samples, field));
}

}  // namespace

BatchProfile Summarise(int64_t batch_size, const std::vector<RunSample>& samples) {
  BatchProfile p;
  p.batch_size = batch_size;
  p.h2d_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.h2d_ns; });
  p.compute_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.compute_ns; });
  p.launch_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.launch_ns; });
  p.d2h_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.d2h_ns; });
  p.wall_us = SpreadUs(samples, [](const RunSample& s) { return s.wall_ns; });
  p.items_per_s = p.wall_us.median > 0 ? static_cast<double>(batch_size) * 1e6 / p.wall_us.median : 0;
  return p;
}

bool IsOutOfMemory(const absl::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.message());
  for (const char* sign : {"out of memory", "can't allocate memory", "cannot allocate memory", "bad_alloc",
                           "cudaerrormemoryallocation"}) {
    if (absl::StrContains(message, sign)) return true;
  }
  return false;
}

}  // namespace chronoserve::profile
