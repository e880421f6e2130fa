// CPU lists in the kernel's cpulist syntax ("0-3,8", as in /sys and `taskset -c`), pinning the
// calling thread to one, and the calling thread's nice value and scheduling class: what
// --host-policy's cpu-cores and nice settings and --host-keep-warm-ms's spinners are made of.
#ifndef CHRONOSERVE_COMMON_CPU_SET_H_
#define CHRONOSERVE_COMMON_CPU_SET_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

// "0-3,8" -> {0, 1, 2, 3, 8}: sorted, without repeats. Blanks around items are ignored. Errors name
// the item: an empty list or item, a non-number, a range whose end is below its start, or a CPU
// number at or above CPU_SETSIZE (1024).
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// The shortest cpulist for `cpus` (sorted, no repeats): {0, 1, 2, 3, 8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& cpus);

// Restricts the calling thread to `cpus` (sched_setaffinity). A thread may be given CPUs outside
// its process's own mask (e.g. a server started under `taskset`); it fails, naming the list, when
// none of them is online and allowed to this process's cgroup.
absl::Status PinCurrentThread(const std::vector<int>& cpus);

// The CPUs the calling thread may run on.
std::vector<int> CurrentThreadCpus();

// Gives the calling thread alone (not its process) nice value `nice` (-20..19; lower runs first
// and is preempted less). Below the thread's current value needs root or CAP_SYS_NICE: without it,
// PERMISSION_DENIED saying so; out of range: INVALID_ARGUMENT.
absl::Status SetCurrentThreadNice(int nice);

// The calling thread's nice value.
int CurrentThreadNice();

// Moves the calling thread to SCHED_IDLE: it runs only on a CPU that has nothing else to run, and
// any other thread that wakes there preempts it at once. Needs no privilege.
absl::Status SetCurrentThreadIdlePriority();

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_CPU_SET_H_
