// ModelInstance: one worker's private executor for one model: the model's weights resident on its
// device, its CUDA stream, pinned staging buffers and events (on GPU), or host buffers and host
// timers (on CPU). Owned by exactly one Worker and called only from that worker's thread.
//
//   worker: (warm-up: Execute at every batch size) -> PrepareForServing()   // CUDA graphs captured
//           batch = queue.NextBatch(); timing.dequeued_ns = now;
//           instance->Execute(batch, &timing);   // gather -> H2D -> forward -> D2H -> scatter
//           while idle (keep_warm_ms): instance->KeepWarm();
#ifndef CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_
#define CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_

#include <string>

#include "absl/status/status.h"
#include "server/core/infer_request.h"
#include "server/core/timeline.h"

namespace chronoserve::server {

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // Runs one batch of requests whose inputs share per-item shapes. On OK every request's outputs
  // (data, shape) and timeline.output_done_ns are filled and `timing` holds the batch's spans and
  // attributes (dequeued_ns, worker and cold are the caller's). On error no output is valid and
  // the message names the model, the tensor and what was expected.
  virtual absl::Status Execute(Batch& batch, BatchTiming* timing) = 0;

  // Called once by the worker after its warm-up and before it serves: captures the model's CUDA
  // graphs where the config asks for them and makes keep-warm's resident input. Default: nothing.
  virtual absl::Status PrepareForServing() { return absl::OkStatus(); }

  // Keep-warm: runs the model once on a resident dummy input (its smallest CUDA graph where one was
  // captured) on this instance's stream and waits for it (an event, never a device-wide sync). Not
  // a request: no timing, no statistics, no device idle tracking. Default: UNIMPLEMENTED.
  virtual absl::Status KeepWarm() {
    return absl::UnimplementedError("this instance has no keep-warm run");
  }

  // CUDA device ordinal, or -1 on CPU.
  virtual int gpu() const = 0;
  // "cuda:0" or "cpu", for logs.
  virtual std::string device_name() const = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_
