// ModelRegistry: the models the server knows, by name — the runtimes serving each one (one per version
// its version policy serves), and models that are still loading, failed to load (with the reason) or
// were unloaded (model control). Thread-safe; the gRPC
// handlers look models up on every request (one mutex, held only to copy a shared_ptr).
#ifndef CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_
#define CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_

#include <functional>
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

// As Triton: a model version that is not a decimal integer >= 0 (surrounding spaces and a '+'
// allowed) is INVALID_ARGUMENT naming `name` (when not empty) and the version; an empty version is
// none named. `parsed` (may be null) receives the number, -1 for none.
absl::Status CheckVersion(const std::string& name, const std::string& version, int64_t* parsed);

class ModelRegistry {
 public:
  // `strict`: as MarkFailed's (a model-control load leaves the server READY while it loads).
  void MarkLoading(const std::string& name, bool strict = true);
  // MarkLoading(name, strict) unless a runtime serves `name` (one check under the registry's lock, so
  // a load that begins to serve meanwhile is never marked loading after it); whether it marked.
  bool MarkLoadingUnlessServed(const std::string& name, bool strict);
  // `versions`: the versions the load tried, when it got that far (empty: not known), each with how
  // its own load went; the index lists each one UNAVAILABLE, with its own error when several were
  // tried and it has one (else `reason`). `strict`: the failure keeps the server from READY
  // (AllReady), as a model the server was started with does; a load asked for by
  // RepositoryModelLoad fails only for its caller (false).
  void MarkFailed(const std::string& name, const absl::Status& reason,
                  const std::map<int64_t, absl::Status>& versions = {}, bool strict = true);
  // MarkFailed (not strict) for a load dropped before it ran (an unload asked for while it waited):
  // it tried no version, so the versions listed before (an unloaded model's) stay listed.
  void MarkLoadDropped(const std::string& name, const absl::Status& reason);
  // Serves `runtimes` (one model's versions, at least one, each version once) under their name, in
  // place of the versions served before; returns those it replaces (a reload), empty when none.
  // `failed`: the versions of the same load that did not load, with why: lookups that name one answer
  // UNAVAILABLE with it, the index lists it UNAVAILABLE, and (`strict`, as MarkFailed's) it keeps the
  // server from READY.
  std::vector<std::shared_ptr<ModelRuntime>> Add(std::vector<std::shared_ptr<ModelRuntime>> runtimes,
                                                 std::map<int64_t, absl::Status> failed = {}, bool strict = true);
  // A model of one version.
  std::vector<std::shared_ptr<ModelRuntime>> Add(std::shared_ptr<ModelRuntime> runtime);
  // Takes `name` out of service (RepositoryModelUnload): new lookups find it unloaded (NOT_FOUND, or
  // UNAVAILABLE for a named version, as a failed model), the index lists it UNAVAILABLE, unloaded,
  // and it no longer counts for AllReady (a model that failed to load too). Returns the runtimes that
  // served it (every version), for the caller to drain and stop; empty when none did (unknown names
  // and models still loading are left as they are).
  // `why` ends the reason lookups and the index give ("model 'm' is unloaded" + why).
  std::vector<std::shared_ptr<ModelRuntime>> Unload(const std::string& name, const std::string& why);
  // Drops `name`'s entry when no runtime serves it and it is not loading (a model whose directory is
  // gone: the index no longer lists it); whether there was one.
  bool Forget(const std::string& name);
  // The state of `name`: whether it is known at all, and whether a runtime serves it (ready or not).
  bool Knows(const std::string& name) const;
  bool Serves(const std::string& name) const;

  // The runtime for `name` at `version` ("" = the highest version served), as Triton answers:
  // INVALID_ARGUMENT for a version that is not an integer >= 0 (checked first); NOT_FOUND for an
  // unknown model or version (naming the versions served), and for a model that failed to load when
  // no version is named; UNAVAILABLE (with the reason) for one loading, a named version of one that
  // failed, or one skipped at shutdown.
  // With `ticket` (a request to queue): on success it holds the runtime's AdmissionTicket, taken
  // under the registry's lock, so a reload or unload that swaps the runtime out after this lookup
  // waits for the request to be queued.
  absl::StatusOr<std::shared_ptr<ModelRuntime>> Find(const std::string& name, const std::string& version,
                                                     AdmissionTicket* ticket = nullptr) const;
  // Find's answer for `version` "" is every version served, ascending (ModelStatistics); for a named
  // version, that one alone. Errors as Find's.
  absl::StatusOr<std::vector<std::shared_ptr<ModelRuntime>>> FindVersions(const std::string& name,
                                                                          const std::string& version) const;
  // The versions of `name` that serve, ascending (a version that failed to load is not one); empty
  // when none does.
  std::vector<int64_t> ServedVersions(const std::string& name) const;
  // Every runtime of every model, by name, then version.
  std::vector<std::shared_ptr<ModelRuntime>> Ready() const;
  // What a lookup of a name the registry does not know adds after "unknown model 'm'" (e.g. that
  // the repository has it but it is not loaded); "" adds nothing. Called outside the registry's
  // lock, on the looking-up thread. Set before lookups begin (the server sets it at construction).
  void SetUnknownModelHint(std::function<std::string(const std::string& name)> hint) { unknown_hint_ = std::move(hint); }

  // One version of a model in the index (Triton's RepositoryIndex): loaded, loading, or failed with
  // the reason. A model serving several versions has an entry for each.
  struct IndexEntry {
    std::string name;
    int64_t version = 0;  // the version served, tried by a failed load, or listed before (unloaded); 0 when none is known
    enum class State { kReady, kLoading, kUnavailable } state = State::kUnavailable;
    std::string reason;   // why it is not ready ("" when ready)
  };
  // Every model the server knows, by name, then version.
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
  // A model served: its versions, ascending by version (never empty), and those of its load that failed.
  struct Served {
    std::vector<std::shared_ptr<ModelRuntime>> runtimes;
    std::map<int64_t, absl::Status> failed;  // by version: the load's error
    bool strict = true;                      // a failed version keeps the server from READY
  };
  std::map<std::string, Served> ready_ ABSL_GUARDED_BY(mu_);
  // Find's work, under the lock: the model's entry, or why it has none to serve; nullptr for a
  // name the registry does not know (UnknownModel, outside the lock). `version` >= 0: a request
  // that names that version, which a failed model answers UNAVAILABLE, with that version's own load
  // error when its load tried several.
  absl::StatusOr<const Served*> ServedLocked(const std::string& name, int64_t version) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NOT_FOUND for `name`, with the hint's words.
  absl::Status UnknownModel(const std::string& name) const;
  std::function<std::string(const std::string&)> unknown_hint_;
  // `served`'s runtime of `version` (`v` its value; "" = the highest), ready, or why not.
  static absl::StatusOr<std::shared_ptr<ModelRuntime>> VersionOf(const std::string& name, const Served& served,
                                                                 const std::string& version, int64_t v);
  struct NotReady {
    absl::Status reason;
    // The versions it is about (those a failed load tried, those an unload took out of service),
    // one index entry each, with a reason of their own ("" = `reason`'s). Empty: one entry, no
    // version (loading, or a load that failed before its versions were known).
    std::map<int64_t, std::string> versions;
    bool strict = true;  // counts against AllReady (false: unloaded, or a model-control load failed)
  };
  std::map<std::string, NotReady> not_ready_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> loading_ ABSL_GUARDED_BY(mu_);  // of not_ready_, those MarkLoading named last
  // `strict`, or the strictness of `name`'s entry already there: a model the server started with
  // counts against READY until it serves or is unloaded, whatever a later load of it says.
  bool StrictLocked(const std::string& name, bool strict) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkLoadingLocked(const std::string& name, bool strict) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // MarkFailed's work, with the versions to list (their own reasons) made.
  void MarkFailedLocked(const std::string& name, const absl::Status& reason, std::map<int64_t, std::string> listed,
                        bool strict) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // not_ready_'s versions for `name`, without their own reasons (empty when it has no entry).
  std::map<int64_t, std::string> ListedVersionsLocked(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_MODEL_REGISTRY_H_
