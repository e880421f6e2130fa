#include "server/scheduler/model_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {

namespace {
// "model 'm' version 2 failed to load: ..." (one version of several).
std::string FailedVersionMessage(const std::string& name, int64_t version, const absl::Status& why) {
  return absl::StrCat("model '", name, "' version ", version, " failed to load: ", why.message());
}
}  // namespace

bool ModelRegistry::StrictLocked(const std::string& name, bool strict) const {
  auto it = not_ready_.find(name);
  return strict || (it != not_ready_.end() && it->second.strict);
}

std::map<int64_t, std::string> ModelRegistry::ListedVersionsLocked(const std::string& name) const {
  std::map<int64_t, std::string> versions;
  if (auto it = not_ready_.find(name); it != not_ready_.end()) {
    for (const auto& [version, own] : it->second.versions) versions[version] = "";
  }
  return versions;
}

void ModelRegistry::MarkLoadingLocked(const std::string& name, bool strict) {
  // The versions listed before (an unloaded model's) stay listed, loading.
  not_ready_[name] = NotReady{absl::UnavailableError(absl::StrCat("model '", name, "' is loading")),
                              ListedVersionsLocked(name), StrictLocked(name, strict)};
  loading_.insert(name);
}

void ModelRegistry::MarkLoading(const std::string& name, bool strict) {
  absl::MutexLock lock(&mu_);
  MarkLoadingLocked(name, strict);
}

bool ModelRegistry::MarkLoadingUnlessServed(const std::string& name, bool strict) {
  absl::MutexLock lock(&mu_);
  if (ready_.count(name) > 0) return false;
  MarkLoadingLocked(name, strict);
  return true;
}

void ModelRegistry::MarkFailed(const std::string& name, const absl::Status& reason,
                               const std::map<int64_t, absl::Status>& versions, bool strict) {
  // Each version tried is listed; with its own error when it is one of several and has one.
  std::map<int64_t, std::string> listed;
  for (const auto& [version, why] : versions) {
    listed[version] = why.ok() || versions.size() == 1 ? "" : FailedVersionMessage(name, version, why);
  }
  absl::MutexLock lock(&mu_);
  MarkFailedLocked(name, reason, std::move(listed), strict);
}

void ModelRegistry::MarkLoadDropped(const std::string& name, const absl::Status& reason) {
  absl::MutexLock lock(&mu_);
  MarkFailedLocked(name, reason, ListedVersionsLocked(name), /*strict=*/false);
}

void ModelRegistry::MarkFailedLocked(const std::string& name, const absl::Status& reason,
                                     std::map<int64_t, std::string> listed, bool strict) {
  // NOT_FOUND as Triton answers a model with no version to serve; a named version is UNAVAILABLE
  // (Find). Loading is UNAVAILABLE either way: it is worth retrying, a load error is not. A load
  // skipped or stopped because the server is shutting down (UNAVAILABLE) stays UNAVAILABLE.
  loading_.erase(name);
  std::string message = absl::StrCat("model '", name, "' failed to load: ", reason.message());
  not_ready_[name] = NotReady{reason.code() == absl::StatusCode::kUnavailable ? absl::UnavailableError(std::move(message))
                                                                     : absl::NotFoundError(std::move(message)),
                      std::move(listed), StrictLocked(name, strict)};
}

absl::Status CheckVersion(const std::string& name, const std::string& version, int64_t* parsed) {
  int64_t v = -1;
  if (version.empty() || (absl::SimpleAtoi(version, &v) && v >= 0)) {
    if (parsed != nullptr) *parsed = version.empty() ? -1 : v;
    return absl::OkStatus();
  }
  // Both cut short (a client's text of any length), so that the expectation survives the 1 KiB cut.
  return absl::InvalidArgumentError(absl::StrCat(name.empty() ? "" : absl::StrCat("model '", ClientName(name), "': "),
                                                 "version '", ClientName(version), "' is not an integral value >= 0"));
}

std::vector<std::shared_ptr<ModelRuntime>> ModelRegistry::Add(std::vector<std::shared_ptr<ModelRuntime>> runtimes,
                                                               std::map<int64_t, absl::Status> failed, bool strict) {
  if (runtimes.empty()) return {};
  std::sort(runtimes.begin(), runtimes.end(),
            [](const auto& a, const auto& b) { return a->spec().version < b->spec().version; });
  absl::MutexLock lock(&mu_);
  const std::string name = runtimes.front()->spec().name;
  strict = StrictLocked(name, strict);
  not_ready_.erase(name);
  loading_.erase(name);
  Served& slot = ready_[name];
  std::swap(slot.runtimes, runtimes);
  slot.failed = std::move(failed);
  slot.strict = strict;
  return runtimes;
}

std::vector<std::shared_ptr<ModelRuntime>> ModelRegistry::Add(std::shared_ptr<ModelRuntime> runtime) {
  std::vector<std::shared_ptr<ModelRuntime>> one;
  one.push_back(std::move(runtime));
  return Add(std::move(one));
}

std::vector<std::shared_ptr<ModelRuntime>> ModelRegistry::Unload(const std::string& name, const std::string& why) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ModelRuntime>> runtimes;
  std::map<int64_t, std::string> versions;  // each listed as unloaded, as Triton lists them
  if (auto it = ready_.find(name); it != ready_.end()) {
    runtimes = std::move(it->second.runtimes);
    for (const auto& runtime : runtimes) versions[runtime->spec().version] = "";
    for (const auto& [version, failed] : it->second.failed) versions[version] = "";
    ready_.erase(it);
  } else if (auto nr = not_ready_.find(name); nr != not_ready_.end() && loading_.count(name) == 0) {
    // A failed model: unloaded, it no longer counts against READY.
    for (const auto& [version, own] : nr->second.versions) versions[version] = "";
  } else {
    return {};  // unknown, or loading (its load decides)
  }
  // NOT_FOUND as a model with no version to serve (Find: a named version is UNAVAILABLE).
  not_ready_[name] = NotReady{absl::NotFoundError(absl::StrCat("model '", name, "' is unloaded", why)),
                              std::move(versions), /*strict=*/false};
  return runtimes;
}

bool ModelRegistry::Forget(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (ready_.count(name) > 0 || loading_.count(name) > 0) return false;
  return not_ready_.erase(name) > 0;
}

bool ModelRegistry::Knows(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return ready_.count(name) > 0 || not_ready_.count(name) > 0;
}

bool ModelRegistry::Serves(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return ready_.count(name) > 0;
}

std::vector<ModelRegistry::IndexEntry> ModelRegistry::Index() const {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<std::string, int64_t>, IndexEntry> by_name;
  for (const auto& [name, served] : ready_) {
    for (const auto& runtime : served.runtimes) {
      IndexEntry& e = by_name[{name, runtime->spec().version}];
      e.name = name;
      e.version = runtime->spec().version;
      e.state = runtime->ready() ? IndexEntry::State::kReady : IndexEntry::State::kUnavailable;
      if (!runtime->ready()) e.reason = absl::StrCat("model '", name, "' version ", e.version, " is not ready");
    }
    for (const auto& [version, why] : served.failed) {
      IndexEntry& e = by_name[{name, version}];
      e.name = name;
      e.version = version;
      e.state = IndexEntry::State::kUnavailable;
      e.reason = FailedVersionMessage(name, version, why);
    }
  }
  for (const auto& [name, not_ready] : not_ready_) {
    const IndexEntry::State state =
        loading_.count(name) > 0 ? IndexEntry::State::kLoading : IndexEntry::State::kUnavailable;
    const std::string reason(not_ready.reason.message());
    if (not_ready.versions.empty()) by_name[{name, 0}] = IndexEntry{name, 0, state, reason};
    for (const auto& [version, own] : not_ready.versions) {
      by_name[{name, version}] = IndexEntry{name, version, state, own.empty() ? reason : own};
    }
  }
  std::vector<IndexEntry> out;
  for (auto& [key, entry] : by_name) out.push_back(std::move(entry));
  return out;
}

absl::StatusOr<const ModelRegistry::Served*> ModelRegistry::ServedLocked(const std::string& name,
                                                                         int64_t version) const {
  if (auto it = ready_.find(name); it != ready_.end()) return &it->second;
  auto nr = not_ready_.find(name);
  if (nr == not_ready_.end()) return nullptr;
  // A named version of a failed load that tried several: its own error (only a failed load's
  // versions have one), not the model's, which names the lowest version that failed.
  if (auto own = nr->second.versions.find(version); version >= 0 && own != nr->second.versions.end() &&
                                                     !own->second.empty()) {
    return absl::UnavailableError(own->second);
  }
  // A failed model: NOT_FOUND without a version (none to serve), a named version UNAVAILABLE.
  const absl::Status& reason = nr->second.reason;
  if (reason.code() == absl::StatusCode::kNotFound && version >= 0) return absl::UnavailableError(reason.message());
  return reason;
}

absl::Status ModelRegistry::UnknownModel(const std::string& name) const {
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'", unknown_hint_ ? unknown_hint_(name) : ""));
}

absl::StatusOr<std::shared_ptr<ModelRuntime>> ModelRegistry::VersionOf(const std::string& name, const Served& served,
                                                                       const std::string& version, int64_t v) {
  const std::shared_ptr<ModelRuntime>* found = nullptr;
  if (version.empty()) {
    found = &served.runtimes.back();
  } else {
    for (const auto& runtime : served.runtimes) {
      if (runtime->spec().version == v) found = &runtime;
    }
  }
  if (found == nullptr) {
    if (auto failed = served.failed.find(v); failed != served.failed.end()) {
      return absl::UnavailableError(FailedVersionMessage(name, v, failed->second));
    }
    std::vector<int64_t> versions;
    for (const auto& runtime : served.runtimes) versions.push_back(runtime->spec().version);
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version '", version, "' (serving version",
                                            versions.size() > 1 ? "s " : " ", absl::StrJoin(versions, ", "), ")"));
  }
  if (!(*found)->ready()) return absl::UnavailableError(absl::StrCat("model '", name, "' is not ready"));
  return *found;
}

absl::StatusOr<std::shared_ptr<ModelRuntime>> ModelRegistry::Find(const std::string& name,
                                                                  const std::string& version,
                                                                  AdmissionTicket* ticket) const {
  int64_t v = -1;
  if (absl::Status checked = CheckVersion(name, version, &v); !checked.ok()) return checked;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Served* served, ServedLocked(name, v));
    if (served != nullptr) {
      ASSIGN_OR_RETURN(std::shared_ptr<ModelRuntime> runtime, VersionOf(name, *served, version, v));
      if (ticket != nullptr) *ticket = runtime->Admit();
      return runtime;
    }
  }
  return UnknownModel(name);
}

absl::StatusOr<std::vector<std::shared_ptr<ModelRuntime>>> ModelRegistry::FindVersions(
    const std::string& name, const std::string& version) const {
  int64_t v = -1;
  if (absl::Status checked = CheckVersion(name, version, &v); !checked.ok()) return checked;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Served* served, ServedLocked(name, v));
    if (served != nullptr) {
      if (!version.empty()) {
        ASSIGN_OR_RETURN(std::shared_ptr<ModelRuntime> runtime, VersionOf(name, *served, version, v));
        return std::vector<std::shared_ptr<ModelRuntime>>{std::move(runtime)};
      }
      for (const auto& runtime : served->runtimes) {
        if (!runtime->ready()) return absl::UnavailableError(absl::StrCat("model '", name, "' is not ready"));
      }
      return served->runtimes;
    }
  }
  return UnknownModel(name);
}

std::vector<int64_t> ModelRegistry::ServedVersions(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> versions;
  if (auto it = ready_.find(name); it != ready_.end()) {
    for (const auto& runtime : it->second.runtimes) versions.push_back(runtime->spec().version);
  }
  return versions;
}

std::vector<std::shared_ptr<ModelRuntime>> ModelRegistry::Ready() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ModelRuntime>> out;
  for (const auto& [name, served] : ready_) out.insert(out.end(), served.runtimes.begin(), served.runtimes.end());
  return out;
}

bool ModelRegistry::AllReady() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, not_ready] : not_ready_) {
    if (not_ready.strict) return false;
  }
  for (const auto& [name, served] : ready_) {
    if (served.strict && !served.failed.empty()) return false;
    for (const auto& runtime : served.runtimes) {
      if (!runtime->ready()) return false;
    }
  }
  return true;
}

size_t ModelRegistry::AbandonQueued(const std::string& reason) {
  size_t answered = 0;
  for (auto& r : Ready()) answered += r->AbandonQueued(reason);
  return answered;
}

void ModelRegistry::CloseQueues() {
  for (auto& r : Ready()) r->CloseQueue("the server is shutting down");
}

void ModelRegistry::StopAll() {
  for (auto& r : Ready()) r->Stop();
}

}  // namespace chronoserve::server
