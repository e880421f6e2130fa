#include "common/cpu_set.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chronoserve {
namespace {

absl::StatusOr<int> ParseCpu(absl::string_view text, absl::string_view item) {
  int cpu = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &cpu) || cpu < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CPU list item '", item, "' is not a CPU number or range"));
  }
  if (cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU list item '", item, "': CPU ", cpu, " is beyond the largest CPU number, ", CPU_SETSIZE - 1));
  }
  return cpu;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) return absl::InvalidArgumentError("empty CPU list");
  std::vector<int> cpus;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat("CPU list '", text, "' has an empty item"));
    const size_t dash = item.find('-');
    if (dash == absl::string_view::npos) {
      auto cpu = ParseCpu(item, item);
      if (!cpu.ok()) return cpu.status();
      cpus.push_back(*cpu);
      continue;
    }
    auto first = ParseCpu(item.substr(0, dash), item);
    if (!first.ok()) return first.status();
    auto last = ParseCpu(item.substr(dash + 1), item);
    if (!last.ok()) return last.status();
    if (*last < *first) {
      return absl::InvalidArgumentError(absl::StrCat("CPU list item '", item, "': the range ends below its start"));
    }
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

absl::Status PinCurrentThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPU to pin the thread to");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " is out of range"));
    }
    CPU_SET(cpu, &set);
  }
  if (const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    return absl::InvalidArgumentError(absl::StrCat("pinning a thread to CPUs ", FormatCpuList(cpus), " failed (",
                                                   std::strerror(err),
                                                   "): none of them is online and allowed to this process"));
  }
  return absl::OkStatus();
}

std::vector<int> CurrentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

namespace {
// setpriority(PRIO_PROCESS, tid) sets one thread on Linux (threads have their own nice values).
id_t CurrentTid() { return static_cast<id_t>(syscall(SYS_gettid)); }
}  // namespace

absl::Status SetCurrentThreadNice(int nice) {
  if (nice < -20 || nice > 19) {
    return absl::InvalidArgumentError(absl::StrCat("nice ", nice, " is out of range (-20..19)"));
  }
  if (setpriority(PRIO_PROCESS, CurrentTid(), nice) == 0) return absl::OkStatus();
  const int err = errno;
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat("setting a thread's nice value to ", nice, " was refused (",
                                                    std::strerror(err), "): below its current value (",
                                                    CurrentThreadNice(), ") needs root or CAP_SYS_NICE"));
  }
  return absl::InternalError(absl::StrCat("setting a thread's nice value to ", nice, " failed: ", std::strerror(err)));
}

int CurrentThreadNice() {
  // -1 is both a valid value and the error return; asking about one's own thread cannot fail.
  return getpriority(PRIO_PROCESS, CurrentTid());
}

absl::Status SetCurrentThreadIdlePriority() {
  sched_param param{};
  param.sched_priority = 0;
  // With pid 0 the call changes the calling thread only (Linux schedules threads, not processes).
  if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("moving a thread to SCHED_IDLE failed: ", std::strerror(errno)));
}

}  // namespace chronoserve
