#include "tools/profile/timing_mistakes.h"

#include <utility>

#include "common/status_macros.h"

namespace chronoserve::profile {
namespace {

template <typename Field>
double MedianUs(const std::vector<RunSample>& samples, Field field) {
  return Quantile(UsOf(samples, field), 0.5);
}

TimingMistake Row(std::string name, std::string what, double mistaken, std::string correct_figure, double correct) {
  TimingMistake m;
  m.name = std::move(name);
  m.what = std::move(what);
  m.mistaken_us = mistaken;
  m.correct_figure = std::move(correct_figure);
  m.correct_us = correct;
  m.ratio = correct > 0 ? mistaken / correct : 0;
  return m;
}

TimingMistake CopyRow(const MistakeSamples& s, const std::string& compute, double compute_us) {
  const auto h2d = [](const RunSample& r) { return r.timing.h2d_ns; };
  const bool device_timed = s.first.timing.device_timed;
  const bool measured = device_timed && !s.pageable.empty();
  const double mistaken_us =
      measured ? MedianUs(s.pageable, [](const RunSample& r) { return r.timing.h2d_ns + r.timing.compute_ns; }) : 0;
  TimingMistake m = Row("includes the host-to-device copy",
                        "CUDA events from before a copy of the inputs from pageable (malloc'd) memory to after the "
                        "forward (median h2d + compute)",
                        mistaken_us, compute, compute_us);
  if (!measured) {
    m.measured = false;
    m.note = !device_timed ? "not applicable on the CPU: the model reads its inputs where they lie, there is no "
                             "host-to-device copy to include"
                           : s.pageable_note;
    return m;
  }
  m.details_us["pageable_h2d_us"] = MedianUs(s.pageable, h2d);
  m.details_us["pinned_h2d_us"] = MedianUs(s.measured, h2d);
  return m;
}

}  // namespace

absl::StatusOr<std::vector<RunSample>> RunPageable(server::ModelInstance& instance, const server::ModelSpec& spec,
                                                   int64_t items, const InputDims& dims, int warmup_runs,
                                                   int repetitions, std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(std::unique_ptr<SyntheticBatch> batch, MakeBatch(spec, items, dims, rng));
  // host_pinned tells the backend it may DMA straight from `data` (a one-request batch's pinned
  // shared-memory input takes that path) instead of gathering it into its pinned staging first.
  // The bytes are the request's own heap string: pageable. cudaMemcpyAsync accepts pageable memory
  // (the driver stages it through its own buffer, as `tensor.to(device)` from ordinary memory does),
  // so this is the naive program's copy, on the instance's stream, timed by its h2d events.
  for (server::InputTensor& in : batch->batch.front()->inputs) in.host_pinned = true;
  RETURN_IF_ERROR(RunMany(instance, *batch, warmup_runs).status());
  ASSIGN_OR_RETURN(std::vector<RunSample> samples, RunMany(instance, *batch, repetitions));
  for (const RunSample& s : samples) {
    if (!s.timing.device_timed) {
      return absl::FailedPreconditionError("the instance does not time with CUDA events: no device copy to time");
    }
    if (!s.timing.inputs_in_place) {
      return absl::FailedPreconditionError(
          "the backend staged the inputs in pinned memory instead of copying them from where they lay: no "
          "pageable copy was timed");
    }
  }
  return samples;
}

std::vector<TimingMistake> BuildMistakes(const MistakeSamples& s, std::mt19937_64& rng) {
  const BatchProfile p = Summarise(0, s.measured);
  std::uniform_int_distribution<size_t> pick(0, s.measured.size() - 1);
  const RunSample& one = s.measured[pick(rng)];
  const std::string compute = s.first.timing.device_timed ? "median compute (CUDA events)" : "median compute (host)";
  // Events on an idle stream also count the device waiting for the host's launches (TIMING.md,
  // lesson 4): for a launch-bound model that "compute" is itself mostly launch. The device's own
  // time, with the stream held until the batch was enqueued, is what the host timer is set against.
  const bool device_only = !s.exact.empty();
  constexpr char kDeviceOnly[] = "median compute with the stream held (device time only, eager_exact)";
  const double exact_compute_us =
      device_only ? MedianUs(s.exact, [](const RunSample& r) { return r.timing.compute_ns; }) : 0;
  return {
      Row("no warm-up", "host wall time of the very first run of a fresh instance", Us(s.first.wall_ns),
          "median host wall time after warm-up", p.wall_us.median),
      Row("host timer without synchronisation",
          s.first.timing.device_timed ? "host clock around the forward call only (= launch)"
                                      : "host clock around the forward call (CPU runs synchronously: expect ~1)",
          p.launch_us.median, device_only ? kDeviceOnly : compute, device_only ? exact_compute_us : p.compute_us.median),
      CopyRow(s, compute, p.compute_us.median),
      Row("a single sample", "compute of one randomly picked measured run", Us(one.timing.compute_ns), compute,
          p.compute_us.median),
  };
}

}  // namespace chronoserve::profile
