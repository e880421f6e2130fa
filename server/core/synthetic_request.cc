#include "server/core/synthetic_request.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/tensor_data.h"

namespace chronoserve::server {
namespace {

// Triton's zero_data: the model's author says random values are not valid for this input (token ids,
// indices), so no synthetic request sends them there.
bool ZeroDataInput(const ModelSpec& spec, const std::string& name) {
  for (const WarmupSpec& w : spec.warmups) {
    if (w.zero_data_inputs.count(name) > 0) return true;
  }
  return false;
}

// Random values for a synthetic input. Integers are 0 or 1: an integer input is often an index (token
// ids, positions, classes) into a table the config does not describe, and any table of two rows
// takes 0 and 1, where a negative or large id would fail the warm-up; on a GPU an index out of range
// is a device-side assert, which breaks the CUDA context of every model on that card.
std::string SyntheticValues(DataType type, int64_t count, std::mt19937_64& rng) {
  switch (type) {
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64: {
      const size_t width = DataTypeByteSize(type);
      std::string out(static_cast<size_t>(count) * width, '\0');
      // Little-endian: the lowest byte of each element carries the 0 or 1.
      for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i) * width] = static_cast<char>(rng() & 1u);
      return out;
    }
    default:
      return RandomTensorBytes(type, count, rng);
  }
}

}  // namespace

std::vector<int64_t> SyntheticItemDims(const TensorSpec& t,
                                       const std::map<std::string, std::vector<int64_t>>& dims_override) {
  std::vector<int64_t> dims = t.dims;
  auto it = dims_override.find(t.name);
  if (it != dims_override.end() && it->second.size() == dims.size()) dims = it->second;
  for (auto& d : dims) d = d < 0 ? 1 : d;
  return dims;
}

std::optional<int64_t> SyntheticRequestBytes(const ModelSpec& spec, int64_t items,
                                             const std::map<std::string, std::vector<int64_t>>& dims_override) {
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const TensorSpec& t : spec.inputs) {
    std::optional<int64_t> bytes = ByteCount(ElementCount(SyntheticItemDims(t, dims_override)), t.dtype);
    if (bytes && *bytes != 0 && items > kInt64Max / *bytes) bytes.reset();
    if (bytes) bytes = *bytes * items;
    if (!bytes || *bytes > kInt64Max - total) return std::nullopt;
    total += *bytes;
  }
  return total;
}

std::unique_ptr<InferRequest> MakeSyntheticRequest(
    const ModelSpec& spec, int64_t items, std::vector<std::string>* output_scratch,
    std::mt19937_64& rng, const std::map<std::string, std::vector<int64_t>>& dims_override) {
  auto r = std::make_unique<InferRequest>();
  r->synthetic = true;
  r->batch_items = spec.max_batch_size > 0 ? items : 1;
  std::string key;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorSpec& t = spec.inputs[i];
    const std::vector<int64_t> dims = SyntheticItemDims(t, dims_override);
    InputTensor in;
    in.index = static_cast<int>(i);
    in.dtype = t.dtype;
    in.shape = dims;
    if (spec.max_batch_size > 0) in.shape.insert(in.shape.begin(), items);
    const int64_t elements = ElementCount(in.shape);
    in.Own(ZeroDataInput(spec, t.name)
               ? std::string(static_cast<size_t>(elements) * DataTypeByteSize(t.dtype), '\0')
               : SyntheticValues(t.dtype, elements, rng));
    absl::StrAppend(&key, ShapeString(dims), ";");
    r->inputs.push_back(std::move(in));
  }
  r->set_shape_key(key);
  output_scratch->resize(spec.outputs.size());
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    OutputTensor out;
    out.index = static_cast<int>(k);
    out.data = &(*output_scratch)[k];
    r->outputs.push_back(std::move(out));
  }
  return r;
}

}  // namespace chronoserve::server
