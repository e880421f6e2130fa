#include "common/for_each_on_threads.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"

namespace chronoserve {

std::thread StartStdThread(std::function<void()> body) { return std::thread(std::move(body)); }

int ForEachOnThreads(size_t count, const ForEachOnThreadsOptions& options,
                     const std::function<void(size_t)>& fn) {
  if (count == 0) return 0;
  std::atomic<size_t> next{0};
  auto take_next = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(i);
  };
  const size_t wanted = std::min(static_cast<size_t>(std::max(options.threads, 1)), count);
  std::vector<std::thread> helpers;
  helpers.reserve(wanted - 1);
  for (size_t t = 1; t < wanted; ++t) {
    try {
      helpers.push_back(options.start([&take_next, &options] {
        SetCurrentThreadName(options.thread_name);
        take_next();
      }));
    } catch (const std::system_error& error) {
      CS_LOG(WARNING) << "could not start helper thread " << t << " of " << wanted - 1 << " for "
                      << options.what << " (" << error.what() << "); going on with " << t
                      << (t == 1 ? " thread" : " threads");
      break;
    }
  }
  take_next();
  for (std::thread& helper : helpers) helper.join();
  return static_cast<int>(helpers.size()) + 1;
}

}  // namespace chronoserve
