#include "server/scheduler/model_runtime.h"

#include "common/log.h"
#include "common/status_macros.h"

namespace chronoserve::server {

BatchPolicyConfig PolicyFromSpec(const ModelSpec& spec) {
  BatchPolicyConfig policy;
  policy.max_batch_size = spec.max_batch_size;
  policy.dynamic = spec.dynamic_batching.enabled;
  policy.preferred_batch_sizes = spec.dynamic_batching.preferred_batch_sizes;
  policy.max_queue_delay_ns = static_cast<int64_t>(spec.dynamic_batching.max_queue_delay_us) * 1000;
  return policy;
}

ModelRuntime::ModelRuntime(const ModelSpec& spec, const Clock* clock)
    : spec_(spec),
      clock_(clock),
      queue_(spec.name, PolicyFromSpec(spec), spec.dynamic_batching.queue_policy, clock),
      completions_(CompletionPool::DefaultThreads()) {}

ModelRuntime::~ModelRuntime() { Stop(); }

absl::StatusOr<std::unique_ptr<ModelRuntime>> ModelRuntime::Create(
    const ModelSpec& spec, std::vector<std::unique_ptr<ModelInstance>> instances,
    const WarmupOptions& warmup, const Clock* clock, const std::vector<HostPolicy>& worker_policies) {
  std::unique_ptr<ModelRuntime> runtime(new ModelRuntime(spec, clock));
  const int64_t start = clock->NowNs();
  for (size_t i = 0; i < instances.size(); ++i) {
    auto worker = std::make_unique<Worker>(static_cast<int>(i), std::move(instances[i]),
                                           &runtime->queue_, &runtime->stats_, clock,
                                           &runtime->completions_);
    RETURN_IF_ERROR(worker->Warmup(spec, warmup));
    runtime->workers_.push_back(std::move(worker));
  }
  runtime->warmup_ns_ = clock->NowNs() - start;
  for (size_t i = 0; i < runtime->workers_.size(); ++i) {
    // On failure the runtime's destructor closes the queue and joins the workers started so far.
    RETURN_IF_ERROR(runtime->workers_[i]->Start(i < worker_policies.size() ? worker_policies[i] : HostPolicy{}));
  }
  runtime->ready_.store(true);
  return runtime;
}

void ModelRuntime::Stop() {
  ready_.store(false);
  queue_.Close();
  for (auto& w : workers_) w->Join();
  completions_.Stop();
}

}  // namespace chronoserve::server
