#include "tools/profile/input_shapes.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::profile {
namespace {

bool HasVariableDim(const std::vector<int64_t>& dims) {
  return std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; });
}

// A --shape must have the input's rank and agree with every fixed dim.
absl::Status CheckShapeFits(const server::ModelSpec& spec, const server::TensorSpec& t,
                            const std::vector<int64_t>& dims) {
  bool fits = dims.size() == t.dims.size();
  for (size_t k = 0; fits && k < dims.size(); ++k) fits = t.dims[k] < 0 || t.dims[k] == dims[k];
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--shape ", t.name, ":", absl::StrJoin(dims, ","), ": model '",
                                                 spec.name, "' input '", t.name, "' has dims ", ShapeString(t.dims),
                                                 " (without the batch dim): give ", t.dims.size(),
                                                 " dims, equal to the fixed ones"));
}

}  // namespace

absl::StatusOr<std::vector<InputShape>> ResolveInputShapes(const server::ModelSpec& spec, const InputDims& shapes) {
  for (const auto& [name, dims] : shapes) {
    if (spec.InputIndex(name) < 0) {
      std::vector<std::string> names;
      for (const server::TensorSpec& t : spec.inputs) names.push_back(t.name);
      return absl::InvalidArgumentError(absl::StrCat("--shape names '", name, "', which is no input of model '",
                                                     spec.name, "' (its inputs: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  const server::WarmupSpec* sample = spec.warmups.empty() ? nullptr : &spec.warmups.front();
  std::vector<InputShape> out;
  for (const server::TensorSpec& t : spec.inputs) {
    InputShape in{t.name, t.dims, "config"};
    if (auto it = shapes.find(t.name); it != shapes.end()) {
      if (absl::Status fits = CheckShapeFits(spec, t, it->second); !fits.ok()) return fits;
      in.dims = it->second;
      in.source = "--shape";
    } else if (HasVariableDim(t.dims) && sample != nullptr && sample->input_dims.count(t.name) > 0) {
      in.dims = sample->input_dims.at(t.name);
      in.source = absl::StrCat("model_warmup '", sample->name, "'");
    }
    if (HasVariableDim(in.dims)) {
      const std::string example = absl::StrJoin(
          t.dims, ",", [](std::string* s, int64_t d) { absl::StrAppend(s, d < 0 ? "N" : absl::StrCat(d)); });
      return absl::InvalidArgumentError(absl::StrCat(
          "model '", spec.name, "' input '", t.name, "' has variable dims ", ShapeString(t.dims),
          " and no size to profile them at: pass --shape ", t.name, ":", example,
          " (the dims without the batch dim), or give config.pbtxt a model_warmup sample that lists it"));
    }
    out.push_back(std::move(in));
  }
  // The largest batch profiled must be one the host can build: as the server's warm-up, at most
  // kMaxWarmupRequestBytes (a shape whose element count passes int64 included).
  const int64_t largest = std::max(spec.max_batch_size, 1);
  const std::optional<int64_t> bytes = server::SyntheticRequestBytes(spec, largest, DimsOf(out));
  if (!bytes.has_value() || *bytes > server::kMaxWarmupRequestBytes) {
    std::vector<std::string> given;
    for (const InputShape& in : out) given.push_back(absl::StrCat(in.name, ":", absl::StrJoin(in.dims, ",")));
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "': a batch of ", largest, " with inputs ", absl::StrJoin(given, " "), " needs ",
        bytes.has_value() ? absl::StrCat(*bytes, " bytes") : std::string("more than 2^63 bytes"),
        " of input; at most ", server::kMaxWarmupRequestBytes, " bytes (16 GiB) can be profiled: lower --shape"));
  }
  return out;
}

InputDims DimsOf(const std::vector<InputShape>& inputs) {
  InputDims dims;
  for (const InputShape& in : inputs) dims[in.name] = in.dims;
  return dims;
}

}  // namespace chronoserve::profile
