// LibTorch helpers shared by the torch backend's pieces (TorchInstance, CudaGraphRunner): our
// DataType -> torch::ScalarType, forward() with its exceptions as statuses, forward()'s result -> its
// output tensors, and which config tensor is which of forward()'s. Internal to server/backend
// (includes LibTorch). Stateless; any thread.
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

// What forward() returned, as outputs: the tensor, or the elements of a tuple / list in
// OUTPUT__0.. order (any of which may be something other than a tensor: TensorBinding::Outputs
// refuses those a config output is bound to).
struct ForwardOutputs {
  std::vector<torch::jit::IValue> elements;
  const char* container = "tensor";  // "tuple" or "list" when forward() returned one
};

// forward()'s result as ForwardOutputs; neither a tensor nor a non-empty tuple / list is an error
// naming what it was, not the model (the instance that called it adds that).
absl::StatusOr<ForwardOutputs> FlattenOutputs(const torch::jit::IValue& value);

// Which forward() argument each config input is, and which of forward()'s outputs each config
// output is, by the rules of Triton's pytorch_libtorch backend, checked in this order:
// - inputs named as forward()'s arguments (all of them, any order): by name;
// - every name `<anything>__<N>`: by N (inputs: 0..n-1 once each; outputs: any distinct N, so a
//   config may list a subset of forward()'s outputs, in any order);
// - otherwise: the config's order.
struct TensorBinding {
  std::vector<int> input_position;  // config input i -> forward() argument position
  std::vector<int> output_index;    // config output k -> forward() output index
  bool outputs_by_index = false;    // `__N` outputs: forward() may return more than the config lists
  std::vector<std::string> output_names;  // config order, for errors
  std::string input_rule;           // for the load's log: "argument names", "__N suffixes", "config order"
  // For the load's log at WARNING: inputs named as one of forward()'s arguments but bound to another
  // (names bind only when every input is named as an argument), almost always a mistake.
  std::vector<std::string> warnings;

  // forward()'s argument position of config input i.
  size_t Position(size_t i) const { return static_cast<size_t>(input_position[i]); }
  // forward()'s arguments from tensors in config order.
  std::vector<torch::jit::IValue> Arrange(const std::vector<torch::Tensor>& inputs) const;
  // The config's outputs (in config order) from forward()'s result, each made contiguous (a
  // transposed or sliced view gets its own copy); a sparse or other non-strided output is refused
  // naming it. Called before the compute span ends, so a
  // strided output's copy kernel counts as compute, not as d2h (TIMING.md: copies are host<->device
  // transfers only); inside a CUDA graph's capture, so the replay includes it. Errors name what
  // forward() returned, not the model.
  absl::StatusOr<std::vector<torch::Tensor>> Outputs(const torch::jit::IValue& result) const;
};

// INVALID_ARGUMENT (naming the tensors, not the model) when `__N` names repeat an index, an input
// index is out of range, or forward() takes another number of arguments than the config has inputs.
absl::StatusOr<TensorBinding> BindTensors(const std::vector<std::string>& input_names,
                                          const std::vector<std::string>& output_names,
                                          torch::jit::Module& module);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_UTIL_H_
