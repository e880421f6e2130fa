// Reference outputs computed in the test process with LibTorch directly (no server involved).
#ifndef CHRONOSERVE_TESTS_SERVER_TORCH_REFERENCE_H_
#define CHRONOSERVE_TESTS_SERVER_TORCH_REFERENCE_H_

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/inference_client.h"

namespace chronoserve::testing {

// Loads `model_path` on the CPU, runs forward() on `inputs` and returns each output as float32 values.
std::vector<std::vector<float>> TorchReference(const std::string& model_path,
                                               const std::vector<client::Tensor>& inputs);

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TORCH_REFERENCE_H_
