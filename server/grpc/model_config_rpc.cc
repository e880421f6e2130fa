#include "server/grpc/model_config_rpc.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "server/grpc/model_lookup.h"

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

config::ModelConfig ModelConfigFromSpec(const ModelSpec& spec) {
  config::ModelConfig out;
  out.set_name(spec.name);
  out.set_platform(spec.platform);
  out.set_backend("pytorch");  // as Triton fills it in for platform pytorch_libtorch
  // The policy as configured, as Triton answers it (latest, 1 version, when config.pbtxt has none).
  // The versions it serves now are ModelMetadata's `versions` and RepositoryIndex's entries.
  const VersionPolicySpec& policy = spec.version_policy;
  switch (policy.kind) {
    case VersionPolicySpec::Kind::kAll:
      out.mutable_version_policy()->mutable_all();
      break;
    case VersionPolicySpec::Kind::kSpecific:
      for (int64_t v : policy.versions) out.mutable_version_policy()->mutable_specific()->add_versions(v);
      break;
    case VersionPolicySpec::Kind::kLatest:
      out.mutable_version_policy()->mutable_latest()->set_num_versions(static_cast<uint32_t>(policy.num_versions));
      break;
  }
  out.set_max_batch_size(spec.max_batch_size);
  for (const auto& t : spec.inputs) FillTensor(t, out.add_input());
  for (const auto& t : spec.outputs) FillTensor(t, out.add_output());
  for (size_t i = 0; i < spec.instance_groups.size(); ++i) {
    const InstanceGroupSpec& group = spec.instance_groups[i];
    auto* g = out.add_instance_group();
    // Triton's default name: <model name>_<group number>.
    g->set_name(group.name.empty() ? absl::StrCat(spec.name, "_", i) : group.name);
    g->set_kind(ConfigKind(group.kind));
    g->set_count(group.count);
    for (int gpu : group.gpus) g->add_gpus(gpu);
    g->set_host_policy(group.host_policy);
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
  auto model = FindNamedModel(registry, request.name(), request.version());
  if (!model.ok()) return model.status();
  *response->mutable_config() = ModelConfigFromSpec((*model)->spec());
  return absl::OkStatus();
}

}  // namespace chronoserve::server
