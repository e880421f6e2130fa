// ModelRegistry: the models the server knows, by name — ready runtimes, and models that are still
// loading or failed to load (with the reason). Thread-safe; the gRPC handlers look models up on
// every request (one mutex, held only to copy a shared_ptr).
#ifndef CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_
#define CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/scheduler/model_runtime.h"

namespace chronoserve::server {

class ModelRegistry {
 public:
  void MarkLoading(const std::string& name);
  // `version`: the version the load tried, when it got that far (0: not known).
  void MarkFailed(const std::string& name, const absl::Status& reason, int64_t version = 0);
  void Add(std::shared_ptr<ModelRuntime> runtime);

  // The runtime for `name` at `version` ("" = the served version), as Triton answers: INVALID_ARGUMENT
  // for a version that is not an integer >= 0 (checked first); NOT_FOUND for an unknown model or
  // version, and for a model that failed to load when no version is named; UNAVAILABLE (with the
  // reason) for one loading, a named version of one that failed, or one skipped at shutdown.
  absl::StatusOr<std::shared_ptr<ModelRuntime>> Find(const std::string& name,
                                                     const std::string& version) const;
  std::vector<std::shared_ptr<ModelRuntime>> Ready() const;

  // One model of the index (Triton's RepositoryIndex): loaded, loading, or failed with the reason.
  struct IndexEntry {
    std::string name;
    int64_t version = 0;  // the version served, or the one a failed load tried; 0 while loading or not known
    enum class State { kReady, kLoading, kUnavailable } state = State::kUnavailable;
    std::string reason;   // why it is not ready ("" when ready)
  };
  // Every model the server knows, by name.
  std::vector<IndexEntry> Index() const;
  // True when every known model is ready (and there is at least one model or none failed).
  bool AllReady() const;

  // Stops every runtime (closes queues, joins workers). Idempotent.
  void StopAll();
  // Every runtime's AbandonQueued(reason): queued requests are answered, not run (exit timeout).
  // Returns how many were answered.
  size_t AbandonQueued(const std::string& reason);
  // Every runtime's CloseQueue(): the drain at shutdown runs queued requests at once.
  void CloseQueues();

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ModelRuntime>> ready_ ABSL_GUARDED_BY(mu_);
  struct NotReady {
    absl::Status reason;
    int64_t version = 0;  // MarkFailed's: the version the load tried (0: not known, or loading)
  };
  std::map<std::string, NotReady> not_ready_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> loading_ ABSL_GUARDED_BY(mu_);  // of not_ready_, those MarkLoading named last
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_
