// RemoveTree: deletes a directory tree with POSIX nftw (the server and the tests). Not std::filesystem::remove_all: PyTorch's
// pip LibTorch (the GPU machine's) exports its own copy of that symbol, and a call to it from a
// binary linked with LibTorch jumped to address 0 there (under AddressSanitizer: the override
// files' directory of a model-control load, and tests that removed a model directory).
#ifndef CHRONOSERVE_COMMON_REMOVE_TREE_H_
#define CHRONOSERVE_COMMON_REMOVE_TREE_H_

#include <errno.h>
#include <ftw.h>
#include <stdio.h>

#include <string>

namespace chronoserve {

// Whether `path` is gone (removed now, or never there). Symbolic links are removed, not followed.
inline bool RemoveTree(const std::string& path) {
  const int walked = nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  return walked == 0 || errno == ENOENT;
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_REMOVE_TREE_H_
