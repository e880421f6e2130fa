// ModelInstance: one worker's private executor for one model: the model's weights resident on its
// device, its CUDA stream, pinned staging buffers and events (on GPU), or host buffers and host
// timers (on CPU). Owned by exactly one Worker and called only from that worker's thread.
//
//   worker: (warm-up: Execute at every batch size) -> PrepareForServing()   // CUDA graphs captured
//           batch = queue.NextBatch(); timing.dequeued_ns = now;
//           instance->Execute(batch, &timing);   // gather -> H2D -> forward -> D2H -> scatter
//           while idle (keep_warm_ms): instance->KeepWarm();
//
// Pipelined (pipeline_depth() == 2, a GPU instance): the worker launches the next batch before it
// finishes the one in flight, so the host's gather and launch of batch N+1 and the scatter of batch
// N overlap the device work, and N+1's host-to-device copy runs on a copy stream beside N's
// compute:
//           instance->Launch(batch1, &t1, slot 0);   // gather -> H2D -> forward -> D2H enqueued
//           instance->Launch(batch2, &t2, slot 1);   // the queue had more: behind batch1
//           instance->Finish(batch1, &t1, slot 0);   // wait for batch1's last event, scatter
//           ...
// Before it takes a batch, the worker asks LaunchedDone(slot) of the one in flight; a batch already
// done on the device is finished first, and the next one launched on the idle stream.
#ifndef CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_
#define CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/infer_request.h"
#include "server/core/input_arena.h"
#include "server/core/timeline.h"

namespace chronoserve::server {

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // Runs one batch of requests whose inputs share per-item shapes. On OK every request's outputs
  // (data, shape) and timeline.output_done_ns are filled and `timing` holds the batch's spans and
  // attributes (dequeued_ns, worker and cold are the caller's). On error no output is valid and
  // the message names the model, the tensor and what was expected.
  //
  // Every error an instance returns (from any method) begins with its context, e.g. "model 'm'
  // worker 0 on cuda:0: ", so callers add only what they were doing ("warm-up at batch size 4: ").
  virtual absl::Status Execute(Batch& batch, BatchTiming* timing) = 0;

  // Batches this instance can have in flight at once: 1 = Execute() only; 2 = Launch()/Finish().
  virtual int pipeline_depth() const { return 1; }
  // Enqueues `batch`'s device work into `slot` (0 .. pipeline_depth() - 1, a slot that is not in
  // flight) and returns without waiting for it. On error nothing of the batch is in flight and no
  // output is valid. The instance keeps no pointer to `batch` or `timing` (they may move before
  // Finish): Finish(slot) is given the same batch, whose requests must live until then.
  virtual absl::Status Launch(Batch& batch, BatchTiming* timing, int slot) {
    (void)batch, (void)timing, (void)slot;
    return absl::UnimplementedError("this instance does not pipeline batches");
  }
  // Waits for the batch launched into `slot` and completes it as Execute() would (outputs,
  // output_done_ns, the batch's spans in `timing`). Call once per successful Launch, in launch order.
  virtual absl::Status Finish(Batch& batch, BatchTiming* timing, int slot) {
    (void)batch, (void)timing, (void)slot;
    return absl::UnimplementedError("this instance does not pipeline batches");
  }

  // Whether the device work of the batch launched into `slot` has completed: a query that never
  // waits (a CUDA event query). False when it has not, when nothing is in flight there, or when
  // the instance cannot tell; true on a device error, which Finish then reports against that
  // batch (not the next launch). The pipelined worker asks before it takes its next batch, and
  // finishes a batch already done first: its answer then does not wait for the host to launch the
  // batch behind it. Default: false.
  virtual bool LaunchedDone(int slot) {
    (void)slot;
    return false;
  }

  // The batch sizes this instance will replay as CUDA graphs once PrepareForServing has captured
  // them (a batch up to the largest is padded to the next one, so no other size up to it runs
  // eagerly); empty when every batch runs eagerly. The warm-up then skips the sizes the graphs
  // cover (warmup_sizes.h). Default: empty.
  virtual std::vector<int> graph_buckets() const { return {}; }

  // Called once by the worker after its warm-up and before it serves: captures the model's CUDA
  // graphs where the config asks for them and makes keep-warm's resident input. Default: nothing.
  virtual absl::Status PrepareForServing() { return absl::OkStatus(); }

  // Keep-warm: runs the model once on a resident dummy input (its smallest CUDA graph where one was
  // captured) on this instance's stream and waits for it (an event, never a device-wide sync). Not
  // a request: no timing, no statistics, no device idle tracking. Default: UNIMPLEMENTED.
  virtual absl::Status KeepWarm() {
    return absl::UnimplementedError("this instance has no keep-warm run");
  }

  // Host memory for the model's InputArena (allocated once at load, before the workers start):
  // page-locked where this instance copies inputs to a GPU, so a batch's one copy per input reads
  // the arena in place. Default: ordinary memory.
  virtual absl::StatusOr<std::shared_ptr<char>> AllocateHostInputs(size_t bytes) {
    return InputArena::OrdinaryMemory(bytes);
  }
  // AllocateHostInputs gives page-locked memory.
  virtual bool host_inputs_pinned() const { return false; }
  // CUDA device ordinal, or -1 on CPU.
  virtual int gpu() const = 0;
  // The CUDA stream this instance runs on (a cudaStream_t), made for it alone: no two live
  // instances share one. Null on the CPU. For tests and logs.
  virtual const void* native_stream() const { return nullptr; }
  // "cuda:0" or "cpu", for logs.
  virtual std::string device_name() const = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_MODEL_INSTANCE_H_
