// The dims the profiler gives each model input, and where they came from. A variable (-1) dim
// needs a value: `--shape NAME:d1,d2,...` (perf_analyzer's and chronobench's spelling: the dims
// without the batch dim), else the first model_warmup sample's dims for that input (what the
// server's serving warm-up sends), else the profile is refused, as perf_analyzer refuses it: a
// profile at an invented size would report numbers for a shape nobody serves. Pure functions.
#ifndef CHRONOSERVE_TOOLS_PROFILE_INPUT_SHAPES_H_
#define CHRONOSERVE_TOOLS_PROFILE_INPUT_SHAPES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/model_spec.h"
#include "tools/profile/profile_runs.h"

namespace chronoserve::profile {

struct InputShape {
  std::string name;
  std::vector<int64_t> dims;  // without the batch dim; every dim >= 1
  std::string source;         // "config", "--shape" or "model_warmup 'NAME'"
};

// The dims of every input of `spec`, in input order. INVALID_ARGUMENT when a --shape names no input
// of the model, has the wrong rank or contradicts a fixed dim, or when an input has a variable dim
// that neither a --shape nor the first model_warmup sample gives (the message names the model,
// the input and the flag to pass).
absl::StatusOr<std::vector<InputShape>> ResolveInputShapes(const server::ModelSpec& spec, const InputDims& shapes);

// The name -> dims map the synthetic batches take.
InputDims DimsOf(const std::vector<InputShape>& inputs);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_INPUT_SHAPES_H_
