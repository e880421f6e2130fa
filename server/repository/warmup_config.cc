#include "server/repository/warmup_config.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::server {
namespace pb = chronoserve::config;

namespace {

constexpr uint32_t kIntMax = static_cast<uint32_t>(std::numeric_limits<int>::max());

absl::Status CheckRequestBytes(const ModelSpec& spec, int64_t items,
                               const std::map<std::string, std::vector<int64_t>>& dims,
                               const std::string& what) {
  const std::optional<int64_t> bytes = SyntheticRequestBytes(spec, items, dims);
  if (bytes && *bytes <= kMaxWarmupRequestBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " need ", bytes ? absl::StrCat(*bytes, " bytes") : std::string("more than 2^63 bytes"),
      " of input; a warm-up request may hold at most ", kMaxWarmupRequestBytes, " bytes (16 GiB)"));
}

const pb::ModelInput* FindInput(const pb::ModelConfig& config, const std::string& name) {
  for (const auto& in : config.input()) {
    if (in.name() == name) return &in;
  }
  return nullptr;
}

// The dims a warm-up sample gives one input, checked against the input's config dims (without the
// batch dim): same rank, every dim >= 1, fixed dims equal. Empty dims stand for a fixed shape.
absl::StatusOr<std::vector<int64_t>> WarmupInputDims(const pb::ModelWarmup::Input& input,
                                                     const pb::ModelInput& config_input,
                                                     const TensorSpec& tensor, const std::string& where) {
  if (input.data_type() != pb::TYPE_INVALID && input.data_type() != config_input.data_type()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": data_type ", pb::DataType_Name(input.data_type()), " differs from the input's ",
        pb::DataType_Name(config_input.data_type())));
  }
  const bool variable = std::any_of(tensor.dims.begin(), tensor.dims.end(), [](int64_t d) { return d < 0; });
  if (input.dims().empty() && !variable) return tensor.dims;
  const std::vector<int64_t> dims(input.dims().begin(), input.dims().end());
  if (dims.size() != tensor.dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": dims ", ShapeString(dims), " have rank ", dims.size(), "; expected rank ",
        tensor.dims.size(), " like the input's dims ", ShapeString(tensor.dims), " (without the batch dim)"));
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 1 || (tensor.dims[k] >= 0 && dims[k] != tensor.dims[k])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dims ", ShapeString(dims), " do not fit the input's dims ", ShapeString(tensor.dims),
          ": expected every dim >= 1 and equal to the input's where that is not -1"));
    }
  }
  return dims;
}

absl::Status ConvertWarmupInputs(const pb::ModelConfig& config, const pb::ModelWarmup& w,
                                 const std::string& where, const ModelSpec& spec, WarmupSpec* out) {
  for (const auto& [name, input] : w.inputs()) {
    const int index = spec.InputIndex(name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, " names unknown input '", name, "'"));
    }
    if (input.has_input_data_file()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": input_data_file is not supported (use random_data or zero_data)"));
    }
    ASSIGN_OR_RETURN(out->input_dims[name],
                     WarmupInputDims(input, *FindInput(config, name), spec.inputs[index],
                                     absl::StrCat(where, " input '", name, "'")));
    if (input.zero_data()) out->zero_data_inputs.insert(name);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLargestWarmupBatch(const ModelSpec& spec, const std::string& source) {
  const int64_t items = std::max(spec.max_batch_size, 1);
  return CheckRequestBytes(
      spec, items, spec.SyntheticDims(),
      absl::StrCat(source, ": the inputs at ", items, " item(s) (max_batch_size, variable dims ",
                   spec.warmups.empty() ? "as 1" : "as the first model_warmup sample's",
                   "; the size the warm-up before READY sends)"));
}

absl::Status ConvertWarmups(const pb::ModelConfig& config, const std::string& source, ModelSpec* spec) {
  const bool batching = spec->max_batch_size > 0;
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const pb::ModelWarmup& w = config.model_warmup(i);
    const std::string where = absl::StrCat(source, ": model_warmup '", w.name(), "'");
    // Triton skips a sample of batch_size 0; it is run at 1 here, as before.
    if (w.batch_size() > kIntMax || (batching && w.batch_size() > static_cast<uint32_t>(spec->max_batch_size))) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " batch_size ", w.batch_size(), ": expected 1 to ",
          batching ? absl::StrCat("max_batch_size (", spec->max_batch_size, ")") : absl::StrCat(kIntMax)));
    }
    if (w.count() > kIntMax) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " count ", w.count(), ": expected 0 (once) to ", kIntMax));
    }
    WarmupSpec out;
    out.name = w.name();
    out.batch_size = w.batch_size() == 0 ? 1 : static_cast<int>(w.batch_size());
    out.count = w.count() == 0 ? 1 : static_cast<int>(w.count());
    RETURN_IF_ERROR(ConvertWarmupInputs(config, w, where, *spec, &out));
    const int64_t items = batching ? out.batch_size : 1;
    RETURN_IF_ERROR(CheckRequestBytes(*spec, items, out.input_dims,
                                      absl::StrCat(where, ": its inputs at batch_size ", items)));
    if (i == 0 && batching) {
      // The serving warm-up sends the first sample's dims at up to max_batch_size items.
      RETURN_IF_ERROR(CheckRequestBytes(
          *spec, spec->max_batch_size, out.input_dims,
          absl::StrCat(where, ": its inputs at max_batch_size (", spec->max_batch_size,
                       ") items, as the serving warm-up sends the first sample,")));
    }
    spec->warmups.push_back(std::move(out));
  }
  return absl::OkStatus();
}

}  // namespace chronoserve::server
