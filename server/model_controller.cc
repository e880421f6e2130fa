#include "server/model_controller.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/log.h"
#include "server/repository/model_config_loader.h"
#include "server/repository/override_files.h"

namespace chronoserve::server {
ModelController::ModelController(ModelRegistry* registry, DeviceActivityRegistry* devices, std::string repository,
                                 ModelLoadOptions load_options, const Clock* clock,
                                 const GpuClockSource* gpu_clock, Hooks hooks, int threads)
    : registry_(registry),
      repository_(std::move(repository)),
      hooks_(std::move(hooks)),
      manager_(registry, devices, std::move(load_options), clock, gpu_clock) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Run(/*unloads_only=*/false); });
  threads_.emplace_back([this] { Run(/*unloads_only=*/true); });
}

ModelController::~ModelController() { Stop(); }

void ModelController::Open() {
  absl::MutexLock lock(&mu_);
  open_ = true;
}

size_t ModelController::Stop(absl::Time exit_deadline) {
  std::deque<Job> refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return 0;
    stopped_ = true;
    refused.swap(jobs_);
    poll_wake_.Signal();
    stopping_ = true;
    for (auto& [model, stop] : running_) {
      if (stop != nullptr) stop->store(true);
    }
  }
  for (Job& job : refused) {
    job.Finish(absl::UnavailableError(absl::StrCat("model '", job.model, "' not ",
                                                   job.kind == Job::Kind::kLoad ? "loaded" : "unloaded",
                                                   ": the server is shutting down")));
  }
  if (poller_.joinable()) poller_.join();
  size_t abandoned = 0;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty(); };
    if (!mu_.AwaitWithDeadline(absl::Condition(&idle), exit_deadline)) {
      // Past the exit timeout: a retired version's queue is answered as the served ones' are (and
      // one whose retirement begins later, by Retire).
      past_exit_deadline_ = true;
      for (ModelRuntime* runtime : retiring_) {
        abandoned += runtime->AbandonQueued(ModelRuntime::kExitTimeoutReason);
      }
    }
  }
  if (abandoned > 0) {
    CS_LOG(WARNING) << "exit timeout: " << abandoned
                    << " request(s) queued on an unloaded or replaced version answered UNAVAILABLE";
  }
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  absl::MutexLock lock(&mu_);
  return abandoned + late_abandoned_;  // with those a retirement begun after the deadline answered
}

void ModelController::Load(const std::string& model, LoadOverrides overrides, Done done) {
  Submit(Job::Kind::kLoad, model, std::move(overrides), std::move(done), /*scan=*/false);
}

void ModelController::Unload(const std::string& model, Done done) {
  Submit(Job::Kind::kUnload, model, {}, std::move(done), /*scan=*/false);
}

void ModelController::Submit(Job::Kind kind, const std::string& model, LoadOverrides overrides, Done done,
                             bool scan) {
  if (absl::Status named = ValidateModelName(model); !named.ok()) return done(named);
  const bool load = kind == Job::Kind::kLoad;
  // A model the repository does not hold is refused before it waits for anything (unless its files
  // came with the request).
  if (load && overrides.files.empty()) {
    absl::StatusOr<std::vector<std::string>> listed = ListModelDirectories(repository_);
    if (!listed.ok()) return done(listed.status());
    if (std::find(listed->begin(), listed->end(), model) == listed->end()) {
      return done(NoSuchModelDirectory(repository_, model, *listed));
    }
  }
  absl::Status refused;
  std::vector<Job> dropped;  // loads of the model still waiting when an unload of it comes
  // The name copied: `model` may be the caller's request, which the unload's `done`, queued below
  // and run by a controller thread before this cleanup, can free (its answer ends the call).
  absl::Cleanup answer_dropped = [&dropped, model = model] {
    for (Job& job : dropped) {
      job.Finish(absl::AbortedError(absl::StrCat("model '", model, "' not loaded: an unload of it was asked for "
                                                                  "while the load waited its turn; the unload runs next")));
    }
  };
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      refused = absl::UnavailableError(absl::StrCat("model '", model, "' not ", load ? "loaded" : "unloaded",
                                                    ": the server is shutting down"));
    } else if (!open_) {
      refused = absl::UnavailableError(absl::StrCat("model '", model, "' not ", load ? "loaded" : "unloaded",
                                                    ": the server is still loading its models at start"));
    } else {
      if (!load) dropped = StopLoadsLocked(model);
      // The same request as the last one still waiting for this model: answered by the same run.
      for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
        if (it->model != model) continue;
        if (it->kind == kind && it->overrides == overrides && it->scan == scan) {
          it->done.push_back(std::move(done));
          return;
        }
        break;
      }
      // A model not served shows LOADING from now, not what it was, while its load waits its turn.
      if (load) registry_->MarkLoadingUnlessServed(model, /*strict=*/false);
      jobs_.push_back(Job{kind, model, std::move(overrides), scan, {}});
      jobs_.back().done.push_back(std::move(done));
      return;
    }
  }
  done(refused);
}

std::vector<ModelController::Job> ModelController::StopLoadsLocked(const std::string& model) {
  // The load in progress stops at its next warm-up run: that load fails, then the unload runs in its
  // turn. (running_ holds a load's stop flag, an unload's null.)
  const auto running = running_.find(model);
  const bool load_running = running != running_.end() && running->second != nullptr;
  if (load_running) running->second->store(true);
  // The loads still waiting never start.
  std::vector<Job> dropped;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->model == model && it->kind == Job::Kind::kLoad) {
      dropped.push_back(std::move(*it));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  // A model not served leaves the LOADING they marked, so that the unload finds it and says it
  // unloaded (a load running decides the state itself).
  if (!dropped.empty() && !load_running && !registry_->Serves(model)) {
    registry_->MarkLoadDropped(model, absl::AbortedError("an unload of it was asked for while its load waited"));
  }
  return dropped;
}

std::vector<std::string> ModelController::RepositoryModels() const {
  absl::StatusOr<std::vector<std::string>> names = ListModelDirectories(repository_);
  return names.ok() ? *std::move(names) : std::vector<std::string>{};
}

size_t ModelController::NextRunnableLocked(bool unloads_only) const {
  std::set<std::string> waiting;  // models with an earlier job still waiting: theirs go in order
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& job = jobs_[i];
    if (waiting.count(job.model) > 0) continue;
    // No other job for its model runs (and, on the unload thread, it unloads).
    if (running_.count(job.model) == 0 && (!unloads_only || job.kind == Job::Kind::kUnload)) return i;
    waiting.insert(job.model);
  }
  return jobs_.size();
}

bool ModelController::HasWorkLocked() const { return stopped_ || NextRunnableLocked(false) < jobs_.size(); }

bool ModelController::HasUnloadWorkLocked() const { return stopped_ || NextRunnableLocked(true) < jobs_.size(); }

void ModelController::Run(bool unloads_only) {
  while (true) {
    Job job;
    std::shared_ptr<std::atomic<bool>> stop;  // a load's: set by Stop or by an unload of its model
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, unloads_only ? &ModelController::HasUnloadWorkLocked
                                                   : &ModelController::HasWorkLocked));
      if (stopped_) return;  // Stop answers what waits
      const size_t next = NextRunnableLocked(unloads_only);
      job = std::move(jobs_[next]);
      jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(next));
      if (job.kind == Job::Kind::kLoad) stop = std::make_shared<std::atomic<bool>>(stopping_.load());
      running_[job.model] = stop;
    }
    if (stop != nullptr && hooks_.load_started) hooks_.load_started(job.model);
    const absl::Status status =
        job.kind == Job::Kind::kLoad
            ? DoLoad(job.model, job.overrides, *stop)
            : DoUnload(job.model,
                       job.scan ? ": its directory left the model repository (--model-control-mode poll)"
                                : " (RepositoryModelUnload); RepositoryModelLoad serves it again",
                       /*directory_gone=*/job.scan);
    if (hooks_.changed) hooks_.changed();
    job.Finish(status);  // before the model's next request may start: its answers go in order
    absl::MutexLock lock(&mu_);
    running_.erase(job.model);
  }
}

namespace {
// "1, 2, 3": the versions of a model's runtimes, as logs name them.
std::string VersionList(const std::vector<std::shared_ptr<ModelRuntime>>& runtimes) {
  std::vector<int64_t> versions;
  for (const auto& runtime : runtimes) versions.push_back(runtime->spec().version);
  return absl::StrJoin(versions, ", ");
}
}  // namespace

absl::Status ModelController::DoLoad(const std::string& model, const LoadOverrides& overrides,
                                     const std::atomic<bool>& stop) {
  absl::StatusOr<std::vector<std::string>> present = ListModelDirectories(repository_);
  if (!present.ok()) {
    // The repository unreadable (unmounted, removed): a model not served leaves LOADING for the error.
    if (!registry_->Serves(model)) registry_->MarkFailed(model, present.status(), {}, /*strict=*/false);
    return present.status();
  }
  if (overrides.files.empty() && std::find(present->begin(), present->end(), model) == present->end()) {
    // Gone while the load waited its turn: a model not served leaves LOADING, and the index.
    absl::Status gone = NoSuchModelDirectory(repository_, model, *present);
    if (!registry_->Serves(model)) {
      registry_->MarkFailed(model, gone, {}, /*strict=*/false);
      registry_->Forget(model);
    }
    return gone;
  }
  const bool reload = registry_->Serves(model);
  CS_LOG(INFO) << (reload ? "reloading" : "loading") << " model '" << model << "'"
               << (overrides.files.empty() ? "" : absl::StrCat(" from the ", overrides.files.size(),
                                                               " file(s) sent with the request"));
  if (!reload) registry_->MarkLoading(model, /*strict=*/false);
  std::map<int64_t, absl::Status> tried;
  absl::StatusOr<ModelManager::LoadedVersions> built = BuildRuntimes(model, overrides, &tried, &stop);
  if (!built.ok() && stopping_) {  // the warm-up stopped at shutdown: say which model
    built = absl::UnavailableError(absl::StrCat("model '", model, "' not ", reload ? "reloaded" : "loaded",
                                                ": the server is shutting down"));
  } else if (!built.ok() && stop.load()) {  // an unload of the model came while it loaded
    built = absl::AbortedError("an unload of it was asked for while it loaded (RepositoryModelUnload, or its "
                               "directory left the model repository); the unload runs next");
  }
  if (!built.ok()) {
    // A reload stopped by the shutdown changes nothing: the version served before stays served
    // (and drains with the others), not marked failed beside it.
    if (reload && stopping_) return built.status();
    if (reload) {
      CS_LOG(WARNING) << "model '" << model << "': the reload failed; the version loaded before goes on serving";
      return absl::Status(built.status().code(),
                          absl::StrCat("model '", model, "' not reloaded (the version loaded before goes on serving): ",
                                       built.status().message()));
    }
    // A load the shutdown or an unload stopped lists its versions with that reason, not the
    // warm-up's "stopped" each version's own load ended with.
    if (stopping_ || stop.load()) {
      for (auto& [tried_version, how] : tried) {
        if (how.code() == absl::StatusCode::kUnavailable) how = absl::OkStatus();  // stopped, not failed
      }
    }
    registry_->MarkFailed(model, built.status(), tried, /*strict=*/false);
    if (stopping_) return built.status();
    return absl::Status(built.status().code(),
                        absl::StrCat("model '", model, "' not loaded: ", built.status().message()));
  }
  // Some versions did not load: a reload keeps the versions loaded before (as any failed reload); a
  // first load serves the versions that loaded, and answers which did not.
  std::string failed_versions;
  for (const auto& [failed, why] : built->failed) {
    absl::StrAppend(&failed_versions, failed_versions.empty() ? "" : "; ", "version ", failed, ": ", why.message());
  }
  const absl::StatusCode failed_code =
      built->failed.empty() ? absl::StatusCode::kOk : built->failed.begin()->second.code();
  if (reload && !built->failed.empty()) {  // the versions built stop as `built` goes (~ModelRuntime)
    CS_LOG(WARNING) << "model '" << model << "': the reload failed; the version loaded before goes on serving";
    return absl::Status(failed_code, absl::StrCat("model '", model,
                                                  "' not reloaded (the version loaded before goes on serving): ",
                                                  failed_versions));
  }
  std::vector<std::shared_ptr<ModelRuntime>> runtimes;
  for (auto& runtime : built->runtimes) {
    if (hooks_.loaded) hooks_.loaded(*runtime);
    runtimes.push_back(std::move(runtime));
  }
  const std::vector<std::shared_ptr<ModelRuntime>> replaced = registry_->Add(runtimes, built->failed, /*strict=*/false);
  if (!replaced.empty()) {
    // New requests find the new runtimes from here on; the old ones' queued requests run on their
    // own workers, and the calls that hold them finish there.
    RetireAll(replaced, "was replaced by a reload");
    CS_LOG(INFO) << "model '" << model << "': version(s) " << VersionList(replaced) << " replaced by version(s) "
                 << VersionList(runtimes);
  }
  // Like the server's start: the first requests after the answer find the serving path warm.
  if (hooks_.warm_serving_path) {
    // The load's own flag: set by the shutdown and by an unload of the model alike.
    for (const auto& runtime : runtimes) hooks_.warm_serving_path(runtime->spec(), &stop);
  }
  if (!built->failed.empty()) {
    return absl::Status(failed_code, absl::StrCat("model '", model, "' loaded in part: version(s) ", VersionList(runtimes),
                                                  " serve; ", failed_versions));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelManager::LoadedVersions> ModelController::BuildRuntimes(
    const std::string& model, const LoadOverrides& overrides, std::map<int64_t, absl::Status>* tried,
    const std::atomic<bool>* stop) {
  const std::string* config = overrides.config ? &*overrides.config : nullptr;
  if (overrides.files.empty()) {
    return manager_.BuildRuntimes((std::filesystem::path(repository_) / model).string(), tried, config, stop);
  }
  // The files sent, in a directory of their own for the load's time; the model reads its weights
  // into memory, so the directory goes as soon as the runtime is built.
  absl::StatusOr<std::unique_ptr<OverrideDirectory>> dir = OverrideDirectory::Write(model, overrides.files);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<ModelManager::LoadedVersions> built = manager_.BuildRuntimes((*dir)->model_dir(), tried, config, stop);
  // Paths in the errors as the request named them ("file:1/model.pt"), not in the directory that goes.
  auto as_sent = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrReplaceAll(status.message(), {{(*dir)->model_dir() + "/", kOverrideFilePrefix},
                                                               {(*dir)->model_dir(), "the files sent"}}));
  };
  if (tried != nullptr) {
    for (auto& [version, how] : *tried) how = as_sent(how);
  }
  if (!built.ok()) return as_sent(built.status());
  for (auto& [failed, why] : built->failed) why = as_sent(why);
  return built;
}

absl::Status ModelController::DoUnload(const std::string& model, const std::string& why, bool directory_gone) {
  // A repository that cannot be listed now (a network filesystem's hiccup) says nothing of the
  // model's directory: taken as there, so that an unloaded model stays in the index; unless the
  // scan that asked for the unload saw it gone. A model the server does not know is not unloaded
  // then: the listing's error is the answer.
  const absl::StatusOr<std::vector<std::string>> listed =
      directory_gone ? std::vector<std::string>{} : ListModelDirectories(repository_);
  if (!listed.ok() && !registry_->Knows(model)) {
    return absl::Status(listed.status().code(), absl::StrCat("cannot unload model '", model, "': ",
                                                             listed.status().message()));
  }
  const std::vector<std::string> present = listed.ok() ? *listed : std::vector<std::string>{};
  const bool in_repository = !listed.ok() || std::find(present.begin(), present.end(), model) != present.end();
  const std::vector<std::shared_ptr<ModelRuntime>> runtimes = registry_->Unload(model, why);
  if (!runtimes.empty()) {
    if (hooks_.changed) hooks_.changed();  // not ready from here on, while its queues drain
    RetireAll(runtimes, "was unloaded");
    CS_LOG(INFO) << "model '" << model << "' version(s) " << VersionList(runtimes) << " unloaded";
  }
  // A model whose directory is gone leaves the index (it could not be loaded again).
  const bool forgotten = !in_repository && registry_->Forget(model);
  if (!runtimes.empty() || forgotten) return absl::OkStatus();
  if (in_repository) return absl::OkStatus();  // not loaded: nothing to do, as Triton
  return absl::NotFoundError(absl::StrCat("no model '", model, "' to unload: it is not loaded and ",
                                          NoSuchModelDirectory(repository_, model, present).message()));
}

std::string ModelController::Fingerprint(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> entries;
  std::error_code ec;
  constexpr size_t kMaxFiles = 100000;  // a directory that large is no model: its changes go unseen
  // Version directories may be links to directories (the loader serves them), so links are
  // followed, to a depth that a link loop cannot make endless.
  constexpr int kMaxDepth = 8;
  for (auto it = fs::recursive_directory_iterator(
           model_dir, fs::directory_options::skip_permission_denied | fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator() && entries.size() < kMaxFiles; it.increment(ec)) {
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || file_ec) continue;
    const auto size = it->file_size(file_ec);
    const auto mtime = it->last_write_time(file_ec);
    if (file_ec) continue;
    entries.push_back(absl::StrCat(fs::relative(it->path(), model_dir, file_ec).string(), " ", size, " ",
                                   mtime.time_since_epoch().count()));
  }
  if (ec) return "";
  std::sort(entries.begin(), entries.end());
  return absl::StrJoin(entries, "\n");
}

void ModelController::NoteRepository() {
  fingerprints_.clear();
  for (const std::string& model : RepositoryModels()) {
    fingerprints_[model] = Fingerprint((std::filesystem::path(repository_) / model).string());
  }
}

void ModelController::StartPolling(absl::Duration interval) {
  poller_ = std::thread([this, interval] { RunPolls(interval); });
}

void ModelController::RunPolls(absl::Duration interval) {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Every interval; Stop wakes it. The scan runs here, on the poller's own thread, so it never
      // waits for a load thread: with every one busy it still finds the changes and queues them.
      // Stopped is checked before the wait too: Stop's signal finds no waiter while this thread is
      // starting or scanning, and would be lost.
      if (stopped_) return;
      poll_wake_.WaitWithTimeout(&mu_, interval);
      if (stopped_) return;
      if (!open_) continue;
    }
    Poll();
  }
}

int64_t ModelController::polls() const {
  absl::MutexLock lock(&mu_);
  return polls_;
}

bool ModelController::AwaitPolls(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return polls_ >= n || stopped_; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout) && polls_ >= n;
}

void ModelController::Poll() {
  int64_t scan = 0;
  {
    absl::MutexLock lock(&mu_);
    scan = ++scans_started_;
  }
  // The scan is done once every job it submitted is: `pending` counts them, and the scan itself.
  auto pending = std::make_shared<std::atomic<int>>(1);
  auto one_done = [this, pending, scan] {
    if (pending->fetch_sub(1) == 1) ScanDone(scan);
  };
  auto submit = [&](Job::Kind kind, const std::string& model) {
    pending->fetch_add(1);
    Submit(kind, model, {}, [one_done](const absl::Status&) { one_done(); }, /*scan=*/true);
  };
  absl::StatusOr<std::vector<std::string>> present = ListModelDirectories(repository_);
  if (!present.ok()) {
    CS_LOG(WARNING) << "repository poll: " << present.status().message() << "; the models loaded go on serving";
  } else if (!stopping_) {
    for (const std::string& model : *present) {
      const std::string fingerprint = Fingerprint((std::filesystem::path(repository_) / model).string());
      auto known = fingerprints_.find(model);
      if (known != fingerprints_.end() && known->second == fingerprint) continue;
      const bool added = known == fingerprints_.end();
      fingerprints_[model] = fingerprint;  // a load that fails is tried again once its files change
      CS_LOG(INFO) << "repository poll: model directory '" << model << "' " << (added ? "added" : "changed");
      submit(Job::Kind::kLoad, model);  // LOADING from now, if not served, while it waits for a thread
    }
    for (auto it = fingerprints_.begin(); it != fingerprints_.end();) {
      if (std::find(present->begin(), present->end(), it->first) != present->end()) {
        ++it;
        continue;
      }
      CS_LOG(INFO) << "repository poll: model directory '" << it->first << "' removed";
      submit(Job::Kind::kUnload, it->first);
      it = fingerprints_.erase(it);
    }
  }
  one_done();
}

void ModelController::ScanDone(int64_t scan) {
  absl::MutexLock lock(&mu_);
  scans_done_.insert(scan);
  // polls_ counts scans done in order: once it reads n, the changes of every scan up to n are made.
  while (scans_done_.erase(polls_ + 1) > 0) ++polls_;
}

void ModelController::Retire(ModelRuntime& runtime, const std::string& why) {
  bool late = false;
  {
    absl::MutexLock lock(&mu_);
    late = past_exit_deadline_;
  }
  // Requests that found the runtime before it left the registry are queued first, so they run.
  if (!late && !runtime.AwaitAdmitted(absl::Seconds(10))) {
    CS_LOG(WARNING) << "model '" << runtime.spec().name << "': requests still on their way to version "
                    << runtime.spec().version << "'s queue after 10 s; closing it (they are answered UNAVAILABLE)";
  }
  {
    absl::MutexLock lock(&mu_);
    late = past_exit_deadline_;  // once set, Stop has abandoned the queues retiring then, this one's too
  }
  if (late) {
    if (const size_t abandoned = runtime.AbandonQueued(ModelRuntime::kExitTimeoutReason); abandoned > 0) {
      CS_LOG(WARNING) << "exit timeout: " << abandoned << " request(s) queued on model '" << runtime.spec().name
                      << "' version " << runtime.spec().version << " (" << why << ") answered UNAVAILABLE";
      absl::MutexLock lock(&mu_);
      late_abandoned_ += abandoned;  // Stop's count, for the grace those answers get
    }
  }
  runtime.CloseQueue(why);
  runtime.Stop();
  absl::MutexLock lock(&mu_);
  retiring_.erase(&runtime);
}

void ModelController::RetireAll(const std::vector<std::shared_ptr<ModelRuntime>>& runtimes, const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& runtime : runtimes) retiring_.insert(runtime.get());
  }
  // "model 'm': version 2 was unloaded"; with several versions served the label names it already:
  // "model 'm' version 2: it was unloaded".
  for (const auto& runtime : runtimes) {
    const ModelSpec& spec = runtime->spec();
    Retire(*runtime,
           spec.one_of_several_versions ? absl::StrCat("it ", why) : absl::StrCat("version ", spec.version, " ", why));
  }
}

}  // namespace chronoserve::server
