// Exact device timing (a profiling mode, off by default): the worker holds its CUDA stream until
// it has enqueued a batch's copies, forward and events, then releases it, so the events time
// device work only instead of also counting the GPU waiting for the host to launch (TIMING.md
// lesson 4). This file holds what needs neither LibTorch nor CUDA, so CPU tests cover it: the
// config parameter, and which batches are held. The hold itself is cuda/stream_gate.h.
//
//   ASSIGN_OR_RETURN(bool exact, ExactDeviceTimingFromSpec(spec));
//   HoldSchedule holds(exact);
//   if (holds.ShouldHold(graph_bucket, items, input_bytes)) { /* hold, enqueue, release */ }
#ifndef CHRONOSERVE_SERVER_BACKEND_EXACT_DEVICE_TIMING_H_
#define CHRONOSERVE_SERVER_BACKEND_EXACT_DEVICE_TIMING_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/status/statusor.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// Config key: parameters { key: "exact_device_timing" value { string_value: "true" } }.
inline constexpr char kExactDeviceTimingKey[] = "exact_device_timing";

// parameters[exact_device_timing]: "true"/"false" (any case, surrounding blanks ignored; "1"/"0"
// too); absent = false. INVALID_ARGUMENT names the model, the key and the value.
absl::StatusOr<bool> ExactDeviceTimingFromSpec(const ModelSpec& spec);

// Which batches of one worker run with the stream held. A batch shape (CUDA-graph bucket or eager,
// items, staged input bytes) is held only from its (kUnheldRuns + 1)-th run: a shape's first runs
// load CUDA modules, let TorchScript profile and optimise, and grow the caching allocator and the
// pinned landing buffers, host work that may wait for the device and would then wait behind the
// held stream. Warm-up runs every batch size at least that often before READY, but TorchScript may
// still re-specialise a shape later (after other shapes ran): when a held run blocks the host and
// the watchdog breaks the hold, Broke() sends that shape back to unheld runs; after kMaxBreaks
// breaks holding stops for good. Worker thread only.
class HoldSchedule {
 public:
  static constexpr int kUnheldRuns = 2;
  // Shapes tracked at most (variable-dim inputs can make many); later new shapes are never held.
  static constexpr size_t kMaxShapes = 4096;
  static constexpr int kMaxBreaks = 3;

  explicit HoldSchedule(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Counts one run of the shape and says whether this run is held. `graph_bucket` < 0 = eager.
  bool ShouldHold(int graph_bucket, int64_t items, size_t input_bytes);
  void Disable() { enabled_ = false; }
  // The last shape ShouldHold() held had its hold broken: it runs unheld again for kUnheldRuns runs.
  // Returns whether holding stays on (false after kMaxBreaks breaks).
  bool Broke();

 private:
  bool enabled_;
  int breaks_ = 0;
  std::tuple<int, int64_t, size_t> last_held_{};
  std::map<std::tuple<int, int64_t, size_t>, int> runs_;  // runs seen per shape (up to kUnheldRuns)
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_EXACT_DEVICE_TIMING_H_
