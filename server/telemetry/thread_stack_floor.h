// The stack floor that lets /metrics start in a process linked with CUDA LibTorch.
//
// The CivetWeb that serves /metrics (Debian's 1.15, through prometheus-cpp) starts its threads with
// a stack of 100 KiB (its build's USE_STACK_SIZE). glibc carves a thread's static TLS out of its
// stack, and a process linked with PyTorch's CUDA LibTorch carries more static TLS than that, so
// CivetWeb's pthread_create failed and the endpoint never started ("null context when constructing
// CivetServer": on the GPU machine, BENCHMARKS §67). thread_stack_floor.cc defines
// pthread_attr_setstacksize for the whole process (linked into the executable and exported, its
// definition comes before libc's for every shared library): a size asked for becomes that size plus
// the process's static TLS, so every thread keeps the usable stack its creator asked for. Sizes
// below PTHREAD_STACK_MIN are passed through unchanged (refused, as before).
#ifndef CHRONOSERVE_SERVER_TELEMETRY_THREAD_STACK_FLOOR_H_
#define CHRONOSERVE_SERVER_TELEMETRY_THREAD_STACK_FLOOR_H_

#include <cstddef>

namespace chronoserve::server::telemetry {

// Bytes of static TLS of the objects loaded when first asked (the sum of their PT_TLS segments, each
// rounded up to its alignment): what glibc takes from each thread's stack. Computed once.
size_t StaticTlsBytes();

// The stack size pthread_attr_setstacksize sets for `asked` (asked + StaticTlsBytes(), rounded up to
// a page; `asked` itself below PTHREAD_STACK_MIN or on overflow).
size_t StackSizeFor(size_t asked);

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_THREAD_STACK_FLOOR_H_
