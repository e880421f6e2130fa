// StreamGate: holds one CUDA stream while the host enqueues a batch, for exact device timing
// (server/backend/exact_device_timing.h, docs/TIMING.md). Hold() enqueues
// cuStreamWaitValue32(flag >= seq) on the stream, where `flag` is a 32-bit word of mapped pinned
// host memory and `seq` is new for each hold (the comparison is cyclic, so wrap-around is
// harmless); work enqueued after it starts only once Release() stores `seq` into the flag.
//
// A watchdog thread stores it itself when a hold lasts longer than `watchdog`: the host blocked
// behind its own held stream (a forward() that synchronises, a lazy CUDA module load, a launch
// queue full after ~1000 kernels, an implicitly synchronising cudaFree/cudaFreeHost), and
// Release() then returns false. So a hold delays a batch by at most `watchdog`, never deadlocks it.
//
// Owned by one CudaPath; Hold and Release from one thread at a time (its worker). The watchdog is
// internal. Compiled only in CUDA builds (CUDA runtime + driver API).
//
//   // on a thread whose current device is `gpu`:
//   ASSIGN_OR_RETURN(std::unique_ptr<StreamGate> gate,
//                    StreamGate::Create(gpu, stream, absl::Milliseconds(250)));  // CudaPath's watchdog
//   RETURN_IF_ERROR(gate->Hold());          // then record events, copy, forward, record events
//   const bool exact = gate->Release();     // false: the watchdog had released it first
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_STREAM_GATE_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_STREAM_GATE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct CUctx_st;  // CUcontext, from cuda.h (kept out of this header)

namespace chronoserve::server::cuda {

class StreamGate {
 public:
  // Checks that `gpu` can map host memory, allocates the flag, starts the watchdog and probes the
  // hold on `stream` (an event behind a hold must stay pending until the release, then complete).
  // FAILED_PRECONDITION names the GPU and what is missing. The calling thread's current CUDA device
  // must be `gpu`; `stream` must outlive the gate.
  static absl::StatusOr<std::unique_ptr<StreamGate>> Create(int gpu, cudaStream_t stream,
                                                            absl::Duration watchdog);
  // Releases a hold still in place, stops the watchdog, waits for the stream to pass its last wait.
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Enqueues the wait: what is enqueued on the stream from now on runs after Release(). The
  // previous hold must have been released. On error nothing is held.
  absl::Status Hold();
  // Lets the stream run. True when this call released the hold; false when the watchdog had
  // released it first (the spans enqueued under it are not exact) or nothing was held.
  bool Release();
  // Holds the watchdog has broken since Create (any thread).
  int64_t watchdog_releases() const;

 private:
  StreamGate(int gpu, cudaStream_t stream, absl::Duration watchdog)
      : gpu_(gpu), stream_(stream), watchdog_(watchdog) {}
  absl::Status Init();
  absl::Status Probe();
  void WatchdogLoop();
  // Stores `seq` into the flag: the device may pass the wait for `seq`.
  void Open(uint32_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int gpu_;
  const cudaStream_t stream_;
  const absl::Duration watchdog_;
  int device_ = 0;                 // CUdevice of gpu_
  CUctx_st* context_ = nullptr;    // gpu_'s primary context, retained while the gate lives
  bool context_retained_ = false;
  uint32_t* flag_ = nullptr;       // mapped pinned host word the stream waits on
  uint64_t device_flag_ = 0;       // its device address (CUdeviceptr)
  bool stream_stuck_ = false;      // the probe's release never reached the device
  std::thread watchdog_thread_;
  mutable absl::Mutex mu_;
  uint32_t held_seq_ ABSL_GUARDED_BY(mu_) = 0;      // the last hold's sequence number
  uint32_t released_seq_ ABSL_GUARDED_BY(mu_) = 0;  // the last one stored into the flag
  absl::Time held_at_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t watchdog_releases_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_STREAM_GATE_H_
