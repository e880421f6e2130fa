#include "server/grpc/request_builder.h"

#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::server {
namespace {

using InputProto = inference::ModelInferRequest::InferInputTensor;

absl::Status Invalid(const ModelSpec& spec, const std::string& tensor, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("model '", spec.name, "' input '", tensor, "': ", what));
}

template <typename To, typename From>
absl::Status PackValues(const ModelSpec& spec, const std::string& tensor,
                        const google::protobuf::RepeatedField<From>& values, std::string* out) {
  out->resize(values.size() * sizeof(To));
  for (int i = 0; i < values.size(); ++i) {
    const From v = values[i];
    if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
      if (v < static_cast<From>(std::numeric_limits<To>::min()) ||
          v > static_cast<From>(std::numeric_limits<To>::max())) {
        return Invalid(spec, tensor, absl::StrCat("value ", v, " at index ", i, " does not fit the datatype"));
      }
    }
    const To converted = static_cast<To>(v);
    std::memcpy(&(*out)[i * sizeof(To)], &converted, sizeof(To));
  }
  return absl::OkStatus();
}

// Typed contents -> row-major bytes in `in.owned_data`; the count must match the shape.
absl::Status ConvertTypedContents(const ModelSpec& spec, const InputProto& proto, int64_t elements,
                                  InputTensor& in) {
  const auto& c = proto.contents();
  std::string& out = in.owned_data;
  int64_t count = 0;
  absl::Status status;
  switch (in.dtype) {
    case DataType::kBool: count = c.bool_contents_size(); status = PackValues<uint8_t>(spec, proto.name(), c.bool_contents(), &out); break;
    case DataType::kInt8: count = c.int_contents_size(); status = PackValues<int8_t>(spec, proto.name(), c.int_contents(), &out); break;
    case DataType::kInt16: count = c.int_contents_size(); status = PackValues<int16_t>(spec, proto.name(), c.int_contents(), &out); break;
    case DataType::kInt32: count = c.int_contents_size(); status = PackValues<int32_t>(spec, proto.name(), c.int_contents(), &out); break;
    case DataType::kInt64: count = c.int64_contents_size(); status = PackValues<int64_t>(spec, proto.name(), c.int64_contents(), &out); break;
    case DataType::kUint8: count = c.uint_contents_size(); status = PackValues<uint8_t>(spec, proto.name(), c.uint_contents(), &out); break;
    case DataType::kUint16: count = c.uint_contents_size(); status = PackValues<uint16_t>(spec, proto.name(), c.uint_contents(), &out); break;
    case DataType::kUint32: count = c.uint_contents_size(); status = PackValues<uint32_t>(spec, proto.name(), c.uint_contents(), &out); break;
    case DataType::kUint64: count = c.uint64_contents_size(); status = PackValues<uint64_t>(spec, proto.name(), c.uint64_contents(), &out); break;
    case DataType::kFp32: count = c.fp32_contents_size(); status = PackValues<float>(spec, proto.name(), c.fp32_contents(), &out); break;
    case DataType::kFp64: count = c.fp64_contents_size(); status = PackValues<double>(spec, proto.name(), c.fp64_contents(), &out); break;
    default:
      return Invalid(spec, proto.name(), absl::StrCat(DataTypeName(in.dtype),
                                                      " has no typed contents field; send it in raw_input_contents"));
  }
  RETURN_IF_ERROR(status);
  if (count != elements) {
    return Invalid(spec, proto.name(), absl::StrCat("contents hold ", count, " elements, shape ",
                                                    ShapeString(in.shape), " needs ", elements));
  }
  in.data = in.owned_data.data();
  in.byte_size = in.owned_data.size();
  return absl::OkStatus();
}

// Checks the shape against the config; returns the batch dim (1 for non-batching models).
absl::StatusOr<int64_t> CheckShape(const ModelSpec& spec, const TensorSpec& want,
                                   const std::vector<int64_t>& shape) {
  const bool batched = spec.max_batch_size > 0;
  std::vector<int64_t> expected = want.dims;
  if (batched) expected.insert(expected.begin(), -1);
  const std::string expected_text =
      absl::StrCat(ShapeString(expected), batched ? absl::StrCat(" (first dim = batch, 1..", spec.max_batch_size, ")") : "");
  if (shape.size() != expected.size()) {
    return Invalid(spec, want.name, absl::StrCat("shape ", ShapeString(shape), " has rank ", shape.size(),
                                                 ", expected ", expected_text));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1 || (expected[d] != -1 && shape[d] != expected[d])) {
      return Invalid(spec, want.name, absl::StrCat("shape ", ShapeString(shape), " does not match ", expected_text));
    }
  }
  if (batched && shape[0] > spec.max_batch_size) {
    return Invalid(spec, want.name, absl::StrCat("batch size ", shape[0], " exceeds max_batch_size ",
                                                 spec.max_batch_size));
  }
  return batched ? shape[0] : 1;
}

absl::Status BuildInputs(const ModelSpec& spec, const inference::ModelInferRequest& request,
                         InferRequest* out) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "': raw_input_contents has ", request.raw_input_contents_size(),
        " entries for ", request.inputs_size(), " inputs; give one per input, in order"));
  }
  std::vector<InputTensor> inputs(spec.inputs.size());
  std::vector<bool> seen(spec.inputs.size(), false);
  int64_t batch = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const InputProto& proto = request.inputs(i);
    const int index = spec.InputIndex(proto.name());
    if (index < 0) {
      std::string names;
      for (const auto& t : spec.inputs) absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
      return Invalid(spec, proto.name(), absl::StrCat("unknown input (the model's inputs: ", names, ")"));
    }
    if (seen[index]) return Invalid(spec, proto.name(), "given more than once");
    seen[index] = true;
    const TensorSpec& want = spec.inputs[index];
    InputTensor& in = inputs[index];
    in.index = index;
    in.dtype = want.dtype;
    if (proto.datatype() != DataTypeName(want.dtype)) {
      return Invalid(spec, proto.name(), absl::StrCat("datatype '", proto.datatype(), "', expected ",
                                                      DataTypeName(want.dtype)));
    }
    in.shape.assign(proto.shape().begin(), proto.shape().end());
    ASSIGN_OR_RETURN(int64_t items, CheckShape(spec, want, in.shape));
    if (batch >= 0 && items != batch) {
      return Invalid(spec, proto.name(), absl::StrCat("batch size ", items, " differs from another input's ", batch));
    }
    batch = items;
    const int64_t elements = ElementCount(in.shape);
    const size_t expected_bytes = static_cast<size_t>(elements) * DataTypeByteSize(want.dtype);
    if (raw) {
      if (proto.has_contents()) return Invalid(spec, proto.name(), "has typed contents and raw_input_contents; use one");
      const std::string& bytes = request.raw_input_contents(i);
      if (bytes.size() != expected_bytes) {
        return Invalid(spec, proto.name(), absl::StrCat("raw contents hold ", bytes.size(), " bytes, ",
                                                        DataTypeName(want.dtype), " ", ShapeString(in.shape),
                                                        " needs ", expected_bytes));
      }
      in.data = bytes.data();
      in.byte_size = bytes.size();
    } else {
      RETURN_IF_ERROR(ConvertTypedContents(spec, proto, elements, in));
    }
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!seen[i]) return Invalid(spec, spec.inputs[i].name, "missing (every model input is required)");
  }
  std::string key;
  for (const InputTensor& in : inputs) {
    absl::StrAppend(&key, ShapeString(std::vector<int64_t>(in.shape.begin() + (spec.max_batch_size > 0 ? 1 : 0), in.shape.end())), ";");
  }
  out->set_shape_key(std::move(key));
  out->batch_items = batch < 0 ? 1 : batch;
  out->inputs = std::move(inputs);
  return absl::OkStatus();
}

absl::Status BuildOutputs(const ModelSpec& spec, const inference::ModelInferRequest& request,
                          InferRequest* out, inference::ModelInferResponse* response) {
  std::vector<int> wanted;
  if (request.outputs_size() == 0) {
    for (size_t k = 0; k < spec.outputs.size(); ++k) wanted.push_back(static_cast<int>(k));
  }
  std::set<int> seen;
  for (const auto& o : request.outputs()) {
    const int index = spec.OutputIndex(o.name());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': unknown requested output '", o.name(), "'"));
    }
    if (!seen.insert(index).second) {
      return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': output '", o.name(), "' requested twice"));
    }
    if (o.parameters().count("classification") > 0) {
      return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "' output '", o.name(),
                                                     "': the classification extension is not supported"));
    }
    wanted.push_back(index);
  }
  for (int index : wanted) {
    auto* entry = response->add_outputs();
    entry->set_name(spec.outputs[index].name);
    entry->set_datatype(DataTypeName(spec.outputs[index].dtype));
    OutputTensor t;
    t.index = index;
    t.data = response->add_raw_output_contents();
    out->outputs.push_back(std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request,
    inference::ModelInferResponse* response) {
  auto out = std::make_unique<InferRequest>();
  out->id = request.id();
  RETURN_IF_ERROR(BuildInputs(spec, request, out.get()));
  RETURN_IF_ERROR(BuildOutputs(spec, request, out.get(), response));
  response->set_model_name(spec.name);
  response->set_model_version(std::to_string(spec.version));
  response->set_id(request.id());
  return out;
}

}  // namespace chronoserve::server
