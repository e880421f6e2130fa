#include "server/backend/torch_backend.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/backend/torch_device_path.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <torch/cuda.h>
#endif

namespace chronoserve::server {
namespace {

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

// Outputs of forward(): a tensor, or a tuple / list of tensors, in OUTPUT__0.. order.
absl::StatusOr<std::vector<torch::Tensor>> FlattenOutputs(const torch::jit::IValue& value,
                                                          const std::string& model) {
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
      if (!e.isTensor()) return absl::InternalError(absl::StrCat("model '", model, "': forward() returned a list holding a non-tensor"));
      out.push_back(e.toTensor());
    }
  }
  if (out.empty()) {
    return absl::InternalError(absl::StrCat("model '", model, "': forward() must return a tensor or a tuple/list of tensors, got ", value.tagKind()));
  }
  return out;
}

class TorchInstance final : public ModelInstance {
 public:
  TorchInstance(const ModelSpec& spec, const InstanceOptions& options,
                std::unique_ptr<DevicePath> path, torch::jit::Module module)
      : spec_(spec), options_(options), path_(std::move(path)), module_(std::move(module)) {}

  int gpu() const override { return options_.gpu; }
  std::string device_name() const override { return path_->device().str(); }

  absl::Status Execute(Batch& batch, BatchTiming* timing) override {
    try {
      return ExecuteOrThrow(batch, timing);
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("model '", spec_.name, "' on ", device_name(),
                                              ": LibTorch error: ", e.what_without_backtrace()));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("model '", spec_.name, "' on ", device_name(), ": ", e.what()));
    }
  }

 private:
  int64_t TotalItems(const Batch& batch) const {
    int64_t total = 0;
    for (const auto& r : batch) total += r->batch_items;
    return total;
  }

  // Gathers every request's bytes of each input into one staging buffer (one H2D per input).
  absl::StatusOr<std::vector<std::pair<char*, std::vector<int64_t>>>> Gather(const Batch& batch) {
    std::vector<std::pair<char*, std::vector<int64_t>>> staged;
    const int64_t total = TotalItems(batch);
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      std::vector<int64_t> shape = batch.front()->inputs[i].shape;
      if (spec_.max_batch_size > 0) shape[0] = total;
      size_t bytes = 0;
      for (const auto& r : batch) bytes += r->inputs[i].byte_size;
      ASSIGN_OR_RETURN(char* dst, path_->Staging(static_cast<int>(i), bytes));
      size_t offset = 0;
      for (const auto& r : batch) {
        std::memcpy(dst + offset, r->inputs[i].data, r->inputs[i].byte_size);
        offset += r->inputs[i].byte_size;
      }
      staged.emplace_back(dst, std::move(shape));
    }
    return staged;
  }

  absl::Status CheckOutputs(const std::vector<torch::Tensor>& outputs, int64_t total) const {
    if (outputs.size() != spec_.outputs.size()) {
      return absl::InternalError(absl::StrCat("model '", spec_.name, "': forward() returned ",
                                              outputs.size(), " outputs, config declares ",
                                              spec_.outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      const TensorSpec& want = spec_.outputs[k];
      ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(want.dtype));
      if (outputs[k].scalar_type() != type) {
        return absl::InternalError(absl::StrCat("model '", spec_.name, "' output '", want.name,
                                                "': produced ", c10::toString(outputs[k].scalar_type()),
                                                ", config declares ", DataTypeName(want.dtype)));
      }
      if (spec_.max_batch_size > 0 && (outputs[k].dim() == 0 || outputs[k].size(0) != total)) {
        return absl::InternalError(absl::StrCat("model '", spec_.name, "' output '", want.name,
                                                "': batch dimension is ",
                                                outputs[k].dim() == 0 ? 0 : outputs[k].size(0),
                                                ", expected ", total));
      }
    }
    return absl::OkStatus();
  }

  // Copies each request's rows of each requested output into its response.
  void Scatter(Batch& batch, const std::vector<torch::Tensor>& outputs,
               const std::vector<const char*>& host, int64_t total) {
    int64_t row = 0;
    for (auto& r : batch) {
      for (OutputTensor& out : r->outputs) {
        const torch::Tensor& t = outputs[out.index];
        std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
        size_t bytes = t.nbytes();
        size_t offset = 0;
        if (spec_.max_batch_size > 0) {
          const size_t row_bytes = total == 0 ? 0 : t.nbytes() / total;
          shape[0] = r->batch_items;
          bytes = row_bytes * r->batch_items;
          offset = row_bytes * row;
        }
        out.shape = std::move(shape);
        if (out.data != nullptr) out.data->assign(host[out.index] + offset, bytes);
      }
      row += r->batch_items;
      r->timeline.output_done_ns = options_.clock->NowNs();
    }
  }

  absl::Status ExecuteOrThrow(Batch& batch, BatchTiming* timing) {
    const Clock* clock = options_.clock;
    c10::InferenceMode inference_mode;
    const int64_t total = TotalItems(batch);
    timing->batch_size = total;
    timing->gpu = options_.gpu;
    timing->device_timed = path_->device_timed();
    timing->idle_before_us = options_.activity->BeginWork(clock->NowNs());
    if (options_.gpu_clock != nullptr && options_.gpu >= 0) {
      timing->sm_clock_mhz = options_.gpu_clock->SmClockMhz(options_.gpu);
    }
    struct EndWork {
      DeviceActivity* activity;
      const Clock* clock;
      ~EndWork() { activity->EndWork(clock->NowNs()); }
    } end_work{options_.activity, clock};

    ASSIGN_OR_RETURN(auto staged, Gather(batch));
    timing->staged_ns = clock->NowNs();

    std::shared_ptr<void> on_stream = path_->Enter();
    RETURN_IF_ERROR(path_->Mark(kBeforeH2D));
    std::vector<torch::jit::IValue> args;
    args.reserve(staged.size());
    for (size_t i = 0; i < staged.size(); ++i) {
      ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(spec_.inputs[i].dtype));
      ASSIGN_OR_RETURN(torch::Tensor t, path_->ToDevice(staged[i].first, staged[i].second, type));
      args.emplace_back(std::move(t));
    }
    RETURN_IF_ERROR(path_->Mark(kAfterH2D));
    const int64_t launch_start = clock->NowNs();
    torch::jit::IValue result = module_.forward(std::move(args));
    timing->launch_ns = clock->NowNs() - launch_start;
    RETURN_IF_ERROR(path_->Mark(kAfterCompute));

    ASSIGN_OR_RETURN(std::vector<torch::Tensor> outputs, FlattenOutputs(result, spec_.name));
    RETURN_IF_ERROR(CheckOutputs(outputs, total));
    std::vector<const char*> host(outputs.size(), nullptr);
    std::vector<bool> wanted(outputs.size(), false);
    for (const auto& r : batch) {
      for (const auto& o : r->outputs) wanted[o.index] = true;
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!wanted[k]) continue;
      ASSIGN_OR_RETURN(host[k], path_->ToHost(static_cast<int>(k), outputs[k]));
    }
    RETURN_IF_ERROR(path_->Mark(kAfterD2H));
    RETURN_IF_ERROR(path_->Wait());
    timing->gpu_done_ns = clock->NowNs();
    on_stream.reset();

    ASSIGN_OR_RETURN(timing->h2d_ns, path_->SpanNs(kBeforeH2D, kAfterH2D));
    ASSIGN_OR_RETURN(timing->compute_ns, path_->SpanNs(kAfterH2D, kAfterCompute));
    ASSIGN_OR_RETURN(timing->d2h_ns, path_->SpanNs(kAfterCompute, kAfterD2H));
    Scatter(batch, outputs, host, total);
    return absl::OkStatus();
  }

  const ModelSpec spec_;
  const InstanceOptions options_;
  std::unique_ptr<DevicePath> path_;
  torch::jit::Module module_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelInstance>> CreateTorchInstance(const ModelSpec& spec,
                                                                   const InstanceOptions& options) {
  for (const auto* tensors : {&spec.inputs, &spec.outputs}) {
    for (const TensorSpec& t : *tensors) {
      if (!ToTorchType(t.dtype).ok()) {
        return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "' tensor '", t.name,
                                                       "': ", DataTypeName(t.dtype),
                                                       " is not supported by LibTorch"));
      }
    }
  }
  std::unique_ptr<DevicePath> path;
  if (options.gpu >= 0) {
    if (options.gpu >= CudaDeviceCount()) {
      return absl::FailedPreconditionError(absl::StrCat("model '", spec.name, "': GPU ", options.gpu,
                                                        " requested, ", CudaDeviceCount(), " visible"));
    }
    ASSIGN_OR_RETURN(path, MakeCudaPath(options.gpu));
  } else {
    path = MakeCpuPath(options.clock);
  }
  try {
    torch::jit::Module module = torch::jit::load(spec.model_path, path->device());
    module.eval();
    return std::unique_ptr<ModelInstance>(
        new TorchInstance(spec, options, std::move(path), std::move(module)));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': cannot load ",
                                                   spec.model_path, ": ", e.what_without_backtrace()));
  }
}

int CudaDeviceCount() {
#ifdef CHRONOSERVE_WITH_CUDA
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
#else
  return 0;
#endif
}

std::string TorchBuildDescription() {
#ifdef CHRONOSERVE_WITH_CUDA
  const char* kind = "CUDA";
#else
  const char* kind = "CPU";
#endif
  return absl::StrCat("LibTorch ", TORCH_VERSION, " (", kind, ")");
}

}  // namespace chronoserve::server
