#include "server/scheduler/model_runtime.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/cache_bypass.h"
#include "common/dtype.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_name.h"

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
      queue_(spec.Label(), PolicyFromSpec(spec), spec.dynamic_batching.queue_policy, clock),
      completions_(CompletionPool::DefaultThreads()) {}

ModelRuntime::~ModelRuntime() { Stop(); }

absl::StatusOr<std::unique_ptr<ModelRuntime>> ModelRuntime::Create(
    const ModelSpec& spec, std::vector<std::unique_ptr<ModelInstance>> instances,
    const WarmupOptions& warmup, const Clock* clock, const std::vector<HostPolicy>& worker_policies,
    size_t input_arena_bytes, std::optional<ArenaStore> arena_store) {
  std::unique_ptr<ModelRuntime> runtime(new ModelRuntime(spec, clock));
  if (input_arena_bytes > 0 && !spec.inputs.empty() && !instances.empty()) {
    // Page-locked when any instance copies to a GPU (such memory is every GPU's to read).
    ModelInstance* owner = instances.front().get();
    for (const auto& instance : instances) {
      if (instance->host_inputs_pinned()) owner = instance.get();
    }
    auto arena = InputArena::Create(static_cast<int>(spec.inputs.size()), input_arena_bytes,
                                    owner->host_inputs_pinned(),
                                    [owner](size_t bytes) { return owner->AllocateHostInputs(bytes); });
    if (arena.ok()) {
      runtime->arena_ = *std::move(arena);
      // auto is cached for every arena: streaming stores made an H100's copies faster but the
      // receiving thread's writes slower by about as much back to back (BENCHMARKS §72).
      runtime->arena_store_ = arena_store.value_or(ArenaStore::kCached);
    } else {  // an optimisation only: serve without it
      CS_LOG(WARNING) << "model '" << spec.name << "': no input arena of " << input_arena_bytes
                      << " bytes per input (" << arena.status().message()
                      << "); its workers gather every batch's inputs (--input-arena-mib sets the size)";
    }
  }
  const int64_t start = clock->NowNs();
  for (size_t i = 0; i < instances.size(); ++i) {
    auto worker = std::make_unique<Worker>(static_cast<int>(i), std::move(instances[i]),
                                           &runtime->queue_, &runtime->stats_, clock,
                                           &runtime->completions_);
    RETURN_IF_ERROR(worker->Warmup(spec, warmup));
    if (worker->instance().gpu() < 0) runtime->has_cpu_instance_ = true;
    runtime->workers_.push_back(std::move(worker));
  }
  runtime->warmup_ns_ = clock->NowNs() - start;
  for (size_t i = 0; i < runtime->workers_.size(); ++i) {
    // On failure the runtime's destructor closes the queue and joins the workers started so far.
    RETURN_IF_ERROR(runtime->workers_[i]->Start(i < worker_policies.size() ? worker_policies[i] : HostPolicy{}));
  }
  // The reaper waits in real time for what comes due, so it runs on the steady clock only: a test's
  // FakeClock moves when the test moves it, and its tests see expiry through the workers.
  if (clock == SteadyClock::Get()) {
    runtime->reaper_ = std::thread([queue = &runtime->queue_] {
      SetCurrentThreadName("cs-reaper");
      Batch dropped;
      while (queue->AwaitDueWhileWorkersBusy(&dropped)) {
        for (auto& r : dropped) InferRequest::Complete(std::move(r), absl::OkStatus());
      }
    });
  }
  runtime->ready_.store(true);
  return runtime;
}

void ModelRuntime::StageInputs(InferRequest& request) const {
  if (!StageInputsInArena(request)) {
    // Without the arena, bytes that arrived in pieces become one buffer of the tensor's own.
    bool views_received = false;  // an input whose bytes still lie in the received message
    for (InputTensor& in : request.inputs) {
      if (in.data != nullptr || in.pieces.empty()) {
        views_received |= in.data != nullptr && in.owned_data == nullptr && !in.shared_memory;
        continue;
      }
      std::string bytes;
      bytes.reserve(in.byte_size);
      for (absl::string_view piece : in.pieces) bytes.append(piece.data(), piece.size());
      in.Own(std::move(bytes));
      in.pieces.clear();
    }
    // Nothing views the received message any more: it goes, so that a queued request holds its
    // bytes once (as --max-queue-mib counts them), not its copy and the message.
    if (!views_received) request.received_bytes.reset();
  }
}

bool ModelRuntime::StageInputsInArena(InferRequest& request) const {
  if (arena_ == nullptr || static_cast<int>(request.inputs.size()) != arena_->inputs()) return false;
  absl::InlinedVector<size_t, 4> sizes;
  for (const InputTensor& in : request.inputs) {
    if (in.shared_memory) return false;  // the client's region: read from there, as before
    sizes.push_back(in.byte_size);
  }
  absl::InlinedVector<char*, 4> regions(sizes.size(), nullptr);
  InputArena::Lease lease = arena_->Reserve(sizes.data(), regions.data());
  if (!lease.held()) return false;
  CacheStore store;
  if (arena_store_ == ArenaStore::kAdaptive) {
    const int64_t now = clock_->NowNs();
    store = AdaptiveStoreFor(now - last_arena_write_ns_.exchange(now, std::memory_order_relaxed));
  } else {
    store = FixedStore(arena_store_);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    InputTensor& in = request.inputs[k];
    in.CopyTo(regions[k], store);
    in.data = regions[k];
    in.pieces.clear();
    in.owned_data.reset();  // typed contents converted: the arena holds them now
    in.in_arena = true;
    in.host_pinned = arena_->pinned();
  }
  request.arena_lease = std::move(lease);
  request.received_bytes.reset();  // nothing views them any more
  return true;
}

size_t InputArenaBytes(const ModelSpec& spec, int64_t requested_bytes) {
  if (requested_bytes >= 0) return static_cast<size_t>(requested_bytes);
  constexpr size_t kMiB = size_t{1} << 20;
  constexpr size_t kCeiling = 64 * kMiB;
  const int64_t batch = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
  size_t largest = 0;
  for (const TensorSpec& in : spec.inputs) {
    // A batch's bytes, in 128 bits and capped at the ceiling after each factor: a config may give
    // an item up to 2^63 bytes, whose batch would wrap a 64-bit product.
    __int128 bytes = std::min<__int128>(static_cast<__int128>(batch) * DataTypeByteSize(in.dtype), kCeiling);
    for (int64_t d : in.dims) {
      if (d < 0) return 16 * kMiB;  // a variable dim: no bound from the config
      bytes = std::min<__int128>(bytes * d, kCeiling);
    }
    largest = std::max(largest, static_cast<size_t>(bytes));
  }
  return std::clamp(8 * largest, 4 * kMiB, kCeiling);
}

bool ModelRuntime::AwaitAdmitted(absl::Duration timeout) const {
  // A ticket lives from the registry's lookup to the queue: a request's validation, microseconds.
  const absl::Time deadline = absl::Now() + timeout;
  for (int spins = 0; admissions_.load(std::memory_order_acquire) > 0; ++spins) {
    if (absl::Now() >= deadline) return false;
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  return true;
}

void ModelRuntime::Stop() {
  ready_.store(false);
  queue_.Close();
  if (reaper_.joinable()) reaper_.join();
  for (auto& w : workers_) w->Join();
  completions_.Stop();
}

}  // namespace chronoserve::server
