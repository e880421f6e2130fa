// Writers for example / test model repositories: TorchScript modules built in C++ with
// torch::jit::Module::define plus registered parameters (no Python), each with its config.pbtxt.
// This header carries no LibTorch types.
#ifndef CHRONOSERVE_TOOLS_EXAMPLE_MODELS_H_
#define CHRONOSERVE_TOOLS_EXAMPLE_MODELS_H_

#include <string>

#include "absl/status/status.h"
#include "common/dtype.h"

namespace chronoserve::examples {

struct ModelOptions {
  int max_batch_size = 8;
  bool dynamic_batching = true;
  int max_queue_delay_us = 0;
  int instance_count = 1;
  std::string instance_kind = "KIND_AUTO";
  uint64_t seed = 7;
  std::string extra_config;  // appended verbatim to config.pbtxt
};

// The policy net of ANCHORS.md: input 4x20x20; conv 4->32 and 32->64 (3x3, pad 1) with ReLU; global
// average pool; linear heads of 400, 1 and 400 outputs (OUTPUT__0..2). FP32.
absl::Status WritePolicyNet(const std::string& repository, const std::string& name,
                            const ModelOptions& options);

// MLP: INPUT__0 [64] -> 128 ReLU -> OUTPUT__0 [16]. FP32.
absl::Status WriteMlp(const std::string& repository, const std::string& name,
                      const ModelOptions& options);

// Elementwise: OUTPUT__0 = INPUT__0 * 2 (BOOL: logical not), shape [dims...] of `type`.
absl::Status WriteScaleModel(const std::string& repository, const std::string& name, DataType type,
                             const ModelOptions& options);

// Two variable-length FP32 inputs (INPUT__0, INPUT__1, dims [-1]): OUTPUT__0 = a + b, OUTPUT__1 = a - b.
absl::Status WriteAddSub(const std::string& repository, const std::string& name,
                         const ModelOptions& options);

// The demo repository: policy_net (max_batch_size 128) and mlp (max_batch_size 64).
absl::Status WriteExampleRepository(const std::string& repository);

// "TYPE_FP32" etc. for config.pbtxt.
std::string ConfigTypeName(DataType type);

}  // namespace chronoserve::examples

#endif  // CHRONOSERVE_TOOLS_EXAMPLE_MODELS_H_
