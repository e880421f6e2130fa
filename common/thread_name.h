// Names the calling thread as `top -H`, perf and /proc/PID/task/*/comm show it, so the server's CPU
// can be split by role (workers, completion, gRPC's own threads) without a debugger. Linux keeps 15
// bytes; longer names are cut.
#ifndef CHRONOSERVE_COMMON_THREAD_NAME_H_
#define CHRONOSERVE_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace chronoserve {

inline void SetCurrentThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_THREAD_NAME_H_
