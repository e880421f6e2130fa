// LibTorch helpers shared by the torch backend's pieces (TorchInstance, CudaGraphRunner): our
// DataType -> torch::ScalarType, and forward()'s result -> its output tensors. Internal to
// server/backend (includes LibTorch). Stateless; any thread.
#ifndef CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_
#define CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_

#include <torch/script.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"

namespace chronoserve::server {

absl::StatusOr<torch::ScalarType> ToTorchType(DataType type);

// Outputs of forward(): a tensor, or a tuple / list of tensors, in OUTPUT__0.. order. Errors name
// what forward() returned, not the model: the instance that called it adds that.
absl::StatusOr<std::vector<torch::Tensor>> FlattenOutputs(const torch::jit::IValue& value);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_
