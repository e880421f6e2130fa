#include "server/grpc/model_config_rpc.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dtype.h"

namespace chronoserve::server {
namespace {

config::DataType ConfigType(DataType type) {
  config::DataType out = config::TYPE_INVALID;
  config::DataType_Parse(absl::StrCat("TYPE_", DataTypeName(type)), &out);
  return out;
}

template <typename TensorProto>
void FillTensor(const TensorSpec& tensor, TensorProto* out) {
  out->set_name(tensor.name);
  out->set_data_type(ConfigType(tensor.dtype));
  for (int64_t d : tensor.dims) out->add_dims(d);  // -1 stays -1: a variable dim
}

config::ModelInstanceGroup::Kind ConfigKind(InstanceKind kind) {
  switch (kind) {
    case InstanceKind::kCpu: return config::ModelInstanceGroup::KIND_CPU;
    case InstanceKind::kGpu: return config::ModelInstanceGroup::KIND_GPU;
    case InstanceKind::kAuto: break;
  }
  return config::ModelInstanceGroup::KIND_AUTO;
}

// As Triton reports a loaded group: the kind and GPUs its workers landed on, not KIND_AUTO.
void FillPlacement(const InstanceGroupSpec& group, const std::vector<const LoadedWorker*>& workers,
                   config::ModelInstanceGroup* out) {
  if (workers.empty()) {
    out->set_kind(ConfigKind(group.kind));
    for (int gpu : group.gpus) out->add_gpus(gpu);
    out->set_host_policy(group.host_policy);
    return;
  }
  const bool on_gpu = workers.front()->gpu >= 0;  // a group's workers share their kind
  out->set_kind(on_gpu ? config::ModelInstanceGroup::KIND_GPU : config::ModelInstanceGroup::KIND_CPU);
  if (on_gpu) {
    // `count` workers per GPU, in the order of the GPU list (a GPU listed twice, twice).
    const size_t per_gpu = static_cast<size_t>(std::max(group.count, 1));
    for (size_t i = 0; i < workers.size(); i += per_gpu) out->add_gpus(workers[i]->gpu);
  }
  // One field for the group: a group spread over GPUs whose default policies differ keeps its own.
  const std::string& policy = workers.front()->host_policy;
  const bool shared = std::all_of(workers.begin(), workers.end(),
                                  [&policy](const LoadedWorker* w) { return w->host_policy == policy; });
  out->set_host_policy(shared ? policy : group.host_policy);
}

void FillDynamicBatching(const DynamicBatchingSpec& batching, config::ModelDynamicBatching* out) {
  for (int size : batching.preferred_batch_sizes) out->add_preferred_batch_size(size);
  out->set_max_queue_delay_microseconds(batching.max_queue_delay_us);
  auto* policy = out->mutable_default_queue_policy();
  policy->set_timeout_action(batching.queue_policy.timeout_action_delay ? config::ModelQueuePolicy::DELAY
                                                                        : config::ModelQueuePolicy::REJECT);
  policy->set_default_timeout_microseconds(batching.queue_policy.default_timeout_microseconds);
  policy->set_max_queue_size(batching.queue_policy.max_queue_size);
}

void FillWarmup(const ModelSpec& spec, const WarmupSpec& warmup, config::ModelWarmup* out) {
  out->set_name(warmup.name);
  out->set_batch_size(static_cast<uint32_t>(warmup.batch_size));
  out->set_count(static_cast<uint32_t>(warmup.count));
  for (const auto& [name, dims] : warmup.input_dims) {
    auto& input = (*out->mutable_inputs())[name];
    const int index = spec.InputIndex(name);
    if (index >= 0) input.set_data_type(ConfigType(spec.inputs[index].dtype));
    for (int64_t d : dims) input.add_dims(d);
    if (warmup.zero_data_inputs.count(name) > 0) {
      input.set_zero_data(true);
    } else {
      input.set_random_data(true);
    }
  }
}

}  // namespace

std::vector<LoadedWorker> LoadedWorkers(const ModelRuntime& runtime) {
  const auto& workers = runtime.workers();
  const auto& origins = runtime.worker_origins();
  std::vector<LoadedWorker> loaded;
  if (origins.size() != workers.size()) return loaded;
  for (size_t i = 0; i < workers.size(); ++i) {
    loaded.push_back({origins[i].group, workers[i]->instance().gpu(), origins[i].host_policy});
  }
  return loaded;
}

config::ModelConfig ModelConfigFromSpec(const ModelSpec& spec, const std::vector<LoadedWorker>& workers) {
  config::ModelConfig out;
  out.set_name(spec.name);
  out.set_platform(spec.platform);
  out.set_backend("pytorch");  // as Triton fills it in for platform pytorch_libtorch
  // The one version served, whatever policy chose it (Triton reports the configured policy).
  out.mutable_version_policy()->mutable_specific()->add_versions(spec.version);
  out.set_max_batch_size(spec.max_batch_size);
  for (const auto& t : spec.inputs) FillTensor(t, out.add_input());
  for (const auto& t : spec.outputs) FillTensor(t, out.add_output());
  for (size_t i = 0; i < spec.instance_groups.size(); ++i) {
    const InstanceGroupSpec& group = spec.instance_groups[i];
    auto* g = out.add_instance_group();
    // Triton's default name: <model name>_<group number>.
    g->set_name(group.name.empty() ? absl::StrCat(spec.name, "_", i) : group.name);
    g->set_count(group.count);
    std::vector<const LoadedWorker*> group_workers;
    for (const LoadedWorker& w : workers) {
      if (w.group == static_cast<int>(i)) group_workers.push_back(&w);
    }
    FillPlacement(group, group_workers, g);
  }
  if (!spec.model_path.empty()) {
    out.set_default_model_filename(std::filesystem::path(spec.model_path).filename().string());
  }
  if (spec.dynamic_batching.enabled) FillDynamicBatching(spec.dynamic_batching, out.mutable_dynamic_batching());
  if (spec.cuda_graphs) out.mutable_optimization()->mutable_cuda()->set_graphs(true);
  for (const auto& [key, value] : spec.parameters) (*out.mutable_parameters())[key].set_string_value(value);
  for (const auto& warmup : spec.warmups) FillWarmup(spec, warmup, out.add_model_warmup());
  return out;
}

absl::Status AnswerModelConfig(const ModelRegistry& registry, const inference::ModelConfigRequest& request,
                               inference::ModelConfigResponse* response) {
  auto model = registry.Find(request.name(), request.version());
  if (!model.ok()) return model.status();
  *response->mutable_config() = ModelConfigFromSpec((*model)->spec(), LoadedWorkers(**model));
  return absl::OkStatus();
}

}  // namespace chronoserve::server
