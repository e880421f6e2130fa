// ModelProfiler: the careful timing methodology for one model directory, offline (no gRPC, no
// scheduler): loads the model through the real backend (LoadModelDirectory + CreateTorchInstance),
// gives every input its dims (input_shapes.h: variable dims from --shape or the first model_warmup
// sample, else refused), warms it up at every batch size, then times `repetitions` runs per batch
// size and reports the median and p10/p90 of each span (h2d / compute / launch / d2h: CUDA events
// on a GPU, host clock on the CPU) and of the host wall time around Execute; the same with CUDA
// graphs on a GPU, and eager with exact device timing (stream held until the batch is enqueued:
// device time only); a throughput search (throughput_search.h: batch size doubled from 1 past
// max_batch_size until the memory limit or --search-max-batch); and the four classic timing
// mistakes (timing_mistakes.h) next to the correct figure. Single-threaded; the caller owns the
// report.
//
//   ProfileOptions options;  options.repetitions = 200;
//   absl::StatusOr<ProfileReport> report = ProfileModel("models/policy_net", options);
//   PrintReport(*report, std::cout);  WriteJson(*report, "profile.json");   // profile_report.h
#ifndef CHRONOSERVE_TOOLS_PROFILE_MODEL_PROFILER_H_
#define CHRONOSERVE_TOOLS_PROFILE_MODEL_PROFILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/profile/input_shapes.h"
#include "tools/profile/profile_runs.h"
#include "tools/profile/throughput_search.h"
#include "tools/profile/timing_mistakes.h"

namespace chronoserve::profile {

struct ProfileOptions {
  std::string batch_sizes = "1,8,32,max";  // comma-separated; "max" = max_batch_size; clipped to it
  int warmup_runs = 20;                    // per batch size, before anything is measured
  int repetitions = 200;                   // measured runs per batch size (and per search step)
  int gpu = -2;                            // CUDA ordinal; -1 = CPU; -2 = GPU 0 when present, else CPU
  bool cuda_graphs = true;                 // also measure CUDA-graph replay (GPU only)
  bool exact_device_timing = true;         // also measure eager with the stream held (GPU only)
  bool throughput_search = true;
  // The throughput search's largest batch size; 0: kDefaultSearchMaxBatch on a GPU (the search is
  // there to find the device's memory limit), max_batch_size on the CPU (where sizes past it cost
  // minutes and the host may kill the process before an allocation fails).
  int64_t search_max_batch = 0;
  int mistakes_batch_size = 0;             // 0: the largest profiled batch size
  InputDims shapes;                        // --shape NAME:d1,d2,...: dims (without batch) per input
  uint64_t seed = 1;                       // random inputs (never zeros) and the "single sample" pick
  // The version to profile, one its version policy serves; 0: the highest (a request's default).
  int64_t model_version = 0;
};

struct ModeProfile {
  std::string mode;      // "eager", "cuda_graph" or "eager_exact"
  bool measured = false;
  std::string note;      // why not measured, or caveats
  std::vector<BatchProfile> batches;
};

struct ProfileReport {
  std::string model;
  int64_t version = 0;      // the version profiled
  std::string device;       // "cuda:0" / "cpu"
  bool device_timed = false;  // spans from CUDA events; false = host clock (CPU)
  std::string timing_note;
  int max_batch_size = 0;
  std::vector<InputShape> inputs;  // the dims every synthetic batch gives each input, and their source
  int warmup_runs = 0;
  int repetitions = 0;
  std::vector<int> batch_sizes;
  std::vector<ModeProfile> modes;  // eager first, then cuda_graph, then eager_exact
  ThroughputSearch throughput;
  int mistakes_batch_size = 0;
  std::vector<TimingMistake> mistakes;
};

// Parses "1,8,32,max" against max_batch_size (0: the model does not batch, so {1} for any valid
// list): sizes above the maximum are clipped to it; ascending and distinct. INVALID_ARGUMENT for a
// bad entry, whatever max_batch_size is.
absl::StatusOr<std::vector<int>> ResolveBatchSizes(const std::string& list, int max_batch_size);

// Profiles the model in `model_dir` (a Triton-layout model directory: config.pbtxt + <version>/model.pt).
absl::StatusOr<ProfileReport> ProfileModel(const std::string& model_dir, const ProfileOptions& options);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_MODEL_PROFILER_H_
