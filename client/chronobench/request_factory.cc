#include "client/chronobench/request_factory.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "common/tensor_data.h"
#include "google/protobuf/io/coded_stream.h"
#include "nlohmann/json.hpp"

namespace chronoserve::client::bench {
namespace {

// Room kept for the fields a send sets on a built request: model version, id, traceparent.
constexpr int64_t kSendFieldsBytes = 1024;

template <typename T>
void Append(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->append(buf, sizeof(T));
}

// Whether `v` fits integer type T (a double's cast to an integer type it does not fit is undefined).
template <typename T>
bool FitsInteger(double v) {
  // Both bounds as doubles: the lowest is exact (a power of two or 0); max() + 1 is a power of two.
  const double lowest = static_cast<double>(std::numeric_limits<T>::lowest());
  const double past_max = (static_cast<double>(std::numeric_limits<T>::max() / 2) + 1) * 2;
  return v >= lowest && v < past_max;
}

// JSON number `v` appended as integer type T, the element of `type`, exactly as the file writes it:
// an integer is read as one (never through a double, which holds 53 bits), a number with a fraction
// or one T cannot hold is INVALID_ARGUMENT.
template <typename T>
absl::Status AppendInteger(DataType type, const nlohmann::json& v, std::string* out) {
  const auto does_not_fit = [&](const auto& value) {
    return absl::InvalidArgumentError(absl::StrCat("value ", value, " does not fit ", DataTypeName(type)));
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return does_not_fit(u);
    Append<T>(out, static_cast<T>(u));
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    const bool fits = i < 0 ? std::numeric_limits<T>::is_signed &&
                                  i >= static_cast<int64_t>(std::numeric_limits<T>::lowest())
                            : static_cast<uint64_t>(i) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (!fits) return does_not_fit(i);
    Append<T>(out, static_cast<T>(i));
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", v.dump(), " is not a whole number, which ", DataTypeName(type), " needs"));
    }
    if (!FitsInteger<T>(d)) return does_not_fit(v.dump());
    Append<T>(out, static_cast<T>(d));
  }
  return absl::OkStatus();
}

// One element of `type` from a JSON number (or true / false, as 1 / 0); INVALID_ARGUMENT when an
// integer type cannot hold it.
absl::Status AppendElement(DataType type, const nlohmann::json& value, std::string* out) {
  const nlohmann::json v = value.is_boolean() ? nlohmann::json(value.get<bool>() ? 1 : 0) : value;
  switch (type) {
    case DataType::kBool: Append<uint8_t>(out, v.get<double>() != 0); return absl::OkStatus();
    case DataType::kUint8: return AppendInteger<uint8_t>(type, v, out);
    case DataType::kUint16: return AppendInteger<uint16_t>(type, v, out);
    case DataType::kUint32: return AppendInteger<uint32_t>(type, v, out);
    case DataType::kUint64: return AppendInteger<uint64_t>(type, v, out);
    case DataType::kInt8: return AppendInteger<int8_t>(type, v, out);
    case DataType::kInt16: return AppendInteger<int16_t>(type, v, out);
    case DataType::kInt32: return AppendInteger<int32_t>(type, v, out);
    case DataType::kInt64: return AppendInteger<int64_t>(type, v, out);
    case DataType::kFp16: Append<uint16_t>(out, FloatToHalf(v.get<float>())); return absl::OkStatus();
    case DataType::kBf16: Append<uint16_t>(out, FloatToBfloat16(v.get<float>())); return absl::OkStatus();
    case DataType::kFp32: Append<float>(out, v.get<float>()); return absl::OkStatus();
    case DataType::kFp64: Append<double>(out, v.get<double>()); return absl::OkStatus();
    default: return absl::InvalidArgumentError("input of invalid datatype");
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const nlohmann::json>> ReadInputDataFile(const std::string& path) {
  // An ifstream opens a directory without complaint and fails only on the first read.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--input-data '", path, "': is a directory, not a JSON file"));
  }
  std::ifstream file(path);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("--input-data: cannot open '", path, "'"));
  try {
    return std::make_shared<const nlohmann::json>(nlohmann::json::parse(file));
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("--input-data ", path, ": not JSON: ", e.what()));
  } catch (const std::exception& e) {  // a read that failed (std::ios_base::failure)
    return absl::InvalidArgumentError(absl::StrCat("--input-data '", path, "': cannot read it: ", e.what()));
  }
}

absl::StatusOr<RequestFactory> RequestFactory::Create(const inference::ModelMetadataResponse& metadata,
                                                      const InputOptions& input, uint64_t seed) {
  RequestFactory f;
  f.model_ = metadata.name();
  f.seed_ = seed;
  if (metadata.inputs_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", metadata.name(), "' declares no inputs"));
  }
  f.batched_ = true;
  for (const auto& in : metadata.inputs()) {
    if (in.shape_size() == 0 || in.shape(0) != -1) f.batched_ = false;
  }
  for (const auto& in : metadata.inputs()) {
    InputSpec spec;
    spec.name = in.name();
    ASSIGN_OR_RETURN(spec.dtype, DataTypeFromName(in.datatype()));
    std::vector<int64_t> dims(in.shape().begin() + (f.batched_ ? 1 : 0), in.shape().end());
    if (auto it = input.shapes.find(spec.name); it != input.shapes.end()) {
      if (it->second.size() != dims.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--shape ", spec.name, ": model expects ", dims.size(), " dims (without the batch dim) ",
            ShapeString(dims), ", got ", ShapeString(it->second)));
      }
      for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] != -1 && dims[k] != it->second[k]) {
          return absl::InvalidArgumentError(absl::StrCat("--shape ", spec.name, " ", ShapeString(it->second),
                                                         " conflicts with the model's ", ShapeString(dims)));
        }
      }
      dims = it->second;
      spec.shape_from_flag = true;
    }
    for (int64_t d : dims) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", spec.name, " has variable dims ", ShapeString(dims), ": give them with --shape ",
            spec.name, ":d1,d2,..."));
      }
    }
    spec.sample_shape = dims;
    f.inputs_.push_back(std::move(spec));
  }
  for (const auto& [name, dims] : input.shapes) {
    bool known = false;
    for (const auto& s : f.inputs_) known |= s.name == name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("--shape names unknown input '", name, "'"));
  }
  RETURN_IF_ERROR(f.CheckRequestBytes(1));
  if (input.input_data != "random") {
    std::shared_ptr<const nlohmann::json> doc = input.input_document;
    if (doc == nullptr) {
      ASSIGN_OR_RETURN(doc, ReadInputDataFile(input.input_data));
    }
    RETURN_IF_ERROR(f.LoadInputData(*doc, input.input_data));
  }
  return f;
}

Tensor RequestFactory::EmptyTensor(const InputSpec& spec, int64_t batch_size) const {
  Tensor t;
  t.name = spec.name;
  t.dtype = spec.dtype;
  if (batched_) t.shape.push_back(batch_size);
  t.shape.insert(t.shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  return t;
}

absl::Status RequestFactory::CheckRequestBytes(int64_t batch_size) const {
  int64_t total = 0;
  for (const auto& spec : inputs_) {
    std::vector<int64_t> shape = spec.sample_shape;
    if (batched_) shape.insert(shape.begin(), batch_size);
    // ElementCount is -1 past int64, and ByteCount then nullopt: never a wrapped size.
    const std::optional<int64_t> bytes = ByteCount(ElementCount(shape), spec.dtype);
    if (bytes.has_value() && *bytes <= kMaxRequestBytes - total) {
      total += *bytes;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        spec.shape_from_flag ? absl::StrCat("--shape ", spec.name, ":", absl::StrJoin(spec.sample_shape, ","), ": ") : "",
        "input '", spec.name, "' (", DataTypeName(spec.dtype), ", shape ", ShapeString(shape), ") takes ",
        bytes.has_value() ? absl::StrCat(*bytes, " bytes") : "more bytes than int64 holds",
        total > 0 ? absl::StrCat(" beside the other inputs' ", total) : "", "; a request carries at most ",
        kMaxRequestBytes, " bytes (protobuf's 2 GiB message limit)"));
  }
  // The tensors fit; the message around them must too: the request as Build makes it, with each
  // raw entry's bytes counted instead of built (an entry's tag and length varint stay in), plus
  // what every send adds (version, id, trace context), kept under kSendFieldsBytes.
  std::vector<Tensor> skeleton;
  int64_t framed = 0;
  for (const auto& spec : inputs_) {
    Tensor t = EmptyTensor(spec, batch_size);
    const int64_t bytes = *ByteCount(ElementCount(t.shape), spec.dtype);  // checked above
    framed += bytes + static_cast<int64_t>(google::protobuf::io::CodedOutputStream::VarintSize64(bytes)) - 1;
    skeleton.push_back(std::move(t));
  }
  framed += static_cast<int64_t>(InferenceClient::BuildRequest(model_, skeleton, InferOptions{}).ByteSizeLong());
  if (framed > kMaxRequestBytes - kSendFieldsBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model_, "': a request of batch size ", batch_size, " takes ", framed,
        " bytes with protobuf's framing (its inputs ", total, "), and each send adds up to ", kSendFieldsBytes,
        " more; a request carries at most ", kMaxRequestBytes,
        " bytes (protobuf's 2 GiB message limit): lower the batch size or the --shape"));
  }
  return absl::OkStatus();
}

absl::Status RequestFactory::LoadInputData(const nlohmann::json& doc, const std::string& path) {
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input-data ", path, ": expected a JSON object {\"INPUT_NAME\": [numbers...], ...}"));
  }
  for (auto& spec : inputs_) {
    auto it = doc.find(spec.name);
    if (it == doc.end() || !it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat("--input-data ", path, ": no array for input '", spec.name, "'"));
    }
    const int64_t want = ElementCount(spec.sample_shape);
    if (static_cast<int64_t>(it->size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat("--input-data ", path, ": input '", spec.name, "' has ",
                                                     it->size(), " values, shape ",
                                                     ShapeString(spec.sample_shape), " needs ", want));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const nlohmann::json& v = (*it)[i];
      if (!v.is_number() && !v.is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input-data ", path, ": value ", i, " of input '", spec.name, "' is not a number"));
      }
      absl::Status appended = AppendElement(spec.dtype, v, &spec.sample_bytes);
      if (!appended.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input-data ", path, ": value ", i, " of input '", spec.name, "': ", appended.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<inference::ModelInferRequest> RequestFactory::Build(const std::string& model_version,
                                                                  int64_t batch_size) const {
  if (batch_size < 1 || (!batched_ && batch_size > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch size ", batch_size, " is not possible: model '", model_, "' ",
        batched_ ? "needs batch size >= 1" : "has no batch dimension (max_batch_size 0); use -b 1"));
  }
  RETURN_IF_ERROR(CheckRequestBytes(batch_size));
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(batch_size));
  std::vector<Tensor> tensors;
  for (const auto& spec : inputs_) {
    Tensor t = EmptyTensor(spec, batch_size);
    if (spec.sample_bytes.empty()) {
      t.data = RandomTensorBytes(spec.dtype, ElementCount(t.shape), rng);
    } else {
      for (int64_t b = 0; b < batch_size; ++b) t.data += spec.sample_bytes;
    }
    tensors.push_back(std::move(t));
  }
  InferOptions options;
  inference::ModelInferRequest request = InferenceClient::BuildRequest(model_, tensors, options);
  request.set_model_version(model_version);
  return request;
}

std::map<std::string, std::vector<int64_t>> RequestFactory::SampleShapes() const {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& s : inputs_) out[s.name] = s.sample_shape;
  return out;
}

}  // namespace chronoserve::client::bench
