// A scripted model whose outputs are strided views, for the CPU and GPU strided-output tests: x is
// FP32 [rows, cols] per item; OUTPUT__0 = (2x + 1) repeated `repeat` times along the rows, then
// transposed ([cols, rows * repeat]); OUTPUT__1 = x[:, :, ::2] ([rows, cols / 2]).
#ifndef CHRONOSERVE_TESTS_SERVER_STRIDED_MODEL_H_
#define CHRONOSERVE_TESTS_SERVER_STRIDED_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"

namespace chronoserve::testing {

struct StridedDims {
  int rows, cols, repeat, max_batch;
};

// Writes NAME/config.pbtxt (ending in `extra_config`, e.g. an instance_group) and NAME/1/model.pt
// into `repo`. `tail` ends OUTPUT__0's expression: "" leaves the transposed view, ".contiguous()"
// copies it inside forward().
inline bool WriteStridedModel(const TempDir& repo, const std::string& name, const StridedDims& d,
                              const std::string& extra_config, const std::string& tail) {
  const auto dims = [](int a, int b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
  repo.WriteFile(name + "/config.pbtxt",
                 "name: \"" + name + "\"\nmax_batch_size: " + std::to_string(d.max_batch) + "\n" +
                     "input { name: \"INPUT__0\" data_type: TYPE_FP32 dims: " + dims(d.rows, d.cols) + " }\n" +
                     "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: " + dims(d.cols, d.rows * d.repeat) +
                     " }\n" + "output { name: \"OUTPUT__1\" data_type: TYPE_FP32 dims: " + dims(d.rows, d.cols / 2) +
                     " }\n" + extra_config);
  std::filesystem::create_directories(repo.path() + "/" + name + "/1");
  return WriteScriptedModel(repo.path() + "/" + name + "/1/model.pt",
                            "def forward(self, x):\n"
                            "  y = (x * 2.0 + 1.0).repeat(1, " + std::to_string(d.repeat) + ", 1).transpose(1, 2)" +
                                tail + "\n  return (y, x[:, :, ::2])\n");
}

inline int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_STRIDED_MODEL_H_
