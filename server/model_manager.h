// ModelManager: loads every model of a repository — config, devices, one instance per worker,
// warm-up — into the registry. A model that fails is marked failed with its reason; the others
// still serve. The server's start loads up to ModelLoadOptions::threads models at once (the caller's
// thread and threads of its own, joined before the load returns).
#ifndef CHRONOSERVE_SERVER_MODEL_MANAGER_H_
#define CHRONOSERVE_SERVER_MODEL_MANAGER_H_

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/core/arena_store.h"
#include "server/core/gpu_clock_source.h"
#include "server/core/host_policy.h"
#include "server/backend/device_activity.h"
#include "server/scheduler/model_registry.h"
#include "server/scheduler/worker.h"

namespace chronoserve::server {

struct DevicePlacement {
  int gpu = -1;             // -1 = CPU
  std::string host_policy;  // its instance_group's host_policy; empty = the device's default
};

// The instance groups of `spec` as they are loaded, the way Triton normalises its config: KIND_AUTO
// becomes KIND_GPU when a GPU is visible, else KIND_CPU; a KIND_GPU group without gpus lists every
// visible GPU; count, gpus listed, host_policy and name stay as configured. KIND_GPU without a GPU,
// or a listed GPU that is not visible, is an error naming the model. `gpu_count` is the number of
// visible CUDA devices.
absl::StatusOr<std::vector<InstanceGroupSpec>> ResolveInstanceGroups(const ModelSpec& spec, int gpu_count);

// Where each worker of `spec` runs: its groups resolved (ResolveInstanceGroups), in order, `count`
// workers per listed GPU or on the CPU; more than 1024 workers in all is an error naming the model.
absl::StatusOr<std::vector<DevicePlacement>> PlaceInstances(const ModelSpec& spec, int gpu_count);
// The same for groups already resolved (ResolveInstanceGroups' result), `model` named in the error.
absl::StatusOr<std::vector<DevicePlacement>> PlaceResolvedGroups(const std::string& model,
                                                                 const std::vector<InstanceGroupSpec>& groups);

// NOT_FOUND: `repository` has no model directory `name`; lists the ones it has (`present`).
absl::Status NoSuchModelDirectory(const std::string& repository, const std::string& name,
                                  const std::vector<std::string>& present);

// How every model of the repository is loaded.
struct ModelLoadOptions {
  WarmupOptions warmup;
  bool request_timing = true;  // --request-timing (InstanceOptions::request_timing)
  HostPolicies host_policies;  // --host-policy: the CPUs workers are pinned to
  int64_t input_arena_bytes = -1;  // --input-arena-mib: < 0 auto, 0 off (InputArenaBytes)
  uint64_t max_queue_bytes = 0;    // --max-queue-mib, per model (QueuePolicySpec::max_queue_bytes); 0 = unbounded
  std::optional<ArenaStore> input_arena_store;  // --input-arena-store; nullopt: auto (cached)
  // LoadRepository / LoadModels: how many models load at once (--model-load-thread-count); and
  // BuildRuntimes: how many versions of one model. 1 = one after another, in order.
  int threads = 1;
  // Called on the loading thread as each version's load starts, before its file is read (tests).
  std::function<void(const std::string& model, int64_t version)> load_started;
};

class ModelManager {
 public:
  // `gpu_clock` (may be null) feeds each batch's sm_clock_mhz; it must outlive the models.
  ModelManager(ModelRegistry* registry, DeviceActivityRegistry* devices, ModelLoadOptions options,
               const Clock* clock, const GpuClockSource* gpu_clock = nullptr);

  // Loads every model directory under `repository`, up to `threads` at once (started in name order).
  // Fails only if the repository is unreadable.
  absl::Status LoadRepository(const std::string& repository);
  // Loads the named model directories of `repository` (--load-model), up to `threads` at once
  // (started in the order named; a name given twice loads once); a name with no directory there is
  // registered as failed (NOT_FOUND, listing the repository's models).
  absl::Status LoadModels(const std::string& repository, const std::vector<std::string>& names);
  // Loads one model directory; on failure the model is registered as failed.
  absl::Status LoadModel(const std::string& model_dir);
  // Loads one model directory into runtimes, READY, one per version its version policy serves
  // (ascending), without touching the registry (a reload: the runtimes serving the model go on
  // serving meanwhile). The versions load up to `threads` at once. A version that fails to load (its
  // file, its warm-up) leaves the others loading, as Triton: it is listed in `failed` with its error.
  // The load fails (an error naming the model and the lowest version that failed) when no version
  // loads, or when `stop` is set and a version did not load: then the versions built are stopped and
  // no version not yet started is read. `tried` (may be null) is set, once the config reads, to every
  // version the load tries, each with how its own load went (OK: it loaded, or was stopped with the
  // rest). `config_json`: the configuration to use in place of config.pbtxt
  // (LoadModelVersions'). `stop` (may be null): ends the warm-up early, in place of the load
  // options' own, once set (the load then fails).
  struct LoadedVersions {
    std::vector<std::unique_ptr<ModelRuntime>> runtimes;  // ascending by version, at least one
    std::map<int64_t, absl::Status> failed;                // the versions that did not load, with why
  };
  absl::StatusOr<LoadedVersions> BuildRuntimes(const std::string& model_dir, std::map<int64_t, absl::Status>* tried,
                                               const std::string* config_json = nullptr,
                                               const std::atomic<bool>* stop = nullptr);

 private:
  // One version's runtime (BuildRuntimes' work); the error names the model (and its log the version,
  // `one_of_several`).
  absl::StatusOr<std::unique_ptr<ModelRuntime>> BuildVersion(ModelSpec spec, const std::atomic<bool>* stop,
                                                             bool one_of_several);
  // LoadModels' work, `present` being the repository's model directories (listed once).
  void LoadNamed(const std::string& repository, const std::vector<std::string>& names,
                 const std::vector<std::string>& present);
  // One model of LoadNamed's, on whichever loading thread took it.
  void LoadOneNamed(const std::string& repository, const std::string& name, const std::vector<std::string>& present);

  ModelRegistry* const registry_;
  DeviceActivityRegistry* const devices_;
  const ModelLoadOptions options_;
  const Clock* const clock_;
  const GpuClockSource* const gpu_clock_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_MODEL_MANAGER_H_
