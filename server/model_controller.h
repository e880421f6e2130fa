// ModelController: --model-control-mode explicit. Loads, reloads and unloads models of the
// repository while the server runs (RepositoryModelLoad / RepositoryModelUnload), one at a time, in
// the order asked, on a thread of its own: a load takes seconds (weights, warm-up) and must hold no
// gRPC thread. Closed until the server's own start has loaded its models (Open); Stop refuses what
// is still waiting and ends the thread.
//
//   ModelController control(&registry, &devices, repository, load_options, clock, gpu_clock, hooks);
//   control.Open();                                     // once the server is READY
//   control.Load("resnet", [](absl::Status s) {...});   // answered from the controller's thread
//   control.Stop();                                     // at shutdown, before the gRPC server stops
#ifndef CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_
#define CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
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
  };
  // `load_options.warmup.stop` is replaced by the controller's own (Stop ends a warm-up early).
  ModelController(ModelRegistry* registry, DeviceActivityRegistry* devices, std::string repository,
                  ModelLoadOptions load_options, const Clock* clock, const GpuClockSource* gpu_clock, Hooks hooks);
  ~ModelController() override;

  // Takes requests from now on; before, each is answered UNAVAILABLE (the server is still starting).
  void Open();
  // Answers the requests still waiting UNAVAILABLE (the server is shutting down), stops the running
  // load at its next warm-up run, and joins the thread. Idempotent; later requests are refused.
  void Stop();

  void Load(const std::string& model, Done done) override;
  void Unload(const std::string& model, Done done) override;
  std::vector<std::string> RepositoryModels() const override;
  const std::string& Repository() const override { return repository_; }

 private:
  struct Job {
    bool load = true;  // false: unload
    std::string model;
    Done done;
  };
  void Submit(Job job);
  void Run();
  absl::Status DoLoad(const std::string& model);
  absl::Status DoUnload(const std::string& model);
  // Stops a runtime taken out of service: once the requests that found it are queued, they run at
  // once (no batching window), then its workers are joined.
  static void Retire(ModelRuntime& runtime);

  ModelRegistry* const registry_;
  const std::string repository_;
  const Hooks hooks_;
  std::atomic<bool> stopping_{false};  // the loads' warm-up stop
  ModelManager manager_;

  absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started last
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_MODEL_CONTROLLER_H_
