#include "server/backend/torch_util.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/backend/script_error.h"

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
    return absl::InternalError(absl::StrCat("LibTorch error: ", OneLineScriptError(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("TorchScript error: ", OneLineScriptError(e.what())));
  } catch (...) {
    return absl::InternalError("forward() threw an exception that is not a std::exception");
  }
}

// Elements of forward()'s result: a tensor, or each element of a tuple / list (OUTPUT__0.. order).
absl::StatusOr<ForwardOutputs> FlattenOutputs(const torch::jit::IValue& value) {
  ForwardOutputs out;
  if (value.isTensor()) {
    out.elements.push_back(value);
  } else if (value.isTuple()) {
    out.container = "tuple";
    for (const auto& e : value.toTuple()->elements()) out.elements.push_back(e);
  } else if (value.isTensorList()) {
    out.container = "list";
    auto list = value.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) out.elements.push_back(list.get(i));
  } else if (value.isList()) {
    out.container = "list";
    auto list = value.toList();
    for (size_t i = 0; i < list.size(); ++i) out.elements.push_back(list.get(i));
  }
  if (out.elements.empty()) {
    return absl::InternalError(
        absl::StrCat("forward() must return a tensor or a tuple/list of tensors, got ", value.tagKind()));
  }
  return out;
}

namespace {

// N of a name `<anything>__<N>` (N decimal, no sign), or -1.
int NamedIndex(const std::string& name) {
  const size_t at = name.rfind("__");
  if (at == std::string::npos || at + 2 == name.size() || name.size() - at - 2 > 9) return -1;
  int n = 0;
  for (size_t i = at + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// Each name's N when every name has one, distinct; nullopt when some name has none; an error when
// two names share an N.
absl::StatusOr<std::optional<std::vector<int>>> NamedIndices(const std::vector<std::string>& names) {
  std::vector<int> indices;
  std::map<int, std::string> seen;
  for (const std::string& name : names) {
    const int n = NamedIndex(name);
    if (n < 0) return std::optional<std::vector<int>>();
    if (auto [it, fresh] = seen.emplace(n, name); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat("tensors '", it->second, "' and '", name,
                                                     "' both name index ", n, " (the <name>__<index> convention)"));
    }
    indices.push_back(n);
  }
  return std::optional<std::vector<int>>(std::move(indices));
}

std::vector<int> Identity(size_t n) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i);
  return v;
}

}  // namespace

absl::StatusOr<TensorBinding> BindTensors(const std::vector<std::string>& input_names,
                                          const std::vector<std::string>& output_names,
                                          torch::jit::Module& module) {
  std::vector<std::string> arguments;
  size_t required = 0;  // arguments without a default value
  try {
    const auto& schema = module.get_method("forward").function().getSchema();
    for (size_t a = 1; a < schema.arguments().size(); ++a) {  // 0: self
      arguments.push_back(schema.arguments()[a].name());
      if (!schema.arguments()[a].default_value().has_value()) required = arguments.size();
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read forward()'s arguments: ", e.what()));
  }
  if (input_names.size() > arguments.size() || input_names.size() < required) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward() takes ", required == arguments.size() ? "" : absl::StrCat(required, " to "), arguments.size(),
        " argument(s) (", absl::StrJoin(arguments, ", "), "), the config declares ", input_names.size(), " input(s)"));
  }
  TensorBinding b;
  std::vector<int> by_name;
  for (const std::string& name : input_names) {
    const auto at = std::find(arguments.begin(), arguments.end(), name);
    if (at == arguments.end()) break;
    by_name.push_back(static_cast<int>(at - arguments.begin()));
  }
  if (by_name.size() == input_names.size()) {
    b.input_position = std::move(by_name);
    b.input_rule = "argument names";
  } else {
    ASSIGN_OR_RETURN(std::optional<std::vector<int>> indices, NamedIndices(input_names));
    if (indices.has_value()) {
      b.input_position = *std::move(indices);
      b.input_rule = "__N suffixes";
    } else {
      b.input_position = Identity(input_names.size());
      b.input_rule = "config order";
    }
  }
  if (b.input_rule != "argument names") {
    std::vector<std::string> unnamed;  // config inputs no argument is named as
    for (const std::string& name : input_names) {
      if (std::find(arguments.begin(), arguments.end(), name) == arguments.end()) unnamed.push_back(name);
    }
    for (size_t i = 0; i < input_names.size(); ++i) {
      const auto at = std::find(arguments.begin(), arguments.end(), input_names[i]);
      const int bound = b.input_position[i];
      if (at == arguments.end() || at - arguments.begin() == bound || bound >= static_cast<int>(arguments.size())) {
        continue;
      }
      b.warnings.push_back(absl::StrCat(
          "input '", input_names[i], "' is bound to forward()'s argument ", bound, " ('",
          arguments[static_cast<size_t>(bound)], "') by ", b.input_rule, ", though forward() has an argument named '",
          input_names[i], "' (", at - arguments.begin(), "): inputs bind by name only when every one is named as an "
          "argument, and ", absl::StrJoin(unnamed, ", "), unnamed.size() == 1 ? " is" : " are", " not"));
    }
  }
  // Arguments after the config's inputs keep their defaults: the inputs are forward()'s first ones.
  for (size_t i = 0; i < input_names.size(); ++i) {
    if (b.input_position[i] >= static_cast<int>(arguments.size())) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input_names[i], "' names argument index ",
                                                     b.input_position[i], ", but forward() takes ", arguments.size(),
                                                     " argument(s)"));
    }
    if (b.input_position[i] >= static_cast<int>(input_names.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input_names[i], "' is forward()'s argument ", b.input_position[i], " (",
          arguments[static_cast<size_t>(b.input_position[i])], "), but the config declares only ", input_names.size(),
          " input(s): they must be forward()'s first arguments"));
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int>> out_indices, NamedIndices(output_names));
  if (out_indices.has_value()) {
    b.output_index = *std::move(out_indices);
    b.outputs_by_index = true;
  } else {
    b.output_index = Identity(output_names.size());
  }
  b.output_names = output_names;
  return b;
}

std::vector<torch::jit::IValue> TensorBinding::Arrange(const std::vector<torch::Tensor>& inputs) const {
  std::vector<torch::jit::IValue> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) args[Position(i)] = inputs[i];
  return args;
}

absl::StatusOr<std::vector<torch::Tensor>> TensorBinding::Outputs(const torch::jit::IValue& result) const {
  ASSIGN_OR_RETURN(ForwardOutputs flat, FlattenOutputs(result));
  const std::vector<torch::jit::IValue>& all = flat.elements;
  const int needed = output_index.empty() ? 0 : *std::max_element(output_index.begin(), output_index.end()) + 1;
  if (outputs_by_index ? static_cast<int>(all.size()) < needed : all.size() != output_index.size()) {
    return absl::InternalError(absl::StrCat(
        "forward() returned ", all.size(), " outputs, config declares ", output_index.size(),
        outputs_by_index ? absl::StrCat(" of which the highest __N needs ", needed) : std::string()));
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(output_index.size());
  for (size_t k = 0; k < output_index.size(); ++k) {
    const torch::jit::IValue& element = all[static_cast<size_t>(output_index[k])];
    const std::string name = k < output_names.size() ? output_names[k] : std::to_string(k);
    auto what = [&] { return absl::StrCat("output '", name, "' (forward()'s output ", output_index[k], ")"); };
    // Only the elements a config output is bound to must be tensors: "(y, None)" serves a config
    // that declares OUTPUT__0 alone, as in Triton's backend.
    if (!element.isTensor()) {
      return absl::InternalError(absl::StrCat("forward() returned a ", flat.container, " whose element ",
                                              output_index[k], " (output '", name, "') is ", element.tagKind(),
                                              ", not a tensor"));
    }
    const torch::Tensor& t = element.toTensor();
    if (t.layout() != torch::kStrided) {
      std::ostringstream layout;
      layout << t.layout();
      return absl::InternalError(absl::StrCat(what(), " is a ", layout.str(),
                                              " tensor; outputs must be dense (strided): return it .to_dense()"));
    }
    try {
      outputs.push_back(t.is_contiguous() ? t : t.contiguous());
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat("LibTorch error making ", what(), " contiguous: ", e.what_without_backtrace()));
    }
  }
  return outputs;
}

}  // namespace chronoserve::server
