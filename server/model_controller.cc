#include "server/model_controller.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/repository/model_config_loader.h"

namespace chronoserve::server {
namespace {
ModelLoadOptions WithStop(ModelLoadOptions options, const std::atomic<bool>* stop) {
  options.warmup.stop = stop;
  return options;
}
}  // namespace

ModelController::ModelController(ModelRegistry* registry, DeviceActivityRegistry* devices, std::string repository,
                                 ModelLoadOptions load_options, const Clock* clock,
                                 const GpuClockSource* gpu_clock, Hooks hooks)
    : registry_(registry),
      repository_(std::move(repository)),
      hooks_(std::move(hooks)),
      manager_(registry, devices, WithStop(std::move(load_options), &stopping_), clock, gpu_clock) {
  thread_ = std::thread([this] { Run(); });
}

ModelController::~ModelController() { Stop(); }

void ModelController::Open() {
  absl::MutexLock lock(&mu_);
  open_ = true;
}

void ModelController::Stop() {
  std::deque<Job> refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    refused.swap(jobs_);
    wake_.Signal();
  }
  stopping_ = true;
  for (Job& job : refused) {
    job.done(absl::UnavailableError(absl::StrCat("model '", job.model, "' not ", job.load ? "loaded" : "unloaded",
                                                 ": the server is shutting down")));
  }
  if (thread_.joinable()) thread_.join();
}

void ModelController::Load(const std::string& model, Done done) {
  Submit(Job{true, model, std::move(done)});
}

void ModelController::Unload(const std::string& model, Done done) {
  Submit(Job{false, model, std::move(done)});
}

void ModelController::Submit(Job job) {
  if (absl::Status named = ValidateModelName(job.model); !named.ok()) {
    job.done(named);
    return;
  }
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      refused = absl::UnavailableError(absl::StrCat("model '", job.model, "' not ", job.load ? "loaded" : "unloaded",
                                                    ": the server is shutting down"));
    } else if (!open_) {
      refused = absl::UnavailableError(absl::StrCat("model '", job.model, "' not ", job.load ? "loaded" : "unloaded",
                                                    ": the server is still loading its models at start"));
    } else {
      jobs_.push_back(std::move(job));
      wake_.Signal();
      return;
    }
  }
  job.done(refused);
}

std::vector<std::string> ModelController::RepositoryModels() const {
  absl::StatusOr<std::vector<std::string>> names = ListModelDirectories(repository_);
  return names.ok() ? *std::move(names) : std::vector<std::string>{};
}

void ModelController::Run() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      while (jobs_.empty() && !stopped_) wake_.Wait(&mu_);
      if (jobs_.empty()) return;  // stopped
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const absl::Status status = job.load ? DoLoad(job.model) : DoUnload(job.model);
    if (hooks_.changed) hooks_.changed();
    job.done(status);
  }
}

absl::Status ModelController::DoLoad(const std::string& model) {
  absl::StatusOr<std::vector<std::string>> present = ListModelDirectories(repository_);
  if (!present.ok()) return present.status();
  if (std::find(present->begin(), present->end(), model) == present->end()) {
    return NoSuchModelDirectory(repository_, model, *present);
  }
  const bool reload = registry_->Serves(model);
  CS_LOG(INFO) << (reload ? "reloading" : "loading") << " model '" << model << "' (RepositoryModelLoad)";
  if (!reload) registry_->MarkLoading(model, /*strict=*/false);
  int64_t version = 0;
  absl::StatusOr<std::unique_ptr<ModelRuntime>> built =
      manager_.BuildRuntime((std::filesystem::path(repository_) / model).string(), &version);
  if (!built.ok()) {
    if (reload) {
      CS_LOG(WARNING) << "model '" << model << "': the reload failed; the version loaded before goes on serving";
      return absl::Status(built.status().code(),
                          absl::StrCat("model '", model, "' not reloaded (the version loaded before goes on serving): ",
                                       built.status().message()));
    }
    registry_->MarkFailed(model, built.status(), version, /*strict=*/false);
    return built.status();
  }
  std::shared_ptr<ModelRuntime> runtime(*std::move(built));
  if (hooks_.loaded) hooks_.loaded(*runtime);
  std::shared_ptr<ModelRuntime> replaced = registry_->Add(runtime);
  if (replaced != nullptr) {
    // New requests find the new runtime from here on; the old one's queued requests run on its own
    // workers, and the calls that hold it finish there.
    Retire(*replaced);
    CS_LOG(INFO) << "model '" << model << "': version " << replaced->spec().version << " replaced by version "
                 << runtime->spec().version;
  }
  // Like the server's start: the first requests after the answer find the serving path warm.
  if (hooks_.warm_serving_path) hooks_.warm_serving_path(runtime->spec(), &stopping_);
  return absl::OkStatus();
}

absl::Status ModelController::DoUnload(const std::string& model) {
  std::shared_ptr<ModelRuntime> runtime = registry_->Unload(model);
  if (runtime == nullptr) {
    if (registry_->Knows(model)) {
      CS_LOG(INFO) << "model '" << model << "' unloaded (RepositoryModelUnload; it was not serving)";
      return absl::OkStatus();
    }
    const std::vector<std::string> present = RepositoryModels();
    if (std::find(present.begin(), present.end(), model) != present.end()) return absl::OkStatus();  // never loaded
    return absl::NotFoundError(absl::StrCat("no model '", model, "' to unload: the server has never loaded it and ",
                                            NoSuchModelDirectory(repository_, model, present).message()));
  }
  if (hooks_.changed) hooks_.changed();  // not ready from here on, while its queue drains
  Retire(*runtime);
  CS_LOG(INFO) << "model '" << model << "' version " << runtime->spec().version << " unloaded (RepositoryModelUnload)";
  return absl::OkStatus();
}

void ModelController::Retire(ModelRuntime& runtime) {
  // Requests that found the runtime before it left the registry are queued first, so they run.
  if (!runtime.AwaitAdmitted(absl::Seconds(10))) {
    CS_LOG(WARNING) << "model '" << runtime.spec().name << "': requests still on their way to version "
                    << runtime.spec().version << "'s queue after 10 s; closing it (they are answered UNAVAILABLE)";
  }
  runtime.CloseQueue();
  runtime.Stop();
}

}  // namespace chronoserve::server
