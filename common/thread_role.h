// Whether the calling thread is on a request's latency-critical path: a model's worker or a
// completion thread. Work that can block for long (unmapping a shared-memory region, unregistering
// page-locked memory, closing a CUDA IPC mapping) is handed to another thread from there.
#ifndef CHRONOSERVE_COMMON_THREAD_ROLE_H_
#define CHRONOSERVE_COMMON_THREAD_ROLE_H_

namespace chronoserve {

namespace thread_role_internal {
inline thread_local bool latency_critical = false;
}  // namespace thread_role_internal

// Marks the calling thread (at its start) as latency-critical for its life.
inline void MarkThreadLatencyCritical() { thread_role_internal::latency_critical = true; }
inline bool IsThreadLatencyCritical() { return thread_role_internal::latency_critical; }

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_THREAD_ROLE_H_
