// ModelController: --model-control-mode explicit and poll. Loads, reloads and unloads models of the
// repository while the server runs, on threads of its own (--model-load-thread-count, and one more
// that only unloads): different models side by side, one model's requests one after another in the
// order asked. A load takes
// seconds (weights, warm-up) and must hold no gRPC thread. In explicit mode the requests come from
// RepositoryModelLoad / RepositoryModelUnload; in poll mode from the controller's own scans of the
// repository (StartPolling): a new model directory is loaded, one whose files changed is reloaded,
// one removed is unloaded. Closed until the server's own start has loaded its models (Open); Stop
// refuses what is still waiting and ends the threads.
//
//   ModelController control(&registry, &devices, repository, load_options, clock, gpu_clock, hooks);
//   control.Open();                                     // once the server is READY
//   control.Load("resnet", [](absl::Status s) {...});   // answered from the controller's thread
//   control.Stop();                                     // at shutdown, before the gRPC server stops
#ifndef CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_
#define CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_

#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/core/model_control.h"
#include "server/model_manager.h"

namespace chronoserve::server {

class ModelController final : public ModelControl {
 public:
  struct Hooks {
    std::function<void(const ModelRuntime&)> loaded;  // a runtime is READY and about to serve (metrics)
    std::function<void()> changed;                    // the registry changed (the server's health)
    // A model just loaded and serving: its serving path warmed before the load is answered (the
    // server's serving warm-up; may be empty). Stops sending once `stop` is set.
    std::function<void(const ModelSpec&, const std::atomic<bool>* stop)> warm_serving_path;
    // A load or reload of the model starts on a load thread (its stop flag is in place: an unload
    // asked for from now on stops it). May be empty.
    std::function<void(const std::string& model)> load_started;
  };
  // `load_options.warmup.stop` is not used: each load has a stop flag of its own, which Stop, or an
  // unload of its model, sets to end its warm-up early.
  // `threads`: how many loads or unloads of different models may run at once
  // (--model-load-thread-count); requests for one model always run one after another, in order.
  ModelController(ModelRegistry* registry, DeviceActivityRegistry* devices, std::string repository,
                  ModelLoadOptions load_options, const Clock* clock, const GpuClockSource* gpu_clock, Hooks hooks,
                  int threads = kDefaultThreads);
  static constexpr int kDefaultThreads = 4;  // Triton's --model-load-thread-count default
  ~ModelController() override;

  // Takes requests from now on; before, each is answered UNAVAILABLE (the server is still starting).
  void Open();
  // Poll mode: notes what every model directory holds now (call before the start loads them), so
  // the first scan reloads only what changed after this.
  void NoteRepository();
  // Poll mode: from now on, scans the repository every `interval` (after Open) and loads, reloads
  // and unloads what changed since the last scan (NoteRepository's, for the first).
  void StartPolling(absl::Duration interval);
  // Scans done so far, in order (poll mode): a scan is done once the loads and unloads it asked for
  // are; waits until `n` are, up to `timeout`: whether they were.
  int64_t polls() const;
  bool AwaitPolls(int64_t n, absl::Duration timeout) const;
  // Answers the requests still waiting UNAVAILABLE (the server is shutting down), stops the running
  // load at its next warm-up run, and joins the thread. Idempotent; later requests are refused.
  // `exit_deadline` (the server's exit timeout): an unload or reload still draining a retired
  // version's queue then has its queued requests answered UNAVAILABLE, as the served models' are,
  // instead of running them all (a version whose retirement starts after the deadline too); what
  // runs on its workers finishes. Returns how many requests it answered so.
  size_t Stop(absl::Time exit_deadline = absl::InfiniteFuture());

  using ModelControl::Load;
  void Load(const std::string& model, LoadOverrides overrides, Done done) override;
  void Unload(const std::string& model, Done done) override;
  std::vector<std::string> RepositoryModels() const override;
  const std::string& Repository() const override { return repository_; }

 private:
  struct Job {
    enum class Kind { kLoad, kUnload } kind = Kind::kLoad;
    std::string model;
    LoadOverrides overrides;  // kLoad's
    bool scan = false;        // submitted by a repository scan (poll mode)
    std::vector<Done> done;   // the same request made again while this one waited shares its answer
    void Finish(const absl::Status& status) {
      for (Done& d : done) d(status);
    }
  };
  void Submit(Job::Kind kind, const std::string& model, LoadOverrides overrides, Done done, bool scan);
  // For an unload of `model`: stops its load in progress and takes out its loads still waiting (for
  // the caller to answer ABORTED outside the lock).
  std::vector<Job> StopLoadsLocked(const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first waiting job that may start (a model's jobs start in the order they came; with
  // `unloads_only`, an unload whose model has no job before it); jobs_.size() when none may.
  size_t NextRunnableLocked(bool unloads_only) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stopped, or a waiting job may start (on a load thread / on the unload thread).
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasUnloadWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a model directory holds: each file's path, size and modification time; "" when unreadable.
  static std::string Fingerprint(const std::string& model_dir);
  // One scan: submits a load for each model directory new or changed and an unload for each one
  // gone, as jobs like RepositoryModelLoad's (they run up to --model-load-thread-count at once, one
  // model's in order), and returns: a slow load holds up neither the other models nor the next scans.
  void Poll();
  // Scan `scan`'s jobs are all done.
  void ScanDone(int64_t scan);
  void RunPolls(absl::Duration interval);
  // A load thread runs any job; the unload thread (`unloads_only`) only unloads, so that with every
  // load thread busy in a slow load a model can still be taken out of service.
  void Run(bool unloads_only);
  // `stop`: set by Stop, or by an unload of the model asked for meanwhile; ends the warm-up early.
  absl::Status DoLoad(const std::string& model, const LoadOverrides& overrides, const std::atomic<bool>& stop);
  // The runtimes DoLoad serves (one per version): from the repository's directory, or from the files
  // the request sent.
  absl::StatusOr<ModelManager::LoadedVersions> BuildRuntimes(const std::string& model, const LoadOverrides& overrides,
                                                             std::map<int64_t, absl::Status>* tried,
                                                             const std::atomic<bool>* stop);
  // `why`: what the unloaded model's lookups say after "model 'm' is unloaded".
  // `directory_gone`: a poll's scan saw the model's directory leave the repository (it leaves the
  // index, however a listing now would go).
  absl::Status DoUnload(const std::string& model, const std::string& why, bool directory_gone);
  // Stops a runtime taken out of service (in retiring_ already: RetireAll's): once the requests that
  // found it are queued, they run at once (no batching window), then its workers are joined; a
  // request that comes later is refused UNAVAILABLE with `why` ("version 2 was unloaded").
  void Retire(ModelRuntime& runtime, const std::string& why);
  // Retire for each of `runtimes` in turn (`why` names the version), all of them counted as
  // retiring from the start, so that Stop's exit deadline reaches the queues of those not yet begun.
  void RetireAll(const std::vector<std::shared_ptr<ModelRuntime>>& runtimes, const std::string& why);

  ModelRegistry* const registry_;
  const std::string repository_;
  const Hooks hooks_;
  std::atomic<bool> stopping_{false};  // Stop was called: new loads start stopped, the serving warm-up ends
  ModelManager manager_;

  mutable absl::Mutex mu_;
  absl::CondVar poll_wake_;  // the poller: Stop
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);  // waiting, in the order they came
  // The models a job runs for, each with its load's stop flag (an unload asked for meanwhile sets
  // it); null for an unload.
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> running_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Runtimes in Retire, for Stop's exit deadline (alive while there: their retirer holds them).
  std::set<ModelRuntime*> retiring_ ABSL_GUARDED_BY(mu_);
  // Stop's exit deadline passed: a retirement abandons its queue instead of running it.
  bool past_exit_deadline_ ABSL_GUARDED_BY(mu_) = false;
  // Requests such a retirement answered, for Stop's count.
  size_t late_abandoned_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t polls_ ABSL_GUARDED_BY(mu_) = 0;  // scans 1..polls_ are done
  int64_t scans_started_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int64_t> scans_done_ ABSL_GUARDED_BY(mu_);  // done, after polls_ (a scan before them is not)
  // Poll mode: the model directories as the last scan saw them (NoteRepository's before the first);
  // only the poller's thread touches it once polling starts (scans run there, one at a time).
  std::map<std::string, std::string> fingerprints_;
  std::thread poller_;  // poll mode: scans the repository every interval
  std::vector<std::thread> threads_;  // run the jobs (--model-load-thread-count, then the unload thread); started last
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_
