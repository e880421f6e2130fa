// A model whose GPU and CPU outputs agree bit for bit (x * 2 is exact in FP32), for GPU tests that
// check every element: OUTPUT__0 = 2 * INPUT__0, 1024 floats (4 KiB) a row, up to `max_batch` rows,
// one GPU worker with dynamic batching; CUDA graphs when `graphs`. Written into `repo` as
// "doubler_graphs" or "doubler"; returns the model's directory.
#ifndef CHRONOSERVE_TESTS_GPU_DOUBLER_MODEL_H_
#define CHRONOSERVE_TESTS_GPU_DOUBLER_MODEL_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"

namespace chronoserve::testing {

inline std::string WriteDoubler(const TempDir& repo, bool graphs, int max_batch) {
  const std::string name = graphs ? "doubler_graphs" : "doubler";
  repo.WriteFile(name + "/config.pbtxt",
                 "max_batch_size: " + std::to_string(max_batch) +
                     "\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 1024 }\n"
                     "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 1024 }\n"
                     "instance_group { kind: KIND_GPU count: 1 }\ndynamic_batching { }\n" +
                     (graphs ? "optimization { cuda { graphs: true } }\n" : ""));
  std::filesystem::create_directories(repo.path() + "/" + name + "/1");
  EXPECT_TRUE(WriteScriptedModel(repo.path() + "/" + name + "/1/model.pt", "def forward(self, x):\n  return x * 2.0\n"));
  return repo.path() + "/" + name;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_GPU_DOUBLER_MODEL_H_
