#include "tools/profile/model_profiler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "server/backend/cuda_graph_buckets.h"
#include "server/backend/device_activity.h"
#include "server/backend/exact_device_timing.h"
#include "server/backend/torch_backend.h"
#include "server/repository/model_config_loader.h"

namespace chronoserve::profile {
namespace {

using server::ModelInstance;
using server::ModelSpec;

// The profiler's state for one model: its spec, device and the eager instance.
class Profiler {
 public:
  Profiler(ModelSpec spec, const ProfileOptions& options, int gpu)
      : spec_(std::move(spec)), options_(options), gpu_(gpu), rng_(options.seed),
        activity_(SteadyClock::Now()) {}

  absl::StatusOr<ProfileReport> Run() {
    ProfileReport report;
    report.model = spec_.name;
    report.version = spec_.version;
    report.max_batch_size = spec_.max_batch_size;
    report.warmup_runs = options_.warmup_runs;
    report.repetitions = options_.repetitions;
    ASSIGN_OR_RETURN(report.inputs, ResolveInputShapes(spec_, options_.shapes));
    dims_ = DimsOf(report.inputs);
    ASSIGN_OR_RETURN(report.batch_sizes, ResolveBatchSizes(options_.batch_sizes, spec_.max_batch_size));
    // The largest size by default: there the device work is likeliest to outlast the host's launch.
    // At small sizes an eager model is launch-bound, events on its idle stream count the launches
    // too, and the "host timer" row shows no mistake (~1x).
    report.mistakes_batch_size =
        options_.mistakes_batch_size > 0 ? options_.mistakes_batch_size : report.batch_sizes.back();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelInstance> eager, CreateInstance(spec_));
    report.device = eager->device_name();

    MistakeSamples mistakes;
    RETURN_IF_ERROR(ProfileEager(*eager, &report, &mistakes));
    report.modes.push_back(ProfileGraphs(report.batch_sizes));
    report.modes.push_back(ProfileExact(report.batch_sizes, report.mistakes_batch_size, &mistakes.exact));
    // Last: it may end at the memory limit, after which nothing else should be measured.
    if (options_.throughput_search) {
      // On a GPU past max_batch_size (at least twice it), so max_batch_size itself is always tried.
      const int64_t search_max_batch =
          options_.search_max_batch > 0 ? options_.search_max_batch
          : eager->gpu() >= 0 ? std::max<int64_t>(kDefaultSearchMaxBatch, 2 * static_cast<int64_t>(spec_.max_batch_size))
                              : std::max<int64_t>(spec_.max_batch_size, 1);
      report.throughput = SearchThroughput(
          *eager, spec_, dims_, SearchOptions{search_max_batch, options_.warmup_runs, options_.repetitions}, rng_);
    }
    report.mistakes = BuildMistakes(mistakes, rng_);
    return report;
  }

 private:
  // The eager mode, and every sample the timing mistakes need, on the one eager instance: its very
  // first run (before any warm-up), the measured runs at the mistakes' batch size, and (GPU) the
  // same size with its inputs copied from pageable memory.
  absl::Status ProfileEager(ModelInstance& eager, ProfileReport* report, MistakeSamples* mistakes) {
    const int size = report->mistakes_batch_size;
    ASSIGN_OR_RETURN(std::unique_ptr<SyntheticBatch> first_batch, MakeBatch(spec_, size, dims_, rng_));
    ASSIGN_OR_RETURN(mistakes->first, RunOnce(eager, *first_batch));
    report->device_timed = mistakes->first.timing.device_timed;
    report->timing_note = report->device_timed
        ? "h2d/compute/d2h: CUDA events on the instance's stream; launch and wall: host steady clock"
        : "CPU: every figure is host-timed (steady clock); no device events";

    ModeProfile mode;
    mode.mode = "eager";
    ASSIGN_OR_RETURN(mode.batches,
                     ProfileSizes(eager, report->batch_sizes, size, &mistakes->measured, Mode::kEager));
    mode.measured = true;
    report->modes.push_back(std::move(mode));
    if (mistakes->measured.empty()) {  // --mistakes-batch-size names a size not profiled
      ASSIGN_OR_RETURN(std::unique_ptr<SyntheticBatch> batch, MakeBatch(spec_, size, dims_, rng_));
      RETURN_IF_ERROR(RunMany(eager, *batch, options_.warmup_runs).status());
      ASSIGN_OR_RETURN(mistakes->measured, RunMany(eager, *batch, options_.repetitions));
    }
    if (report->device_timed) {
      absl::StatusOr<std::vector<RunSample>> pageable =
          RunPageable(eager, spec_, size, dims_, options_.warmup_runs, options_.repetitions, rng_);
      if (pageable.ok()) {
        mistakes->pageable = *std::move(pageable);
      } else {
        mistakes->pageable_note = absl::StrCat("not measured: ", pageable.status().message());
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(const ModelSpec& spec) {
    server::InstanceOptions o;
    o.gpu = gpu_;
    o.activity = &activity_;
    return server::CreateTorchInstance(spec, o);
  }

  enum class Mode { kEager, kGraph, kExact };

  // Every sample ran as `mode` says (a graph replay; a held stream).
  static absl::Status CheckSamples(const std::vector<RunSample>& samples, Mode mode, int size) {
    for (const RunSample& s : samples) {
      if (mode == Mode::kGraph && !s.timing.cuda_graph) {
        return absl::FailedPreconditionError(absl::StrCat("batch size ", size, " ran eager (not captured)"));
      }
      if (mode == Mode::kExact && !s.timing.exact_device_timing) {
        return absl::FailedPreconditionError(absl::StrCat(
            "batch size ", size, " ran without the stream held (a hold outlived its watchdog: see the log)"));
      }
    }
    return absl::OkStatus();
  }

  // Warm-up at every size first (so no size is measured before all have run), then measure.
  absl::StatusOr<std::vector<BatchProfile>> ProfileSizes(ModelInstance& instance, const std::vector<int>& sizes,
                                                         int mistakes_size, std::vector<RunSample>* mistakes,
                                                         Mode mode) {
    const bool graph = mode == Mode::kGraph;
    // A shape's first runs are never held (HoldSchedule): in exact mode they are warm-up at least.
    const int warmup_runs = mode == Mode::kExact ? std::max(options_.warmup_runs, server::HoldSchedule::kUnheldRuns)
                                                 : options_.warmup_runs;
    std::map<int, std::unique_ptr<SyntheticBatch>> batches;
    for (int size : sizes) {
      ASSIGN_OR_RETURN(batches[size], MakeBatch(spec_, size, dims_, rng_));
      RETURN_IF_ERROR(RunMany(instance, *batches[size], warmup_runs).status());
    }
    if (graph) RETURN_IF_ERROR(instance.PrepareForServing());
    std::vector<BatchProfile> out;
    for (int size : sizes) {
      // Graph replay is warmed too: the first replays after capture are not representative.
      if (graph) RETURN_IF_ERROR(RunMany(instance, *batches[size], options_.warmup_runs).status());
      ASSIGN_OR_RETURN(std::vector<RunSample> samples, RunMany(instance, *batches[size], options_.repetitions));
      RETURN_IF_ERROR(CheckSamples(samples, mode, size));
      if (size == mistakes_size && mistakes != nullptr) *mistakes = samples;
      out.push_back(Summarise(size, samples));
    }
    return out;
  }

  ModeProfile ProfileGraphs(const std::vector<int>& sizes) {
    ModeProfile mode;
    mode.mode = "cuda_graph";
    if (gpu_ < 0) {
      mode.note = "CPU: CUDA graphs need a GPU";
      return mode;
    }
    if (!options_.cuda_graphs) {
      mode.note = "disabled (--no-graphs)";
      return mode;
    }
    if (!server::HasStaticInputShapes(spec_)) {
      mode.note = "an input has variable dims: not capturable";
      return mode;
    }
    ModelSpec spec = spec_;
    spec.cuda_graphs = true;
    if (spec.max_batch_size > 0) spec.parameters[server::kGraphBatchSizesKey] = absl::StrJoin(sizes, ",");
    auto instance = CreateInstance(spec);
    absl::StatusOr<std::vector<BatchProfile>> batches =
        instance.ok() ? ProfileSizes(**instance, sizes, 0, nullptr, Mode::kGraph) : instance.status();
    if (!batches.ok()) {
      mode.note = absl::StrCat("not captured: ", batches.status().message());
      return mode;
    }
    mode.measured = true;
    mode.batches = *std::move(batches);
    mode.note = "captured at exactly these batch sizes (no padding); h2d/d2h as in eager";
    return mode;
  }

  // Eager with the stream held until each batch is enqueued: h2d/compute/d2h are device time only.
  // `*exact_at_mistakes` gets the samples at `mistakes_size`: device-only compute, the "host timer"
  // mistake's correct figure.
  ModeProfile ProfileExact(const std::vector<int>& sizes, int mistakes_size, std::vector<RunSample>* exact_at_mistakes) {
    ModeProfile mode;
    mode.mode = "eager_exact";
    if (gpu_ < 0) {
      mode.note = "CPU: host timers, nothing to hold; exact device timing needs a GPU";
      return mode;
    }
    if (!options_.exact_device_timing) {
      mode.note = "disabled (--no-exact-timing)";
      return mode;
    }
    ModelSpec spec = spec_;
    spec.parameters[server::kExactDeviceTimingKey] = "true";
    auto instance = CreateInstance(spec);
    absl::StatusOr<std::vector<BatchProfile>> batches =
        instance.ok() ? ProfileSizes(**instance, sizes, mistakes_size, exact_at_mistakes, Mode::kExact)
                      : instance.status();
    if (batches.ok() && std::find(sizes.begin(), sizes.end(), mistakes_size) == sizes.end()) {
      // --mistakes-batch-size names a size not profiled: measured on its own (warmed and checked as
      // the others), as eager's is; failing that, the row falls back and says why.
      absl::StatusOr<std::vector<BatchProfile>> alone =
          ProfileSizes(**instance, {mistakes_size}, mistakes_size, exact_at_mistakes, Mode::kExact);
      if (!alone.ok()) exact_at_mistakes->clear();
    }
    if (!batches.ok()) {
      exact_at_mistakes->clear();  // a mode not measured lends the mistakes table nothing
      mode.note = absl::StrCat("not measured: ", batches.status().message());
      return mode;
    }
    mode.measured = true;
    mode.batches = *std::move(batches);
    mode.note = "exact device timing: stream held until each batch was enqueued, so compute/h2d/d2h are device "
                "time only; wall and latency include the hold";
    return mode;
  }

  const ModelSpec spec_;
  const ProfileOptions options_;
  const int gpu_;
  InputDims dims_;  // every input's dims (without the batch dim), resolved once in Run()
  std::mt19937_64 rng_;
  server::DeviceActivity activity_;
};

}  // namespace

absl::StatusOr<std::vector<int>> ResolveBatchSizes(const std::string& list, int max_batch_size) {
  std::vector<int> sizes;
  if (absl::StripAsciiWhitespace(list).empty()) return absl::InvalidArgumentError("--batch-sizes: empty list");
  // An empty entry ("1,,2", a trailing comma) is a typo, not a shorter list.
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int64_t size = 0;
    if (part.empty()) return absl::InvalidArgumentError(absl::StrCat("--batch-sizes '", list, "': an empty entry"));
    if (part == "max") {
      size = max_batch_size;
    } else if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--batch-sizes: '", part, "' is not a positive integer or 'max'"));
    }
    sizes.push_back(static_cast<int>(std::min<int64_t>(size, max_batch_size)));  // larger: clipped
  }
  if (max_batch_size <= 0) return std::vector<int>{1};  // a valid list, but the model has one shape
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

absl::StatusOr<ProfileReport> ProfileModel(const std::string& model_dir, const ProfileOptions& options) {
  if (options.repetitions < 1 || options.warmup_runs < 0) {
    return absl::InvalidArgumentError("repetitions must be >= 1 and warm-up runs >= 0");
  }
  ASSIGN_OR_RETURN(std::vector<ModelSpec> versions, server::LoadModelVersions(model_dir));
  ModelSpec spec = versions.back();  // the highest, a request's default
  if (options.model_version != 0) {
    auto it = std::find_if(versions.begin(), versions.end(),
                           [&](const ModelSpec& v) { return v.version == options.model_version; });
    if (it == versions.end()) {
      std::vector<int64_t> served;
      for (const ModelSpec& v : versions) served.push_back(v.version);
      return absl::NotFoundError(absl::StrCat("--model-version ", options.model_version, ": model '", spec.name,
                                              "' serves version(s) ", absl::StrJoin(served, ", "),
                                              " (its version_policy and version directories)"));
    }
    spec = *it;
  }
  RETURN_IF_ERROR(server::CheckModelFile(spec));
  spec.cuda_graphs = false;  // eager first; graph and exact modes get their own instances
  spec.parameters.erase(server::kExactDeviceTimingKey);
  int gpu = options.gpu;
  if (gpu == -2) gpu = server::CudaDeviceCount() > 0 ? 0 : -1;
  const int largest = std::max(spec.max_batch_size, 1);
  if (options.mistakes_batch_size > largest) {
    return absl::InvalidArgumentError(absl::StrCat("--mistakes-batch-size ", options.mistakes_batch_size, ": model '",
                                                   spec.name, "' runs batches of 1 to ", largest, " (max_batch_size ",
                                                   spec.max_batch_size, ")"));
  }
  if (gpu >= server::CudaDeviceCount()) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu ", gpu, ": this build sees ", server::CudaDeviceCount(),
                                                   " CUDA devices"));
  }
  Profiler profiler(std::move(spec), options, gpu);
  return profiler.Run();
}

}  // namespace chronoserve::profile
