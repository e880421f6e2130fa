// This process's threads as /proc shows them, for tests that check what an operator would see
// (a thread's name, CPU list, nice value, scheduling policy) or how long they waited for a CPU.
#ifndef CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_
#define CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"

namespace chronoserve::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The /proc/self/task/TID directory of every thread of this process named `name`.
inline std::vector<std::string> ThreadDirs(const std::string& name) {
  std::vector<std::string> dirs;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return dirs;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    if (absl::StripAsciiWhitespace(ReadFile(task + "/comm")) == name) dirs.push_back(task);
  }
  closedir(dir);
  return dirs;
}

// Field `field` (1-based, as proc(5) numbers them; 3 = state on) of a thread's /proc stat line;
// empty when the thread is gone. The name in parentheses may hold spaces, so fields are counted
// after its closing one.
inline std::string StatField(const std::string& task, int field) {
  const std::string stat = ReadFile(task + "/stat");
  const size_t after_comm = stat.rfind(')');
  if (after_comm == std::string::npos) return "";
  std::istringstream rest(stat.substr(after_comm + 2));
  std::string value;
  for (int i = 3; i <= field; ++i) rest >> value;
  return value;
}

// How long this process's threads named `name` have waited for a CPU while runnable, ns
// (/proc/self/task/*/schedstat's second field; 0 where the kernel does not keep it). Tests that
// bound how late something runs judge that only when this stayed small: else the machine was
// short of CPU, and nothing of ours was late.
inline int64_t RunDelayNs(const std::string& name) {
  int64_t total_ns = 0;
  for (const std::string& task : ThreadDirs(name)) {
    std::istringstream schedstat(ReadFile(task + "/schedstat"));
    int64_t cpu_ns = 0, delay_ns = 0;
    if (schedstat >> cpu_ns >> delay_ns) total_ns += delay_ns;
  }
  return total_ns;
}

// How long the hypervisor has run something else while this machine's CPUs wanted to run, ns, on
// average a CPU (/proc/stat's "cpu" line, its eighth value, in clock ticks, all CPUs together;
// 0 where the kernel does not keep it). A thread that waits for that does not wait in RunDelayNs:
// to the kernel it ran, or its timer fired late.
inline int64_t StolenPerCpuNs() {
  std::istringstream stat(ReadFile("/proc/stat"));
  std::string cpu;
  int64_t ticks[8] = {};
  if (!(stat >> cpu) || cpu != "cpu") return 0;
  for (int64_t& value : ticks) {
    if (!(stat >> value)) return 0;
  }
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (ticks_per_s <= 0 || cpus <= 0) return 0;
  return ticks[7] * (1'000'000'000 / ticks_per_s) / cpus;
}

// Whether the machine was short of CPU over `wall_ns`: threads waited for a CPU (`delay_ns`, from
// RunDelayNs) and the hypervisor held each CPU (`stolen_ns`, from StolenPerCpuNs) for a quarter of
// the wall time or more. A test that bounds how late something ran judges that bound only when
// this is false: on the shared 2-core CI VM a median send was once 590 µs late with the hypervisor
// holding each CPU 32 % of the time and the threads waiting 104 µs a send more, nothing of ours late.
inline bool ShortOfCpu(int64_t delay_ns, int64_t stolen_ns, int64_t wall_ns) {
  return 4 * (delay_ns + stolen_ns) >= wall_ns;
}

// A thread's Cpus_allowed_list ("0-3,8"), as /proc shows it; empty when the thread is gone.
inline std::string CpusAllowedList(const std::string& task) {
  const std::string status = ReadFile(task + "/status");
  const size_t at = status.find("Cpus_allowed_list:");
  if (at == std::string::npos) return "";
  const size_t end = status.find('\n', at);
  return std::string(absl::StripAsciiWhitespace(status.substr(at + 18, end - at - 18)));
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_
