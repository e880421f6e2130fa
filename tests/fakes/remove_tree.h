// RemoveTree for tests: common/remove_tree.h's (POSIX nftw, not std::filesystem::remove_all, which
// PyTorch's pip LibTorch exports a crashing copy of; see there).
#ifndef CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_
#define CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_

#include "common/remove_tree.h"

namespace chronoserve::testing {

using ::chronoserve::RemoveTree;

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_REMOVE_TREE_H_
