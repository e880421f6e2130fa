#include "server/scheduler/model_registry.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server {

bool ModelRegistry::StrictLocked(const std::string& name, bool strict) const {
  auto it = not_ready_.find(name);
  return strict || (it != not_ready_.end() && it->second.strict);
}

void ModelRegistry::MarkLoading(const std::string& name, bool strict) {
  absl::MutexLock lock(&mu_);
  not_ready_[name] =
      NotReady{absl::UnavailableError(absl::StrCat("model '", name, "' is loading")), 0, StrictLocked(name, strict)};
  loading_.insert(name);
}

void ModelRegistry::MarkFailed(const std::string& name, const absl::Status& reason, int64_t version, bool strict) {
  absl::MutexLock lock(&mu_);
  // NOT_FOUND as Triton answers a model with no version to serve; a named version is UNAVAILABLE
  // (Find). Loading is UNAVAILABLE either way: it is worth retrying, a load error is not. A load
  // skipped or stopped because the server is shutting down (UNAVAILABLE) stays UNAVAILABLE.
  loading_.erase(name);
  std::string message = absl::StrCat("model '", name, "' failed to load: ", reason.message());
  not_ready_[name] = NotReady{reason.code() == absl::StatusCode::kUnavailable ? absl::UnavailableError(std::move(message))
                                                                     : absl::NotFoundError(std::move(message)),
                      version, StrictLocked(name, strict)};
}

namespace {
// As Triton: a version that is not a number is a bad request (a number not served is not found).
absl::Status CheckVersion(const std::string& name, const std::string& version, int64_t* parsed) {
  if (version.empty() || (absl::SimpleAtoi(version, parsed) && *parsed >= 0)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model '", name, "': version '", version, "' is not an integral value >= 0"));
}
}  // namespace

std::shared_ptr<ModelRuntime> ModelRegistry::Add(std::shared_ptr<ModelRuntime> runtime) {
  absl::MutexLock lock(&mu_);
  const std::string name = runtime->spec().name;
  not_ready_.erase(name);
  loading_.erase(name);
  std::shared_ptr<ModelRuntime>& slot = ready_[name];
  std::swap(slot, runtime);
  return runtime;
}

std::shared_ptr<ModelRuntime> ModelRegistry::Unload(const std::string& name, const std::string& why) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<ModelRuntime> runtime;
  int64_t version = 0;
  if (auto it = ready_.find(name); it != ready_.end()) {
    runtime = std::move(it->second);
    version = runtime->spec().version;
    ready_.erase(it);
  } else if (auto nr = not_ready_.find(name); nr != not_ready_.end() && loading_.count(name) == 0) {
    version = nr->second.version;  // a failed model: unloaded, it no longer counts against READY
  } else {
    return nullptr;  // unknown, or loading (its load decides)
  }
  // NOT_FOUND as a model with no version to serve (Find: a named version is UNAVAILABLE).
  not_ready_[name] = NotReady{absl::NotFoundError(absl::StrCat("model '", name, "' is unloaded", why)), version,
                              /*strict=*/false};
  return runtime;
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
  std::map<std::string, IndexEntry> by_name;
  for (const auto& [name, runtime] : ready_) {
    IndexEntry& e = by_name[name];
    e.name = name;
    e.version = runtime->spec().version;
    e.state = runtime->ready() ? IndexEntry::State::kReady : IndexEntry::State::kUnavailable;
    if (!runtime->ready()) e.reason = absl::StrCat("model '", name, "' is not ready");
  }
  for (const auto& [name, not_ready] : not_ready_) {
    IndexEntry& e = by_name[name];
    e.name = name;
    e.version = not_ready.version;
    e.state = loading_.count(name) > 0 ? IndexEntry::State::kLoading : IndexEntry::State::kUnavailable;
    e.reason = std::string(not_ready.reason.message());
  }
  std::vector<IndexEntry> out;
  for (auto& [name, entry] : by_name) out.push_back(std::move(entry));
  return out;
}

absl::StatusOr<std::shared_ptr<ModelRuntime>> ModelRegistry::Find(const std::string& name,
                                                                  const std::string& version,
                                                                  AdmissionTicket* ticket) const {
  int64_t v = -1;
  if (absl::Status checked = CheckVersion(name, version, &v); !checked.ok()) return checked;
  absl::MutexLock lock(&mu_);
  auto it = ready_.find(name);
  if (it == ready_.end()) {
    auto nr = not_ready_.find(name);
    if (nr == not_ready_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
    // A failed model: NOT_FOUND without a version (none to serve), a named version UNAVAILABLE.
    const absl::Status& reason = nr->second.reason;
    if (reason.code() == absl::StatusCode::kNotFound && !version.empty()) {
      return absl::UnavailableError(reason.message());
    }
    return reason;
  }
  if (!version.empty()) {
    if (v != it->second->spec().version) {
      return absl::NotFoundError(absl::StrCat("model '", name, "' has no version '", version,
                                              "' (serving version ", it->second->spec().version, ")"));
    }
  }
  if (!it->second->ready()) {
    return absl::UnavailableError(absl::StrCat("model '", name, "' is not ready"));
  }
  if (ticket != nullptr) *ticket = it->second->Admit();
  return it->second;
}

std::vector<std::shared_ptr<ModelRuntime>> ModelRegistry::Ready() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ModelRuntime>> out;
  for (const auto& [name, runtime] : ready_) out.push_back(runtime);
  return out;
}

bool ModelRegistry::AllReady() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, not_ready] : not_ready_) {
    if (not_ready.strict) return false;
  }
  for (const auto& [name, runtime] : ready_) {
    if (!runtime->ready()) return false;
  }
  return true;
}

size_t ModelRegistry::AbandonQueued(const std::string& reason) {
  size_t answered = 0;
  for (auto& r : Ready()) answered += r->AbandonQueued(reason);
  return answered;
}

void ModelRegistry::CloseQueues() {
  for (auto& r : Ready()) r->CloseQueue();
}

void ModelRegistry::StopAll() {
  for (auto& r : Ready()) r->Stop();
}

}  // namespace chronoserve::server
