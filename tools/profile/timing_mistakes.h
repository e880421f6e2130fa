// The four classic timing mistakes, each reproduced on the eager instance at one batch size and set
// beside the correct figure (ratio = mistaken / correct):
//   no warm-up            host wall time of a fresh instance's very first run / median wall after warm-up
//   host timer, no sync   host clock around the forward call alone (= launch) / median compute
//   includes the H2D copy CUDA events from before a copy of the inputs from pageable (malloc'd, not
//                         registered) memory to after the forward: h2d + compute of runs whose one
//                         cudaMemcpyAsync per input reads the request's own pageable bytes, on the
//                         instance's stream, as a program that times `x.to(device); model(x)` with
//                         events does / median compute (pinned staging). GPU only: on the CPU no copy
//                         exists, so the row is not applicable there, never a made-up figure
//   a single sample       compute of one randomly picked measured run / median compute
// Single-threaded.
#ifndef CHRONOSERVE_TOOLS_PROFILE_TIMING_MISTAKES_H_
#define CHRONOSERVE_TOOLS_PROFILE_TIMING_MISTAKES_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"
#include "tools/profile/profile_runs.h"

namespace chronoserve::profile {

// A naive figure next to the correct one for the same batch.
struct TimingMistake {
  std::string name;
  std::string what;            // what the mistaken figure measures
  bool measured = true;        // false: not applicable here or could not be reproduced (see note)
  std::string note;            // why not measured
  double mistaken_us = 0;      // 0 when not measured
  std::string correct_figure;
  double correct_us = 0;
  double ratio = 0;            // mistaken / correct; 0 when not measured
  std::map<std::string, double> details_us;  // figures behind the row (the copy row: pageable and pinned h2d)
};

// What the rows are built from, all at one batch size on the eager instance.
struct MistakeSamples {
  RunSample first;                  // the very first run of a fresh instance
  std::vector<RunSample> measured;  // after warm-up, inputs through the backend's pinned staging
  std::vector<RunSample> pageable;  // inputs copied from pageable memory; empty: not measured
  std::string pageable_note;        // why `pageable` is empty
  std::vector<RunSample> exact;     // the same size with the stream held (eager_exact); empty: not measured
};

// Runs `warmup_runs` then `repetitions` batches of `items` rows whose inputs the instance copies to
// the device straight from the synthetic request's own bytes (ordinary heap memory, not page-locked).
// FAILED_PRECONDITION when the instance staged them instead (so no pageable copy was timed) or
// does not time with device events.
absl::StatusOr<std::vector<RunSample>> RunPageable(server::ModelInstance& instance, const server::ModelSpec& spec,
                                                   int64_t items, const InputDims& dims, int warmup_runs,
                                                   int repetitions, std::mt19937_64& rng);

// The four rows, in the order above; `measured` must not be empty.
std::vector<TimingMistake> BuildMistakes(const MistakeSamples& samples, std::mt19937_64& rng);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_TIMING_MISTAKES_H_
