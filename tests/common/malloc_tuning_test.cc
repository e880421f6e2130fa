// TuneMallocForLargeMessages: after it, buffers of hundreds of KiB to MiBs allocated, written and
// freed over and over (as gRPC's read buffers are) come back from the heap without page faults; a
// threshold the environment set is left alone. Each case runs in a child process of its own, since
// malloc's settings are process-wide.
#include "common/malloc_tuning.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace chronoserve {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Runs `child` in a forked process; its return value is the exit code.
int RunInChild(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Page faults of the last `rounds - 1` of `rounds` rounds of allocating, writing and freeing
// buffers of the given sizes.
long FaultsAfterTheFirstRound(const std::vector<size_t>& sizes, int rounds) {
  long faults = 0;
  for (int round = 0; round < rounds; ++round) {
    const long before = MinorFaults();
    for (size_t size : sizes) {
      char* p = static_cast<char*>(std::malloc(size));
      std::memset(p, 1 + round, size);
      asm volatile("" : : "r"(p) : "memory");
      std::free(p);
    }
    if (round > 0) faults += MinorFaults() - before;
  }
  return faults;
}

TEST(MallocTuningTest, LargeBuffersComeBackFromTheHeapWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc's: mallopt has nothing to tune";
#endif
  const int code = RunInChild([] {
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    unsetenv("MALLOC_TRIM_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
    if (!TuneMallocForLargeMessages()) return 2;
    const std::vector<size_t> sizes = {size_t{256} << 10, size_t{1} << 20, size_t{3} << 20, size_t{600} << 10,
                                       size_t{8} << 20};
    size_t pages = 0;
    for (size_t s : sizes) pages += s / 4096;
    const long faults = FaultsAfterTheFirstRound(sizes, 5);
    return faults < static_cast<long>(pages * 4 / 100) ? 0 : 3;  // under 1 % of the pages touched
  });
  EXPECT_EQ(code, 0) << "2: not applied; 3: the buffers faulted in again";
}

TEST(MallocTuningTest, ThresholdsTheEnvironmentSetAreLeftAlone) {
  EXPECT_EQ(RunInChild([] {
              setenv("MALLOC_TRIM_THRESHOLD_", "1048576", 1);
              return TuneMallocForLargeMessages() ? 1 : 0;
            }),
            0);
  EXPECT_EQ(RunInChild([] {
              unsetenv("MALLOC_TRIM_THRESHOLD_");
              unsetenv("MALLOC_MMAP_THRESHOLD_");
              setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1);
              return TuneMallocForLargeMessages() ? 1 : 0;
            }),
            0);
}

}  // namespace
}  // namespace chronoserve
