#include "tools/profile/model_profiler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"

namespace chronoserve::profile {
namespace {

using server::Batch;
using server::BatchTiming;
using server::ModelInstance;
using server::ModelSpec;

// One executed batch: the instance's spans plus the host wall time around Execute.
struct RunSample {
  BatchTiming timing;
  int64_t wall_ns = 0;
};

// A batch of one request holding `items` rows of random inputs (never zeros) and every output.
struct SyntheticBatch {
  Batch batch;
  std::vector<std::string> outputs;
};

std::unique_ptr<SyntheticBatch> MakeBatch(const ModelSpec& spec, int items, std::mt19937_64& rng) {
  auto b = std::make_unique<SyntheticBatch>();
  b->batch.push_back(server::MakeSyntheticRequest(spec, items, &b->outputs, rng));
  return b;
}

absl::StatusOr<RunSample> RunOnce(ModelInstance& instance, SyntheticBatch& batch) {
  RunSample s;
  const int64_t start = SteadyClock::Now();
  s.timing.dequeued_ns = start;
  RETURN_IF_ERROR(instance.Execute(batch.batch, &s.timing));
  s.wall_ns = SteadyClock::Now() - start;
  return s;
}

absl::StatusOr<std::vector<RunSample>> RunMany(ModelInstance& instance, SyntheticBatch& batch, int count) {
  std::vector<RunSample> samples;
  samples.reserve(count);
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(RunSample s, RunOnce(instance, batch));
    samples.push_back(s);
  }
  return samples;
}

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

template <typename Field>
Spread SpreadUs(const std::vector<RunSample>& samples, Field field) {
  std::vector<double> v;
  v.reserve(samples.size());
  for (const RunSample& s : samples) v.push_back(Us(field(s)));
  return SpreadOf(v);
}

BatchProfile Summarise(int batch_size, const std::vector<RunSample>& samples) {
  BatchProfile p;
  p.batch_size = batch_size;
  p.h2d_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.h2d_ns; });
  p.compute_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.compute_ns; });
  p.launch_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.launch_ns; });
  p.d2h_us = SpreadUs(samples, [](const RunSample& s) { return s.timing.d2h_ns; });
  p.wall_us = SpreadUs(samples, [](const RunSample& s) { return s.wall_ns; });
  p.items_per_s = p.wall_us.median > 0 ? batch_size * 1e6 / p.wall_us.median : 0;
  return p;
}

bool IsOutOfMemory(const absl::Status& status) {
  return absl::StrContains(absl::AsciiStrToLower(status.message()), "out of memory");
}

// The profiler's state for one model: its spec, device and the eager instance.
class Profiler {
 public:
  Profiler(ModelSpec spec, const ProfileOptions& options, int gpu)
      : spec_(std::move(spec)), options_(options), gpu_(gpu), rng_(options.seed),
        activity_(SteadyClock::Now()) {}

  absl::StatusOr<ProfileReport> Run() {
    ProfileReport report;
    report.model = spec_.name;
    report.max_batch_size = spec_.max_batch_size;
    report.warmup_runs = options_.warmup_runs;
    report.repetitions = options_.repetitions;
    ASSIGN_OR_RETURN(report.batch_sizes, ResolveBatchSizes(options_.batch_sizes, spec_.max_batch_size));
    report.mistakes_batch_size = options_.mistakes_batch_size > 0
                                     ? std::min(options_.mistakes_batch_size, std::max(spec_.max_batch_size, 1))
                                     : report.batch_sizes.front();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelInstance> eager, CreateInstance(spec_));
    report.device = eager->device_name();

    // The very first run of a fresh instance, before any warm-up: mistake (1).
    auto first_batch = MakeBatch(spec_, report.mistakes_batch_size, rng_);
    ASSIGN_OR_RETURN(RunSample first, RunOnce(*eager, *first_batch));
    report.device_timed = first.timing.device_timed;
    report.timing_note = report.device_timed
        ? "h2d/compute/d2h: CUDA events on the instance's stream; launch and wall: host steady clock"
        : "CPU: every figure is host-timed (steady clock); no device events";

    ModeProfile eager_mode;
    eager_mode.mode = "eager";
    std::vector<RunSample> mistakes_samples;
    ASSIGN_OR_RETURN(eager_mode.batches, ProfileSizes(*eager, report.batch_sizes, report.mistakes_batch_size,
                                                      &mistakes_samples, Mode::kEager));
    eager_mode.measured = true;
    report.modes.push_back(std::move(eager_mode));
    report.modes.push_back(ProfileGraphs(report.batch_sizes));
    report.modes.push_back(ProfileExact(report.batch_sizes));
    if (options_.throughput_search) report.throughput = SearchThroughput(*eager);
    if (mistakes_samples.empty()) {
      auto batch = MakeBatch(spec_, report.mistakes_batch_size, rng_);
      RETURN_IF_ERROR(RunMany(*eager, *batch, options_.warmup_runs).status());
      ASSIGN_OR_RETURN(mistakes_samples, RunMany(*eager, *batch, options_.repetitions));
    }
    report.mistakes = Mistakes(first, mistakes_samples, report.device_timed);
    return report;
  }

 private:
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
      batches[size] = MakeBatch(spec_, size, rng_);
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
  ModeProfile ProfileExact(const std::vector<int>& sizes) {
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
        instance.ok() ? ProfileSizes(**instance, sizes, 0, nullptr, Mode::kExact) : instance.status();
    if (!batches.ok()) {
      mode.note = absl::StrCat("not measured: ", batches.status().message());
      return mode;
    }
    mode.measured = true;
    mode.batches = *std::move(batches);
    mode.note = "exact device timing: stream held until each batch was enqueued, so compute/h2d/d2h are device "
                "time only; wall and latency include the hold";
    return mode;
  }

  ThroughputSearch SearchThroughput(ModelInstance& instance) {
    ThroughputSearch search;
    const int max_items = std::max(spec_.max_batch_size, 1);
    search.stopped_by = "max_batch_size";
    for (int size = 1;; size = std::min(size * 2, max_items)) {
      auto batch = MakeBatch(spec_, size, rng_);
      absl::StatusOr<std::vector<RunSample>> samples = RunMany(instance, *batch, options_.warmup_runs);
      if (samples.ok()) samples = RunMany(instance, *batch, options_.repetitions);
      if (!samples.ok()) {
        search.stopped_by = IsOutOfMemory(samples.status())
                                ? absl::StrCat("memory limit at batch size ", size)
                                : absl::StrCat("error at batch size ", size, ": ", samples.status().message());
        break;
      }
      const BatchProfile p = Summarise(size, *samples);
      search.points.push_back({size, p.wall_us.median, p.items_per_s});
      if (p.items_per_s > search.best_items_per_s) {
        search.best_items_per_s = p.items_per_s;
        search.best_batch_size = size;
      }
      if (size >= max_items) break;
    }
    return search;
  }

  std::vector<TimingMistake> Mistakes(const RunSample& first, const std::vector<RunSample>& samples,
                                      bool device_timed) {
    const BatchProfile p = Summarise(0, samples);
    std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
    const RunSample& one = samples[pick(rng_)];
    auto row = [](std::string name, std::string what, double mistaken, std::string correct_figure, double correct) {
      return TimingMistake{std::move(name), std::move(what), mistaken, std::move(correct_figure), correct,
                           correct > 0 ? mistaken / correct : 0};
    };
    const std::string compute = device_timed ? "median compute (CUDA events)" : "median compute (host)";
    return {
        row("no warm-up", "host wall time of the very first run of a fresh instance", Us(first.wall_ns),
            "median host wall time after warm-up", p.wall_us.median),
        row("host timer without synchronisation",
            device_timed ? "host clock around the forward call only (= launch)"
                         : "host clock around the forward call (CPU runs synchronously: expect ~1)",
            p.launch_us.median, compute, p.compute_us.median),
        row("includes the host-to-device copy",
            device_timed ? "approximation: median of h2d + compute from events (pinned staging, "
                           "not a pageable copy; a pageable copy costs ~3x the pinned h2d)"
                         : "median of h2d + compute (host; on the CPU the 'copy' is a memcpy)",
            Quantile([&] {
              std::vector<double> v;
              for (const RunSample& s : samples) v.push_back(Us(s.timing.h2d_ns + s.timing.compute_ns));
              return v;
            }(), 0.5),
            compute, p.compute_us.median),
        row("a single sample", "compute of one randomly picked measured run", Us(one.timing.compute_ns), compute,
            p.compute_us.median),
    };
  }

  const ModelSpec spec_;
  const ProfileOptions options_;
  const int gpu_;
  std::mt19937_64 rng_;
  server::DeviceActivity activity_;
};

}  // namespace

absl::StatusOr<std::vector<int>> ResolveBatchSizes(const std::string& list, int max_batch_size) {
  if (max_batch_size <= 0) return std::vector<int>{1};
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    int size = 0;
    if (part == "max") {
      size = max_batch_size;
    } else if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--batch-sizes: '", part, "' is not a positive integer or 'max'"));
    }
    sizes.push_back(std::min(size, max_batch_size));
  }
  if (sizes.empty()) return absl::InvalidArgumentError("--batch-sizes: empty list");
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

absl::StatusOr<ProfileReport> ProfileModel(const std::string& model_dir, const ProfileOptions& options) {
  if (options.repetitions < 1 || options.warmup_runs < 0) {
    return absl::InvalidArgumentError("repetitions must be >= 1 and warm-up runs >= 0");
  }
  ASSIGN_OR_RETURN(ModelSpec spec, server::LoadModelDirectory(model_dir));
  spec.cuda_graphs = false;  // eager first; graph and exact modes get their own instances
  spec.parameters.erase(server::kExactDeviceTimingKey);
  int gpu = options.gpu;
  if (gpu == -2) gpu = server::CudaDeviceCount() > 0 ? 0 : -1;
  if (gpu >= server::CudaDeviceCount()) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu ", gpu, ": this build sees ", server::CudaDeviceCount(),
                                                   " CUDA devices"));
  }
  Profiler profiler(std::move(spec), options, gpu);
  return profiler.Run();
}

}  // namespace chronoserve::profile
