#include "server/backend/torch_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::server {

absl::StatusOr<torch::ScalarType> ToTorchType(DataType type) {
  switch (type) {
    case DataType::kBool: return torch::kBool;
    case DataType::kUint8: return torch::kByte;
    case DataType::kInt8: return torch::kChar;
    case DataType::kInt16: return torch::kShort;
    case DataType::kInt32: return torch::kInt;
    case DataType::kInt64: return torch::kLong;
    case DataType::kFp16: return torch::kHalf;
    case DataType::kBf16: return torch::kBFloat16;
    case DataType::kFp32: return torch::kFloat;
    case DataType::kFp64: return torch::kDouble;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("datatype ", DataTypeName(type), " has no LibTorch equivalent"));
  }
}

absl::StatusOr<torch::jit::IValue> RunForward(torch::jit::Module& module, std::vector<torch::jit::IValue> args) {
  try {
    return module.forward(std::move(args));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("LibTorch error: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("TorchScript error: ", e.what()));
  } catch (...) {
    return absl::InternalError("forward() threw an exception that is not a std::exception");
  }
}

// Outputs of forward(): a tensor, or a tuple / list of tensors, in OUTPUT__0.. order.
absl::StatusOr<std::vector<torch::Tensor>> FlattenOutputs(const torch::jit::IValue& value) {
  std::vector<torch::Tensor> out;
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const auto& e : value.toTuple()->elements()) {
      if (!e.isTensor()) break;
      out.push_back(e.toTensor());
    }
    if (out.size() != value.toTuple()->elements().size()) out.clear();
  } else if (value.isTensorList()) {
    auto list = value.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) out.push_back(list.get(i));
  } else if (value.isList()) {
    auto list = value.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      torch::jit::IValue e = list.get(i);
      if (!e.isTensor()) return absl::InternalError("forward() returned a list holding a non-tensor");
      out.push_back(e.toTensor());
    }
  }
  if (out.empty()) {
    return absl::InternalError(
        absl::StrCat("forward() must return a tensor or a tuple/list of tensors, got ", value.tagKind()));
  }
  return out;
}

absl::StatusOr<std::vector<torch::Tensor>> ContiguousOutputs(const torch::jit::IValue& value) {
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> outputs, FlattenOutputs(value));
  try {
    for (torch::Tensor& t : outputs) {
      if (!t.is_contiguous()) t = t.contiguous();
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("LibTorch error making an output contiguous: ", e.what_without_backtrace()));
  }
  return outputs;
}

}  // namespace chronoserve::server
