// This process's threads as /proc shows them, for tests that check what an operator would see
// (a thread's name, CPU list, nice value).
#ifndef CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_
#define CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_

#include <dirent.h>

#include <fstream>
#include <iterator>
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

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_PROC_THREADS_H_
