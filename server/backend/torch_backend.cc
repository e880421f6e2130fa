#include "server/backend/torch_backend.h"

#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/backend/batch_pipeline.h"
#include "server/backend/cuda_graph_buckets.h"
#include "server/backend/cuda_graph_runner.h"
#include "server/backend/exact_device_timing.h"
#include "server/backend/script_error.h"
#include "server/backend/torch_batch_io.h"
#include "server/backend/torch_device_path.h"
#include "server/backend/torch_util.h"
#include "server/core/synthetic_request.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <torch/cuda.h>
#endif

namespace chronoserve::server {
namespace {

class TorchInstance final : public ModelInstance {
 public:
  TorchInstance(const ModelSpec& spec, const InstanceOptions& options,
                std::unique_ptr<DevicePath> path, torch::jit::Module module, TensorBinding binding,
                std::vector<int> graph_buckets, int pipeline_depth)
      : spec_(spec),
        options_(options),
        path_(std::move(path)),
        module_(std::move(module)),
        graph_buckets_(std::move(graph_buckets)),
        binding_(std::move(binding)),
        holds_(path_->can_hold_stream() && options_.request_timing),
        pipeline_depth_(pipeline_depth) {}
  // Work this worker left on the device (a failed launch, say) completes before its graphs, its
  // tensors and then its stream (path_, destroyed last) go.
  ~TorchInstance() override {
    // With the worker's GPU and stream current (the destroying thread may have another device
    // current, or none: device 0), so the sync and the graphs' release make no context elsewhere.
    std::shared_ptr<void> on_stream;
    try {
      on_stream = path_->Enter();
    } catch (...) {
    }
    (void)Guarded([&] { return path_->Sync(); });
    graphs_.reset();
  }

  int gpu() const override { return options_.gpu; }
  std::vector<int> graph_buckets() const override {
    // As CaptureGraphs decides: on a GPU, for inputs without variable dims.
    return options_.gpu >= 0 && HasStaticInputShapes(spec_) ? graph_buckets_ : std::vector<int>{};
  }
  const void* native_stream() const override { return path_->native_stream(); }
  std::string device_name() const override { return path_->device().str(); }
  int pipeline_depth() const override { return pipeline_depth_; }
  absl::StatusOr<std::shared_ptr<char>> AllocateHostInputs(size_t bytes) override { return path_->AllocateHost(bytes); }
  bool host_inputs_pinned() const override { return path_->direct_pinned_io(); }

  absl::Status Execute(Batch& batch, BatchTiming* timing) override {
    RETURN_IF_ERROR(Launch(batch, timing, 0));
    return Finish(batch, timing, 0);
  }
  absl::Status Launch(Batch& batch, BatchTiming* timing, int slot) override {
    if (slot < 0 || slot >= pipeline_depth_ || slots_[slot].in_flight) {
      return absl::InternalError(
          absl::StrCat(Context(), "launch into slot ", slot, " of ", pipeline_depth_, " that is in use or out of range"));
    }
    absl::Status status = Guarded([&] { return LaunchOrThrow(batch, timing, slot); });
    if (!status.ok()) AbandonLaunch(slot);
    return status;
  }
  absl::Status Finish(Batch& batch, BatchTiming* timing, int slot) override {
    if (slot < 0 || slot >= pipeline_depth_ || !slots_[slot].in_flight) {
      return absl::InternalError(absl::StrCat(Context(), "finish of slot ", slot, " with nothing in flight"));
    }
    absl::Status status = Guarded([&] { return FinishOrThrow(batch, timing, slot); });
    ReleaseSlot(slot);
    return status;
  }
  bool LaunchedDone(int slot) override {
    if (slot < 0 || slot >= pipeline_depth_ || !slots_[slot].in_flight) return false;
    path_->SelectSlot(slot);
    return path_->Done();
  }
  absl::Status PrepareForServing() override {
    return Guarded([&] { return CaptureGraphs(); });
  }
  absl::Status KeepWarm() override {
    return Guarded([&] { return KeepWarmOrThrow(); });
  }

 private:
  // Runs `body`, turning LibTorch's exceptions into statuses (forward() itself is called through
  // RunForward, which labels what the model's code throws). Every error leaves with Context(): the
  // helpers the body calls (the device path, the gather, the output checks, the graph runner) name
  // only what failed, never the model, so it is named exactly once.
  template <typename Body>
  absl::Status Guarded(Body body) {
    absl::Status status;
    try {
      status = body();
    } catch (const c10::Error& e) {
      status = absl::InternalError(absl::StrCat("LibTorch error: ", OneLineScriptError(e.what_without_backtrace())));
    } catch (const std::exception& e) {
      status = absl::InternalError(OneLineScriptError(e.what()));
    }
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat(Context(), status.message()));
  }

  // "model 'm' worker 0 on cuda:0: ", the prefix of every error this instance returns.
  std::string Context() const {
    return absl::StrCat(spec_.Label(), " worker ", options_.worker, " on ", device_name(), ": ");
  }

  using Staged = StagedInput;

  // What a launched batch leaves for its Finish.
  struct SlotState {
    bool in_flight = false;
    bool tracks_activity = false;  // BeginWork was called: Finish (or the abandon) ends it
    int64_t total = 0;
    std::vector<torch::Tensor> outputs;
    std::vector<const char*> host;
  };

  // Gather, then H2D -> forward -> D2H and their events enqueued on the device (all of it on the
  // CPU); the host does not wait for the device here.
  absl::Status LaunchOrThrow(Batch& batch, BatchTiming* timing, int slot) {
    const Clock* clock = options_.clock;
    c10::InferenceMode inference_mode;
    SlotState& state = slots_[slot];
    const bool behind_another = AnyInFlight();  // another slot's batch may still be on the stream
    state.in_flight = true;
    path_->SelectSlot(slot);
    const int64_t total = BatchItems(batch);
    timing->batch_size = total;
    timing->gpu = options_.gpu;
    timing->device_timed = path_->device_timed();
    timing->request_timing = options_.request_timing;
    // Idle tracking only feeds idle_before_us: skipped with request timing off.
    if (options_.request_timing && options_.activity != nullptr) {
      state.tracks_activity = true;
      timing->idle_before_us = options_.activity->BeginWork(clock->NowNs());
      if (options_.gpu_clock != nullptr && options_.gpu >= 0) {
        timing->sm_clock_mhz = options_.gpu_clock->SmClockMhz(options_.gpu);
      }
    }

    OrderByArena(batch);
    ASSIGN_OR_RETURN(std::vector<Staged> staged, GatherInputs(spec_, batch, *path_));
    timing->inputs_in_place = std::all_of(staged.begin(), staged.end(), [](const Staged& in) { return in.in_place; });
    timing->staged_ns = clock->NowNs();

    std::shared_ptr<void> on_stream = path_->Enter();
    const int graph = graphs_ == nullptr ? -1 : graphs_->Find(total);
    timing->cuda_graph = graph >= 0;
    StreamHold hold(path_.get());  // exact device timing: released after the last enqueue
    if (holds_.ShouldHold(graph, total, StagedBytes(staged))) RETURN_IF_ERROR(hold.Hold());
    inputs_plan_.behind_another = behind_another;
    inputs_plan_.into_graph = graph >= 0;
    inputs_plan_.bytes.clear();
    for (const Staged& in : staged) inputs_plan_.bytes.push_back(in.bytes);
    RETURN_IF_ERROR(path_->BeginInputs(inputs_plan_));
    RETURN_IF_ERROR(MarkSpan(kBeforeH2D));
    ASSIGN_OR_RETURN(state.outputs,
                     graph >= 0 ? RunGraph(batch, graph, staged, total, timing) : RunEager(batch, staged, timing));
    RETURN_IF_ERROR(CheckForwardOutputs(spec_, state.outputs, total, path_->device()));
    ASSIGN_OR_RETURN(state.host, CopyOutputsToHost(batch, state.outputs));
    RETURN_IF_ERROR(path_->Mark(kAfterD2H));  // always: Wait() waits for it
    timing->exact_device_timing = EndHold(hold);
    state.total = total;
    return absl::OkStatus();
  }

  // Waits for the slot's last event, reads its spans and scatters its outputs.
  absl::Status FinishOrThrow(Batch& batch, BatchTiming* timing, int slot) {
    SlotState& state = slots_[slot];
    path_->SelectSlot(slot);
    RETURN_IF_ERROR(path_->Wait());
    timing->gpu_done_ns = options_.clock->NowNs();
    if (options_.request_timing) {
      ASSIGN_OR_RETURN(timing->h2d_ns, path_->SpanNs(kBeforeH2D, kAfterH2D));
      ASSIGN_OR_RETURN(timing->compute_ns, path_->SpanNs(kBeforeCompute, kAfterCompute));
      ASSIGN_OR_RETURN(timing->d2h_ns, path_->SpanNs(kAfterCompute, kAfterD2H));
      // Where h2d ended: before compute could start on the copy stream behind another batch, and
      // before a graph's pad rows were zeroed; traces place the h2d span by it (not at compute).
      ASSIGN_OR_RETURN(timing->h2d_end_to_done_ns, path_->SpanNs(kAfterH2D, kAfterD2H));
    }
    timing->outputs_lent = ScatterOutputs(spec_, batch, state.outputs, state.host, state.total, *path_, options_.clock);
    return absl::OkStatus();
  }

  // After Finish, successful or not: the slot is free and its tensors released.
  void ReleaseSlot(int slot) {
    SlotState& state = slots_[slot];
    if (state.tracks_activity) options_.activity->EndWork(options_.clock->NowNs());
    state = SlotState{};
  }

  bool AnyInFlight() const {
    for (const SlotState& s : slots_) {
      if (s.in_flight) return true;
    }
    return false;
  }

  // A launch that failed part-way may have left copies or kernels running that read the slot's
  // buffers: wait for the streams (best effort) before the slot is used again.
  void AbandonLaunch(int slot) {
    if (!slots_[slot].in_flight) return;
    (void)Guarded([&] { return path_->Sync(); });
    ReleaseSlot(slot);
  }

  static size_t StagedBytes(const std::vector<Staged>& staged) {
    size_t bytes = 0;
    for (const Staged& in : staged) bytes += in.bytes;
    return bytes;
  }

  // Releases the stream; true when the batch's spans are device time only. A hold the watchdog had
  // to break means the host blocked behind its own held stream (TorchScript re-optimising for a
  // shape loads new kernels, which waits for the device): that shape runs unheld again for a while;
  // after HoldSchedule::kMaxBreaks such breaks holding stops for this worker.
  bool EndHold(StreamHold& hold) {
    if (!hold.held()) return false;
    if (hold.Release()) return true;
    const bool still_on = holds_.Broke();
    CS_LOG(WARNING) << spec_.Label() << " worker " << options_.worker << " on " << device_name()
                    << ": a held batch blocked the host until the hold's watchdog released it (new kernels "
                       "loading, a synchronising forward(), > 1000 kernels enqueued, or an output larger than any "
                       "before, whose pinned landing buffer grew); "
                    << (still_on ? "this shape runs unheld for its next runs"
                                 : "exact_device_timing turned off for this worker");
    return false;
  }

  // The end of the h2d span, the worker's stream ordered after the copies, the start of compute.
  absl::Status InputsDone() {
    RETURN_IF_ERROR(MarkSpan(kAfterH2D));
    RETURN_IF_ERROR(path_->InputsReady());
    return MarkSpan(kBeforeCompute);
  }

  // A span boundary before kAfterD2H: recorded only with request timing on.
  absl::Status MarkSpan(Marker marker) {
    return options_.request_timing ? path_->Mark(marker) : absl::OkStatus();
  }

  // Host time of `forward` (the launch span), or 0 without request timing.
  template <typename Forward>
  int64_t TimeLaunch(Forward forward) {
    if (!options_.request_timing) {
      forward();
      return 0;
    }
    const int64_t start = options_.clock->NowNs();
    forward();
    return options_.clock->NowNs() - start;
  }

  // Starts the D2H of every output some request asked for; host pointers valid after Wait().
  absl::StatusOr<std::vector<const char*>> CopyOutputsToHost(const Batch& batch,
                                                             const std::vector<torch::Tensor>& outputs) {
    std::vector<const char*> host(outputs.size(), nullptr);
    std::vector<bool> wanted(outputs.size(), false);
    for (const auto& r : batch) {
      for (const auto& o : r->outputs) wanted[o.index] = true;
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!wanted[k]) continue;
      // Requests that gave a CUDA shared-memory region get their rows there, device to device.
      RETURN_IF_ERROR(CopyOutputsToDevice(spec_, batch, static_cast<int>(k), outputs[k], *path_));
      if (!WantedOnHost(batch, static_cast<int>(k))) continue;
      if (const OutputTensor* direct = DirectOutputDestination(batch, static_cast<int>(k), outputs[k], *path_);
          direct != nullptr) {
        const absl::Status copied = path_->CopyOutInto(static_cast<int>(k), outputs[k], direct->raw);
        if (!copied.ok()) {
          return absl::Status(copied.code(), absl::StrCat("output '", spec_.outputs[k].name, "' (",
                                                          outputs[k].nbytes(), " bytes) into ", direct->raw_name,
                                                          ": ", copied.message()));
        }
        host[k] = direct->raw;  // Scatter sees the bytes already in place
        continue;
      }
      absl::StatusOr<const char*> landed = path_->ToHost(static_cast<int>(k), outputs[k]);
      if (!landed.ok()) {
        return absl::Status(landed.status().code(),
                            absl::StrCat("output '", spec_.outputs[k].name, "' (", outputs[k].nbytes(),
                                         " bytes) to the host: ", landed.status().message()));
      }
      host[k] = *landed;
    }
    return host;
  }

  // H2D into fresh device tensors, then forward() (launch = host time of the call). A copy's error
  // names the input and where it came from (InputCopyError).
  absl::StatusOr<std::vector<torch::Tensor>> RunEager(const Batch& batch, const std::vector<Staged>& staged,
                                                      BatchTiming* timing) {
    std::vector<torch::jit::IValue> args(staged.size());
    for (size_t i = 0; i < staged.size(); ++i) {
      ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(spec_.inputs[i].dtype));
      absl::StatusOr<torch::Tensor> on_device =
          path_->ToDevice(static_cast<int>(i), staged[i].pieces, staged[i].shape, type);
      if (!on_device.ok()) return InputCopyError(spec_, batch, static_cast<int>(i), staged[i].bytes, on_device.status());
      args[binding_.Position(i)] = *std::move(on_device);
    }
    RETURN_IF_ERROR(InputsDone());
    absl::StatusOr<torch::jit::IValue> result;
    timing->launch_ns = TimeLaunch([&] { result = RunForward(module_, std::move(args)); });
    RETURN_IF_ERROR(result.status());
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> outputs, binding_.Outputs(*result));  // compute, not d2h
    RETURN_IF_ERROR(MarkSpan(kAfterCompute));
    return outputs;
  }

  // H2D into the graph's static inputs (pad rows zeroed), replay (launch = host time of replay()),
  // outputs sliced to the batch's rows.
  absl::StatusOr<std::vector<torch::Tensor>> RunGraph(const Batch& batch, int graph,
                                                      const std::vector<Staged>& staged, int64_t total,
                                                      BatchTiming* timing) {
    for (size_t i = 0; i < staged.size(); ++i) {
      absl::Status copied =
          path_->ToDeviceInto(static_cast<int>(i), staged[i].pieces, staged[i].bytes, graphs_->inputs(graph)[i]);
      if (!copied.ok()) return InputCopyError(spec_, batch, static_cast<int>(i), staged[i].bytes, copied);
    }
    RETURN_IF_ERROR(InputsDone());
    timing->launch_ns = TimeLaunch([&] { graphs_->Replay(graph); });
    RETURN_IF_ERROR(MarkSpan(kAfterCompute));
    std::vector<torch::Tensor> outputs;
    for (const torch::Tensor& out : graphs_->outputs(graph)) {
      outputs.push_back(spec_.max_batch_size > 0 ? out.narrow(0, 0, total) : out);
    }
    return outputs;
  }

  // After warm-up: capture the configured buckets on a GPU with static input shapes.
  absl::Status CaptureGraphs() {
    if (graph_buckets_.empty()) return absl::OkStatus();
    if (options_.gpu < 0 || !HasStaticInputShapes(spec_)) {
      CS_LOG(INFO) << spec_.Label() << " worker " << options_.worker
                   << ": CUDA graphs requested but "
                   << (options_.gpu < 0 ? "it runs on the CPU" : "an input has variable dims")
                   << "; running eager";
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(graphs_, CudaGraphRunner::Capture(module_, spec_, binding_, graph_buckets_, *path_));
    CS_LOG(INFO) << spec_.Label() << " worker " << options_.worker << ": captured "
                 << graphs_->size() << " CUDA graphs (batch sizes up to "
                 << graphs_->bucket(graphs_->size() - 1) << ") on " << device_name();
    return absl::OkStatus();
  }

  // The smallest graph, or forward() on a resident batch-of-one of zeros; then wait for it.
  absl::Status KeepWarmOrThrow() {
    c10::InferenceMode inference_mode;
    std::shared_ptr<void> on_stream = path_->Enter();
    if (graphs_ != nullptr && graphs_->size() > 0) {
      graphs_->Replay(0);
    } else {
      if (keep_warm_args_.empty()) {
        std::vector<torch::Tensor> inputs;
        for (const TensorSpec& t : spec_.inputs) {
          ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(t.dtype));
          // Variable dims as the warm-up's (the first model_warmup sample's, else 1).
          std::vector<int64_t> shape = SyntheticItemDims(t, spec_.SyntheticDims());
          if (spec_.max_batch_size > 0) shape.insert(shape.begin(), 1);
          inputs.push_back(torch::zeros(shape, torch::TensorOptions().dtype(type).device(path_->device())));
        }
        keep_warm_args_ = binding_.Arrange(inputs);
      }
      RETURN_IF_ERROR(RunForward(module_, keep_warm_args_).status());
    }
    return path_->Sync();
  }

  const ModelSpec spec_;
  const InstanceOptions options_;
  std::unique_ptr<DevicePath> path_;
  torch::jit::Module module_;
  const std::vector<int> graph_buckets_;      // empty: CUDA graphs off
  std::unique_ptr<CudaGraphRunner> graphs_;   // after PrepareForServing; destroyed before module_
  const TensorBinding binding_;  // config tensors <-> forward()'s arguments and outputs
  std::vector<torch::jit::IValue> keep_warm_args_;  // made on the first eager keep-warm run
  HoldSchedule holds_;  // exact device timing: which batches hold the stream (off: none)
  const int pipeline_depth_;  // 1, or 2 on a GPU (batch_pipeline.h)
  std::array<SlotState, kPathSlots> slots_;
  InputsPlan inputs_plan_;  // the launching batch's (kept: no allocation per batch)
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
  ASSIGN_OR_RETURN(std::vector<int> graph_buckets, GraphBucketsFromSpec(spec));
  ASSIGN_OR_RETURN(const bool exact, ExactDeviceTimingFromSpec(spec));
  ASSIGN_OR_RETURN(int pipeline_depth, PipelineDepthFromSpec(spec));
  // The CPU's forward is the host's own work, and a held stream (exact device timing) must not
  // have a second batch queued behind it: both run one batch at a time.
  if (options.gpu < 0 || (exact && options.request_timing)) pipeline_depth = 1;
  if (exact && (options.gpu < 0 || !options.request_timing)) {
    CS_LOG(INFO) << spec.Label() << " worker " << options.worker << ": " << kExactDeviceTimingKey
                 << " has no effect "
                 << (options.gpu < 0 ? "on the CPU (every span is host-timed)" : "with --request-timing off");
  }
  std::unique_ptr<DevicePath> path;
  if (options.gpu >= 0) {
    if (options.gpu >= CudaDeviceCount()) {
      return absl::FailedPreconditionError(absl::StrCat("model '", spec.name, "': GPU ", options.gpu,
                                                        " requested, ", CudaDeviceCount(), " visible"));
    }
    auto cuda_path = MakeCudaPath(options.gpu, exact && options.request_timing);
    // Named as the worker's own errors are, the GPU included (a load error: the manager names the
    // version when several load).
    if (!cuda_path.ok()) {
      return absl::Status(cuda_path.status().code(),
                          absl::StrCat("model '", spec.name, "' worker ", options.worker, " on cuda:", options.gpu, ": ",
                                       cuda_path.status().message()));
    }
    path = *std::move(cuda_path);
  } else {
    path = MakeCpuPath(options.clock);
  }
  try {
    torch::jit::Module module = torch::jit::load(spec.model_path, path->device());
    module.eval();
    std::vector<std::string> input_names, output_names;
    for (const TensorSpec& t : spec.inputs) input_names.push_back(t.name);
    for (const TensorSpec& t : spec.outputs) output_names.push_back(t.name);
    absl::StatusOr<TensorBinding> binding = BindTensors(input_names, output_names, module);
    if (!binding.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': ", binding.status().message()));
    }
    if (options.worker == 0) {
      CS_VLOG(1) << "model '" << spec.name << "': inputs bound to forward()'s arguments by " << binding->input_rule
                 << ", outputs by " << (binding->outputs_by_index ? "__N suffixes" : "config order");
      for (const std::string& warning : binding->warnings) CS_LOG(WARNING) << "model '" << spec.name << "': " << warning;
    }
    return std::unique_ptr<ModelInstance>(new TorchInstance(spec, options, std::move(path), std::move(module),
                                                            *std::move(binding), std::move(graph_buckets),
                                                            pipeline_depth));
  } catch (const c10::Error& e) {
    // The archive reader's errors: not a zip at all, or a zip without TorchScript's code in it (a
    // state_dict or a pickled module from torch.save).
    const std::string what = OneLineScriptError(e.what_without_backtrace());
    const char* hint = absl::StrContains(what, "PytorchStreamReader")
                           ? " (not a whole TorchScript file: a truncated copy, a git-lfs pointer not pulled, or not "
                             "TorchScript at all; save the model with torch.jit.save(torch.jit.script(model), path) or "
                             "torch.jit.trace: torch.save's state_dict or pickled module cannot be served)"
                           : "";
    return absl::InvalidArgumentError(
        absl::StrCat("model '", spec.name, "': cannot load ", spec.model_path, ": ", what, hint));
  } catch (const std::exception& e) {
    // TorchScript's compiler reports code it cannot compile (an operator this LibTorch lacks, e.g. a
    // custom or newer one) as torch::jit::ErrorReport, which is no c10::Error.
    return absl::InvalidArgumentError(
        absl::StrCat("model '", spec.name, "': cannot load ", spec.model_path, ": ", OneLineScriptError(e.what())));
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
