// LibTorch helpers shared by the torch backend's pieces (TorchInstance, CudaGraphRunner): our
// DataType -> torch::ScalarType, forward() with its exceptions as statuses, and forward()'s result
// -> its output tensors. Internal to server/backend (includes LibTorch). Stateless; any thread.
#ifndef CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_
#define CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_

#include <torch/script.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"

namespace chronoserve::server {

absl::StatusOr<torch::ScalarType> ToTorchType(DataType type);

// module.forward(args), with whatever it throws as INTERNAL (never an exception). The TorchScript
// interpreter rethrows a model's raise (JITException) and an operator that failed inside the model's
// code (a c10::Error, rethrown as std::runtime_error: "The following operation failed in the
// TorchScript interpreter", the model's traceback, the operator's message) as std::exception:
// "TorchScript error: " + that message. A c10::Error that leaves forward() itself, where LibTorch
// refused the call (e.g. its arguments), is "LibTorch error: ". Errors do not name the model.
absl::StatusOr<torch::jit::IValue> RunForward(torch::jit::Module& module, std::vector<torch::jit::IValue> args);

// Outputs of forward(): a tensor, or a tuple / list of tensors, in OUTPUT__0.. order. Errors name
// what forward() returned, not the model: the instance that called it adds that.
absl::StatusOr<std::vector<torch::Tensor>> FlattenOutputs(const torch::jit::IValue& value);

// FlattenOutputs, each output made contiguous (a transposed or expanded view gets its own copy).
// Called before the compute span ends, so the copy kernel of a strided output counts as compute,
// not as d2h (TIMING.md: copies are host<->device transfers only); inside a CUDA graph's capture,
// so the replay includes it.
absl::StatusOr<std::vector<torch::Tensor>> ContiguousOutputs(const torch::jit::IValue& value);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_
