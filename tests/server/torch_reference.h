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

// Empty when `got` (float32 bytes) holds `want` within `tolerance`; else "wrong output size" or
// "rows of another request?".
std::string ReferenceMismatch(const std::string& got, const std::vector<float>& want, float tolerance = 1e-4f);

// Empty when each of `outputs` (float32 bytes, in the model's output order) holds
// TorchReference(model_path, inputs) within `tolerance`; else which output differs and how.
std::string OutputsMismatch(const std::string& model_path, const std::vector<client::Tensor>& inputs,
                            const std::vector<client::Tensor>& outputs, float tolerance = 1e-4f);

// The add/sub example model's inputs: two [items, length] FP32 tensors of random values (never all
// zero) from `seed`.
std::vector<client::Tensor> AddSubInputs(int64_t items, int64_t length, uint64_t seed);

// Empty when `outputs` are exactly a + b and a - b of the add/sub example model's inputs `a`, `b`;
// else what is wrong.
std::string AddSubMismatch(const client::Tensor& a, const client::Tensor& b, const std::vector<client::Tensor>& outputs);

// Writes a TorchScript module with no parameters whose methods are `source` (TorchScript text, as
// torch::jit::Module::define takes it) to `model_path`; false with the error in a test failure.
bool WriteScriptedModel(const std::string& model_path, const std::string& source);

// Writes a TorchScript module whose forward(x) calls the operator chronoserve_test::vanished, which
// is registered only while the module is defined and saved: loading the file afterwards meets an
// operator this process lacks, as a model using a custom or newer operator meets a LibTorch without
// it (TorchScript's compiler then throws torch::jit::ErrorReport, no c10::Error).
bool WriteModelCallingAVanishedOperator(const std::string& model_path);

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TORCH_REFERENCE_H_
