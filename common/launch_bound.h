// The launch-bound rule (issue 6, docs/GPU_PERFORMANCE.md): on a device-timed batch (CUDA events),
// a host launch of at least 80 % of the GPU compute means the GPU waited for the host to enqueue its
// kernels: the host, not the GPU, sets the pace, and CUDA graphs (one launch per forward) would
// help. Host-timed (CPU) batches are never launch-bound. One rule for the server's worker (its
// metrics and log line) and chronobench (its warning), so the two always agree.
#ifndef CHRONOSERVE_COMMON_LAUNCH_BOUND_H_
#define CHRONOSERVE_COMMON_LAUNCH_BOUND_H_

#include <cstdint>

namespace chronoserve {

inline bool IsLaunchBound(bool device_timed, int64_t launch_ns, int64_t compute_ns) {
  // In 128 bits: a client applies the rule to figures a server sent, whatever their size.
  return device_timed && compute_ns > 0 && static_cast<__int128>(launch_ns) * 5 >= static_cast<__int128>(compute_ns) * 4;
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_LAUNCH_BOUND_H_
