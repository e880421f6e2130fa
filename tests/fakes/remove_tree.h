// RemoveTree: deletes a directory tree for tests, with POSIX nftw. Not std::filesystem::remove_all:
// PyTorch's pip LibTorch exports its own copy of that symbol, and calling it crashed the tests
// linked with it on the GPU machine (a call to address 0 under its sanitizer build).
#ifndef CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_
#define CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_

#include <errno.h>
#include <ftw.h>
#include <stdio.h>

#include <string>

namespace chronoserve::testing {

// Whether `path` is gone (removed now, or never there).
inline bool RemoveTree(const std::string& path) {
  const int walked = nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  return walked == 0 || errno == ENOENT;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_
