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
               : RandomTensorBytes(t.dtype, elements, rng));
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
