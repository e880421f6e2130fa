// ModelRuntime: a loaded model being served — its spec, queue, workers and statistics. Created by
// the server's ModelManager; READY only after every worker has warmed up. Shared (shared_ptr) with
// the gRPC handlers through the ModelRegistry; Stop() closes the queue and joins the workers and
// the queue's reaper (a thread that answers requests whose time came while every worker was busy).
#ifndef CHRONOSERVE_SERVER_SCHEDULER_MODEL_RUNTIME_H_
#define CHRONOSERVE_SERVER_SCHEDULER_MODEL_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/backend/model_instance.h"
#include "server/core/arena_store.h"
#include "server/core/input_arena.h"
#include "server/core/model_spec.h"
#include "server/core/model_stats.h"
#include "server/scheduler/model_queue.h"
#include "server/scheduler/worker.h"

namespace chronoserve::server {

// A request on its way into a runtime's queue: taken by ModelRegistry::Find (under the registry's
// lock) and released once the request is queued or refused (the dispatcher's Enqueue, or Build's
// error). A runtime taken out of service (a reload or an unload) waits for its tickets before it
// closes its queue, so a request that found it is queued and run, never refused for the swap.
// Move-only; releases on destruction.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept : pending_(other.pending_) { other.pending_ = nullptr; }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept {
    if (this != &other) {
      Release();
      pending_ = other.pending_;
      other.pending_ = nullptr;
    }
    return *this;
  }
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }
  void Release() {
    if (pending_ != nullptr) pending_->fetch_sub(1, std::memory_order_release);
    pending_ = nullptr;
  }

 private:
  friend class ModelRuntime;
  explicit AdmissionTicket(std::atomic<int64_t>* pending) : pending_(pending) {
    pending_->fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<int64_t>* pending_ = nullptr;
};

class ModelRuntime {
 public:
  // Warms every instance (on the calling thread), then starts one worker per instance, worker i
  // placed by worker_policies[i] where that is given (--host-policy: its CPUs, its nice value).
  // `input_arena_bytes` > 0: an InputArena of that many bytes per input (page-locked when an
  // instance runs on a GPU; if that memory cannot be had, a warning and none); 0: none, the
  // workers gather every batch's inputs. `arena_store`: how the receiving thread writes inputs into
  // the arena (--input-arena-store); nullopt: auto, which is cached.
  static absl::StatusOr<std::unique_ptr<ModelRuntime>> Create(
      const ModelSpec& spec, std::vector<std::unique_ptr<ModelInstance>> instances,
      const WarmupOptions& warmup, const Clock* clock, const std::vector<HostPolicy>& worker_policies = {},
      size_t input_arena_bytes = 0, std::optional<ArenaStore> arena_store = std::nullopt);
  ~ModelRuntime();

  const ModelSpec& spec() const { return spec_; }
  ModelQueue& queue() { return queue_; }
  ModelStats& stats() { return stats_; }
  bool ready() const { return ready_.load(); }
  int64_t warmup_ns() const { return warmup_ns_; }
  // Time spent loading the weights onto the devices (set by whoever loaded them; -1 = unknown).
  int64_t load_ns() const { return load_ns_; }
  void set_load_ns(int64_t ns) { load_ns_ = ns; }
  const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }
  // Some worker runs on the CPU: it may take any batch, so no request may hold GPU memory.
  bool has_cpu_instance() const { return has_cpu_instance_; }

  // On the thread that received `request` (its input bytes still in that core's cache): copies
  // every input into the model's InputArena, points the inputs there and holds the regions in
  // request.arena_lease. When there is no arena, an input is in a shared-memory region, or the
  // arena has no room now (the worker then gathers the inputs into its batch), the inputs stay
  // where they are, but an input whose bytes arrived in pieces (InputTensor::pieces) is gathered
  // into bytes of its own: after this, every input's `data` is set.
  void StageInputs(InferRequest& request) const;
  const InputArena* input_arena() const { return arena_.get(); }
  // How StageInputs writes inputs into the arena.
  ArenaStore arena_store() const { return arena_store_; }

  // A ticket for a request on its way to this runtime's queue (ModelRegistry::Find takes it under
  // the registry's lock); it must be released before the runtime is destroyed.
  AdmissionTicket Admit() { return AdmissionTicket(&admissions_); }
  // Once the runtime is out of the registry (no ticket can be taken any more): waits until every
  // ticket taken is released, up to `timeout`; whether they all were.
  bool AwaitAdmitted(absl::Duration timeout) const;

  // Stops accepting, finishes queued requests, joins the workers. Idempotent.
  void Stop();
  // Stops accepting and answers the requests still queued UNAVAILABLE (`reason`) instead of running
  // them (ModelQueue::CloseAbandoningQueued); batches already taken finish. Stop() still joins.
  size_t AbandonQueued(const std::string& reason) { return queue_.CloseAbandoningQueued(reason); }
  // AbandonQueued's reason at the server's exit timeout (the served models' queues and those of
  // versions an unload or reload still drains alike).
  static constexpr char kExitTimeoutReason[] = "the server's exit timeout passed while the request was queued";
  // Stops accepting; the requests still queued run now, in batches as full as they can be, without
  // waiting out the batching window (a closed queue decides as if every delay had passed). The
  // workers go on until the queue is empty; Stop() joins them. A request that comes later is
  // refused UNAVAILABLE with `why`.
  void CloseQueue(const std::string& why) { queue_.Close(why); }

 private:
  ModelRuntime(const ModelSpec& spec, const Clock* clock);
  // StageInputs into the arena; false (the request untouched) when it cannot.
  bool StageInputsInArena(InferRequest& request) const;

  const ModelSpec spec_;
  const Clock* const clock_;
  ModelStats stats_;
  ModelQueue queue_;
  std::shared_ptr<InputArena> arena_;  // null: off
  ArenaStore arena_store_ = ArenaStore::kCached;  // set in Create
  // When StageInputsInArena last wrote the arena (clock_), for ArenaStore::kAdaptive.
  mutable std::atomic<int64_t> last_arena_write_ns_{std::numeric_limits<int64_t>::min() / 2};
  CompletionPool completions_;  // before workers_: outlives them
  std::vector<std::unique_ptr<Worker>> workers_;
  // Answers queued requests whose time came while every worker was busy
  // (ModelQueue::AwaitDueWhileWorkersBusy); started with the workers, joined by Stop().
  std::thread reaper_;
  std::atomic<bool> ready_{false};
  // AdmissionTickets not yet released: every request writes it, so a cache line of its own.
  alignas(64) std::atomic<int64_t> admissions_{0};
  int64_t warmup_ns_ = 0;
  int64_t load_ns_ = -1;
  bool has_cpu_instance_ = false;  // set in Create, before the runtime is shared
};

// How the spec's batching config drives the policy.
BatchPolicyConfig PolicyFromSpec(const ModelSpec& spec);

// --input-arena-mib: `requested_bytes` < 0 = auto: per input, room for 8 batches of the largest
// size when every dim is fixed (between 4 and 64 MiB), else 16 MiB; 0 = off; > 0 = that.
size_t InputArenaBytes(const ModelSpec& spec, int64_t requested_bytes);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_MODEL_RUNTIME_H_
