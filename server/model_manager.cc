#include "server/model_manager.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/for_each_on_threads.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/backend/torch_backend.h"
#include "server/repository/model_config_loader.h"
#include "server/scheduler/warmup_sizes.h"

namespace chronoserve::server {

constexpr size_t kMaxWorkersPerModel = 1024;

absl::StatusOr<std::vector<InstanceGroupSpec>> ResolveInstanceGroups(const ModelSpec& spec, int gpu_count) {
  std::vector<InstanceGroupSpec> groups = spec.instance_groups;
  for (InstanceGroupSpec& group : groups) {
    // KIND_AUTO is the GPU when one is visible, or when its gpus name one (as Triton: a group that
    // names GPUs is a GPU group, refused below without one, never served on the CPU instead).
    const bool named_gpus = !group.gpus.empty();
    if (group.kind == InstanceKind::kAuto) {
      group.kind = gpu_count > 0 || named_gpus ? InstanceKind::kGpu : InstanceKind::kCpu;
    }
    if (group.kind == InstanceKind::kCpu) continue;
    if (gpu_count == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", spec.name, "': instance_group asks for ",
          named_gpus ? absl::StrCat("GPU(s) ", absl::StrJoin(group.gpus, ", ")) : std::string("KIND_GPU"),
          " but no CUDA GPU is visible to this server (", TorchBuildDescription(),
          "); use KIND_CPU, or KIND_AUTO without gpus, to run on the CPU"));
    }
    if (group.gpus.empty()) {
      for (int g = 0; g < gpu_count; ++g) group.gpus.push_back(g);
    }
    for (int g : group.gpus) {
      if (g >= gpu_count) {
        return absl::FailedPreconditionError(absl::StrCat("model '", spec.name, "': instance_group lists GPU ", g,
                                                          " but only ", gpu_count, " GPU(s) are visible"));
      }
    }
  }
  return groups;
}

absl::StatusOr<std::vector<DevicePlacement>> PlaceInstances(const ModelSpec& spec, int gpu_count) {
  ASSIGN_OR_RETURN(std::vector<InstanceGroupSpec> groups, ResolveInstanceGroups(spec, gpu_count));
  return PlaceResolvedGroups(spec.name, groups);
}

absl::StatusOr<std::vector<DevicePlacement>> PlaceResolvedGroups(const std::string& model,
                                                                 const std::vector<InstanceGroupSpec>& groups) {
  // Each group is bounded by the loader; several groups, or a GPU listed many times, are bounded
  // here, counted before any placement is made (count 256 on a GPU listed 10^5 times is 2.56e7).
  uint64_t workers = 0;
  for (const InstanceGroupSpec& group : groups) {
    const uint64_t devices = group.kind == InstanceKind::kCpu ? 1 : group.gpus.size();
    workers += devices * static_cast<uint64_t>(std::max(group.count, 0));
  }
  if (workers > kMaxWorkersPerModel) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "': its instance groups ask for ", workers,
                                                   " workers; at most ", kMaxWorkersPerModel, " per model"));
  }
  std::vector<DevicePlacement> placements;
  placements.reserve(workers);
  for (const InstanceGroupSpec& group : groups) {
    if (group.kind == InstanceKind::kCpu) {
      for (int i = 0; i < group.count; ++i) placements.push_back({-1, group.host_policy});
      continue;
    }
    for (int g : group.gpus) {
      for (int i = 0; i < group.count; ++i) placements.push_back({g, group.host_policy});
    }
  }
  return placements;
}

namespace {
ForEachOnThreadsOptions LoadThreads(int threads, std::string what) {
  ForEachOnThreadsOptions options;
  options.threads = threads;
  options.thread_name = "cs-load";
  options.what = std::move(what);
  return options;
}
}  // namespace

ModelManager::ModelManager(ModelRegistry* registry, DeviceActivityRegistry* devices,
                           ModelLoadOptions options, const Clock* clock,
                           const GpuClockSource* gpu_clock)
    : registry_(registry), devices_(devices), options_(options), clock_(clock), gpu_clock_(gpu_clock) {}

absl::Status ModelManager::LoadRepository(const std::string& repository) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListModelDirectories(repository));
  if (names.empty()) CS_LOG(WARNING) << "model repository " << repository << " holds no model directory";
  LoadNamed(repository, names, names);
  return absl::OkStatus();
}

absl::Status ModelManager::LoadModels(const std::string& repository, const std::vector<std::string>& names) {
  ASSIGN_OR_RETURN(std::vector<std::string> present, ListModelDirectories(repository));
  LoadNamed(repository, names, present);
  return absl::OkStatus();
}

void ModelManager::LoadNamed(const std::string& repository, const std::vector<std::string>& names,
                             const std::vector<std::string>& present) {
  std::vector<std::string> unique;  // in the order named, each once
  for (const auto& name : names) {
    if (std::find(unique.begin(), unique.end(), name) == unique.end()) unique.push_back(name);
  }
  for (const auto& name : unique) registry_->MarkLoading(name);
  // In order, and a slow load holds up no other model's.
  ForEachOnThreads(unique.size(), LoadThreads(options_.threads, absl::StrCat("loading ", unique.size(), " models")),
                   [&](size_t i) { LoadOneNamed(repository, unique[i], present); });
}

void ModelManager::LoadOneNamed(const std::string& repository, const std::string& name,
                                const std::vector<std::string>& present) {
  if (options_.warmup.stop != nullptr && options_.warmup.stop->load()) {
    CS_LOG(WARNING) << "model '" << name << "' not loaded: the server is shutting down";
    registry_->MarkFailed(name, absl::UnavailableError("not loaded: the server is shutting down"));
    return;
  }
  if (std::find(present.begin(), present.end(), name) == present.end()) {
    const absl::Status missing = NoSuchModelDirectory(repository, name, present);
    CS_LOG(ERROR) << "model '" << name << "' not loaded: " << missing.message();
    registry_->MarkFailed(name, missing);
    return;
  }
  CS_LOG(INFO) << "loading model '" << name << "'";
  (void)LoadModel((std::filesystem::path(repository) / name).string());
}

namespace {
// ", warm-up batch sizes 1,2,4,8" when the warm-up ran other sizes than every one up to the
// model's largest (a parameter named them, or a worker replays CUDA graphs); per worker where they
// differ. Empty otherwise.
std::string WarmupSizesNote(const ModelRuntime& runtime) {
  const size_t max_items = std::max(1, runtime.spec().max_batch_size);
  std::vector<std::string> notes;
  for (const auto& worker : runtime.workers()) {
    const std::vector<int>& sizes = worker->warmup_sizes();  // sorted, distinct, within 1..max_items
    std::string note = sizes.size() == max_items ? "every one" : (sizes.empty() ? "none" : FormatBatchSizes(sizes));
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
  }
  if (notes.empty() || (notes.size() == 1 && notes[0] == "every one")) return "";
  return absl::StrCat(", warm-up batch sizes ", absl::StrJoin(notes, " / "));
}
}  // namespace

absl::Status NoSuchModelDirectory(const std::string& repository, const std::string& name,
                                  const std::vector<std::string>& present) {
  return absl::NotFoundError(absl::StrCat(
      "model repository '", repository, "' has no model directory '", name, "' (it has ",
      present.empty() ? std::string("none") : absl::StrJoin(present, ", "), ")"));
}

absl::Status ModelManager::LoadModel(const std::string& model_dir) {
  const std::string name = std::filesystem::path(model_dir).filename().string();
  std::map<int64_t, absl::Status> tried;  // known once the config and the version directories are read
  absl::StatusOr<LoadedVersions> loaded = BuildRuntimes(model_dir, &tried);
  if (!loaded.ok()) {
    registry_->MarkFailed(name, loaded.status(), tried);
    return loaded.status();
  }
  std::vector<std::shared_ptr<ModelRuntime>> shared;
  for (auto& runtime : loaded->runtimes) shared.push_back(std::move(runtime));
  registry_->Add(std::move(shared), loaded->failed);
  return absl::OkStatus();
}

namespace {
// `status` with the version it is about in front: "version 2 (of the versions its version policy
// serves: 1, 2, 3): ...".
absl::Status NameVersion(int64_t version, const std::vector<int64_t>& served, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("version ", version, " (of the versions its version policy serves: ",
                                                  absl::StrJoin(served, ", "), "): ", status.message()));
}
}  // namespace

absl::StatusOr<ModelManager::LoadedVersions> ModelManager::BuildRuntimes(const std::string& model_dir,
                                                                         std::map<int64_t, absl::Status>* tried,
                                                                         const std::string* config_json,
                                                                         const std::atomic<bool>* stop) {
  const std::string name = std::filesystem::path(model_dir).filename().string();
  auto specs = LoadModelVersions(model_dir, config_json);
  if (!specs.ok()) {
    CS_LOG(ERROR) << "model '" << name << "' not loaded: " << specs.status().message();
    return specs.status();
  }
  std::vector<int64_t> served;
  for (const ModelSpec& spec : *specs) served.push_back(spec.version);
  const std::atomic<bool>* stopped = stop != nullptr ? stop : options_.warmup.stop;
  // The versions load at once, up to `threads` (as Triton loads a model's versions side by side),
  // each thread taking the next version not yet taken. Once stopped (an unload, the server's
  // shutdown), a version not yet started is not read; the lowest always starts (its warm-up sees
  // the stop), so a stopped load's error names it.
  std::vector<absl::StatusOr<std::unique_ptr<ModelRuntime>>> built(specs->size());
  const std::string what = absl::StrCat("loading ", specs->size(), " versions of model '", name, "'");
  ForEachOnThreads(specs->size(), LoadThreads(options_.threads, what), [&](size_t i) {
    built[i] = i > 0 && stopped != nullptr && stopped->load()
                   ? absl::Status(absl::UnavailableError(
                         "the load was stopped (the server is shutting down, or an unload of the model was asked "
                         "for) before its files were read"))
                   : BuildVersion(std::move((*specs)[i]), stop, /*one_of_several=*/served.size() > 1);
  });
  if (tried != nullptr) {
    tried->clear();
    for (size_t i = 0; i < built.size(); ++i) (*tried)[served[i]] = built[i].status();
  }

  if (served.size() == 1 && !built[0].ok()) return built[0].status();  // the model's error, no version named
  LoadedVersions loaded;
  for (size_t i = 0; i < built.size(); ++i) {
    if (built[i].ok()) {
      loaded.runtimes.push_back(*std::move(built[i]));
    } else {
      loaded.failed.emplace(served[i], built[i].status());
    }
  }
  // Stopped with a version not loaded: the load fails whole (the versions built are stopped as
  // `loaded` goes, ~ModelRuntime), naming the lowest that failed; so does a load none of whose
  // versions loaded.
  if (!loaded.failed.empty() && (loaded.runtimes.empty() || (stopped != nullptr && stopped->load()))) {
    const auto& [first, status] = *loaded.failed.begin();
    return NameVersion(first, served, status);
  }
  return loaded;
}

absl::StatusOr<std::unique_ptr<ModelRuntime>> ModelManager::BuildVersion(ModelSpec spec_value,
                                                                         const std::atomic<bool>* stop,
                                                                         bool one_of_several) {
  const std::string name = spec_value.name;
  // The version is named in front of a load error (here, NameVersion, the registry): inside it, the
  // worker's and the instance's label ("model 'm' version 2 worker 0") reads as the bare name.
  const std::string label = absl::StrCat("model '", name, "' version ", spec_value.version);
  auto fail = [&](const absl::Status& status) {
    const absl::Status unlabelled =
        one_of_several ? absl::Status(status.code(), absl::StrReplaceAll(status.message(),
                                                                         {{label, absl::StrCat("model '", name, "'")}}))
                       : status;
    CS_LOG(ERROR) << "model '" << name << "' not loaded: "
                  << (one_of_several ? absl::StrCat("version ", spec_value.version, ": ") : "")
                  << unlabelled.message();
    return unlabelled;
  };
  ModelSpec* spec = &spec_value;
  spec->one_of_several_versions = one_of_several;
  if (options_.load_started) options_.load_started(name, spec->version);
  if (absl::Status file = CheckModelFile(*spec); !file.ok()) return fail(file);
  spec->dynamic_batching.queue_policy.max_queue_bytes = options_.max_queue_bytes;
  const int gpu_count = CudaDeviceCount();
  auto groups = ResolveInstanceGroups(*spec, gpu_count);
  if (!groups.ok()) return fail(groups.status());
  // Served as loaded, as Triton serves its normalised config: the ModelConfig RPC reports these.
  spec->instance_groups = *std::move(groups);
  auto placements = PlaceResolvedGroups(spec->name, spec->instance_groups);
  if (!placements.ok()) return fail(placements.status());

  std::vector<HostPolicy> worker_policies;
  for (const DevicePlacement& placement : *placements) {
    auto policy = WorkerHostPolicy(options_.host_policies, placement.host_policy, placement.gpu, spec->name);
    if (!policy.ok()) return fail(policy.status());
    worker_policies.push_back(*std::move(policy));
  }

  const int64_t load_start = clock_->NowNs();
  std::vector<std::unique_ptr<ModelInstance>> instances;
  for (size_t i = 0; i < placements->size(); ++i) {
    InstanceOptions options;
    options.worker = static_cast<int>(i);
    options.gpu = (*placements)[i].gpu;
    options.activity = devices_->Get(options.gpu, clock_->NowNs());
    options.clock = clock_;
    options.gpu_clock = gpu_clock_;
    options.request_timing = options_.request_timing;
    auto instance = CreateTorchInstance(*spec, options);
    if (!instance.ok()) return fail(instance.status());
    instances.push_back(*std::move(instance));
  }
  const int64_t loaded = clock_->NowNs();
  const size_t arena_bytes = InputArenaBytes(*spec, options_.input_arena_bytes);
  WarmupOptions warmup = options_.warmup;
  if (stop != nullptr) warmup.stop = stop;
  auto runtime = ModelRuntime::Create(*spec, std::move(instances), warmup, clock_, worker_policies, arena_bytes,
                                      options_.input_arena_store);
  if (!runtime.ok()) return fail(runtime.status());
  (*runtime)->set_load_ns(loaded - load_start);
  std::string devices;
  for (const auto& w : (*runtime)->workers()) absl::StrAppend(&devices, devices.empty() ? "" : ",", w->instance().device_name());
  CS_LOG(INFO) << "model '" << name << "' version " << spec->version << " READY on [" << devices
               << "]: load " << (loaded - load_start) / 1000000 << " ms, warm-up "
               << (*runtime)->warmup_ns() / 1000000 << " ms (max_batch_size " << spec->max_batch_size
               << WarmupSizesNote(**runtime)
               << ", " << (*runtime)->workers().size() << " worker(s), input arena "
               << ((*runtime)->input_arena() == nullptr ? std::string("off")
                                    : absl::StrCat(arena_bytes >> 20, " MiB per input",
                                                   (*runtime)->input_arena()->pinned() ? ", page-locked" : "",
                                                   ", ", ArenaStoreName((*runtime)->arena_store()), " stores"))
               << ")";
  return *std::move(runtime);
}

}  // namespace chronoserve::server
