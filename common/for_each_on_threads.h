// ForEachOnThreads: calls fn(0) .. fn(count - 1) on up to `threads` threads at once, the caller's
// and helper threads of its own, joined before it returns. Each thread takes the next index not
// yet taken, so the calls start in order. A helper the system cannot start (std::thread throws
// std::system_error when the process is out of threads or memory) is logged once as a WARNING and
// the work goes on with the threads already running: at worst the caller's alone, one call after
// another. Nothing is skipped and nothing is called twice.
#ifndef CHRONOSERVE_COMMON_FOR_EACH_ON_THREADS_H_
#define CHRONOSERVE_COMMON_FOR_EACH_ON_THREADS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <thread>

namespace chronoserve {

// Starts a thread that runs `body`, or throws std::system_error. The default is std::thread's own
// constructor; tests pass one that fails.
using ThreadStarter = std::function<std::thread(std::function<void()> body)>;
std::thread StartStdThread(std::function<void()> body);

struct ForEachOnThreadsOptions {
  int threads = 1;               // at most this many at once, the caller's included (< 1 is 1)
  std::string thread_name;       // the helpers' name (SetCurrentThreadName), e.g. "cs-load"
  std::string what;              // what the work is, for the warning: "loading 3 models"
  ThreadStarter start = StartStdThread;
};

// Returns how many threads ran the calls: 1 (the caller's) plus the helpers started, never more
// than `count` (0 when count is 0).
int ForEachOnThreads(size_t count, const ForEachOnThreadsOptions& options,
                     const std::function<void(size_t)>& fn);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_FOR_EACH_ON_THREADS_H_
