// ModelSpec: one model's validated configuration in chronoserve's own types (no protobuf), as the
// repository loader builds it from config.pbtxt. Immutable once loaded; shared read-only by the
// gRPC layer (validation), the scheduler (batching policy) and the backend (tensors, devices).
#ifndef CHRONOSERVE_SERVER_CORE_MODEL_SPEC_H_
#define CHRONOSERVE_SERVER_CORE_MODEL_SPEC_H_

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace chronoserve::server {

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;  // without the batch dim; -1 = variable
};

enum class InstanceKind { kAuto, kCpu, kGpu };

struct InstanceGroupSpec {
  InstanceKind kind = InstanceKind::kAuto;
  int count = 1;          // workers per listed GPU (or on the CPU)
  std::vector<int> gpus;  // empty: every visible GPU (when the group runs on GPUs)
  std::string host_policy;  // empty: the device's default policy name (server/core/host_policy.h)
  std::string name;         // as configured; empty: none given
};

struct QueuePolicySpec {
  uint32_t max_queue_size = 0;               // 0 = unbounded
  // Input bytes the queued requests may hold (not in client shared memory); 0 = unbounded. Not in
  // config.pbtxt: the server's --max-queue-mib, set on every model by the ModelManager.
  uint64_t max_queue_bytes = 0;
  uint64_t default_timeout_microseconds = 0;  // 0 = none
  bool timeout_action_delay = false;           // Triton DELAY; default REJECT
};

struct DynamicBatchingSpec {
  bool enabled = false;
  std::vector<int> preferred_batch_sizes;  // ascending
  uint64_t max_queue_delay_us = 0;
  QueuePolicySpec queue_policy;
};

struct WarmupSpec {
  std::string name;
  int batch_size = 1;
  int count = 1;
  // Per input name: dims (without batch), resolved for every input the sample lists.
  std::map<std::string, std::vector<int64_t>> input_dims;
  // The inputs the sample marks zero_data: zeros in every synthetic request (the per-batch-size
  // and serving warm-ups too); every other input is random.
  std::set<std::string> zero_data_inputs;
};

// The keys of config.pbtxt's `parameters` that chronoserve reads, each parsed (and defined as a
// constant) by its own subsystem: cuda_graph_buckets.h, exact_device_timing.h, batch_pipeline.h,
// keep_warm.h, warmup_sizes.h. Any other key is kept (ModelConfig answers it) but does nothing; the repository
// loader warns of it.
inline constexpr std::array<const char*, 6> kModelParameterKeys = {
    "cuda_graph_batch_sizes", "exact_device_timing", "keep_warm_horizon_ms", "keep_warm_ms", "pipeline_depth",
    "warmup_batch_sizes"};

// config.pbtxt's version_policy as configured (Triton's ModelConfig answers it so): which of the
// model's version directories serve. Absent in config.pbtxt: latest, 1 version (Triton's default).
struct VersionPolicySpec {
  enum class Kind { kLatest, kAll, kSpecific } kind = Kind::kLatest;
  int64_t num_versions = 1;       // kLatest: the N highest (at least 1)
  std::vector<int64_t> versions;  // kSpecific: as listed
};

struct ModelSpec {
  std::string name;
  int64_t version = 1;
  std::string platform;             // "pytorch_libtorch"
  std::string model_path;           // <repo>/<name>/<version>/model.pt
  int max_batch_size = 0;           // 0: inputs carry no batch dim
  std::vector<TensorSpec> inputs;   // forward() argument order
  std::vector<TensorSpec> outputs;  // forward() result order
  std::vector<InstanceGroupSpec> instance_groups;
  DynamicBatchingSpec dynamic_batching;
  std::vector<WarmupSpec> warmups;
  bool cuda_graphs = false;  // optimization.cuda.graphs (acted on by the GPU performance work)
  std::map<std::string, std::string> parameters;
  VersionPolicySpec version_policy;  // the configured policy; `version` is the one version this spec serves

  // Whether the model's version policy serves several versions (set at load): error messages and
  // logs then name this one.
  bool one_of_several_versions = false;

  // "model 'm'", or "model 'm' version 2" when one_of_several_versions: how messages name it.
  std::string Label() const;

  // Index of the named input/output, or -1.
  int InputIndex(const std::string& tensor) const;
  int OutputIndex(const std::string& tensor) const;

  // The variable dims of every synthetic request the server makes itself (the warm-up per batch
  // size, the serving warm-up): the first model_warmup sample's, so a model that cannot run with
  // a variable dim of 1 still loads; none (each variable dim 1) without a sample.
  const std::map<std::string, std::vector<int64_t>>& SyntheticDims() const {
    static const std::map<std::string, std::vector<int64_t>> kNone;
    return warmups.empty() ? kNone : warmups.front().input_dims;
  }
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_MODEL_SPEC_H_
