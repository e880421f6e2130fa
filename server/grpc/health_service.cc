#include "server/grpc/health_service.h"

#include "absl/strings/str_cat.h"
#include "server/grpc/unary_queued_call.h"

namespace chronoserve::server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call. Its queue's two threads may hand it tags at once, and the health service sends it
// statuses from any thread (under the service's lock, then this call's: never the other way round).
// One write at a time: a status set while one is being written goes out when it is back, and only
// the latest. The call deletes itself once it is over (its done tag back), nothing it started is
// outstanding, and the service no longer knows it.
class HealthService::WatchCall final : public QueuedCall {
 public:
  explicit WatchCall(HealthService* health) : health_(health) {}

  void RequestFrom(grpc::ServerCompletionQueue* cq) override {
    ctx_.AsyncNotifyWhenDone(&done_tag_);
    health_->service_.RequestWatch(&ctx_, &request_, &stream_, cq, cq, &arrived_);
  }

  // The watched name's status is now `status` (the service's lock held).
  void Send(ServingStatus status) {
    absl::MutexLock lock(&mu_);
    latest_ = status;
    StartDueLocked();
  }
  // The service shut down (its lock held): the call ends once its last status is written.
  void End() {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    StartDueLocked();
  }

  // Every change of state and the decision to delete happen in one critical section, so after a
  // thread's last unlock only the thread that claimed the call touches it again.
  void Proceed(Event event, bool ok) override {
    bool remove = false;
    bool last = false;
    switch (event) {
      case Event::kArrived: {
        if (!ok) {  // never matched to a call (the server shut down first): no other tag comes
          delete this;
          return;
        }
        health_->AddWatch(request_.service(), this);  // sends the current status
        absl::MutexLock lock(&mu_);
        membership_ = Membership::kWatching;
        remove = done_;  // the call ended meanwhile: its done tag left the removal to this thread
        break;
      }
      case Event::kWritten: {
        absl::MutexLock lock(&mu_);
        writer_ = Writer::kIdle;
        if (!ok) broken_ = true;  // the client is gone; the done tag follows
        StartDueLocked();
        last = ClaimLocked();
        break;
      }
      case Event::kFinished: {
        absl::MutexLock lock(&mu_);
        writer_ = Writer::kFinished;
        last = ClaimLocked();
        break;
      }
      default: {  // kDone: cancelled, or finished
        absl::MutexLock lock(&mu_);
        done_ = true;
        remove = membership_ == Membership::kWatching;  // else the arrival's thread removes it
        StartDueLocked();
        break;
      }
    }
    // Only the remover sets kLeft, so no other thread can delete the call before this.
    if (remove) {
      health_->RemoveWatch(request_.service(), this);
      absl::MutexLock lock(&mu_);
      membership_ = Membership::kLeft;
      last = ClaimLocked();
    }
    if (last) delete this;
  }

 private:
  // Starts what is due, unless a write or the Finish is outstanding: the latest status if it was not
  // sent yet, else the Finish once the service ended the call or the call is over.
  void StartDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writer_ != Writer::kIdle) return;
    if (!broken_ && !done_ && latest_ != sent_) {
      writer_ = Writer::kWriting;
      sent_ = latest_;
      response_.set_status(latest_);
      stream_.Write(response_, &written_);
      return;
    }
    if (!ended_ && !done_ && !broken_) return;
    writer_ = Writer::kFinishing;
    stream_.Finish(ended_ ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "chronoserve is shutting down")
                          : grpc::Status::CANCELLED,
                   &finished_);
  }

  // Whether the call is over and nothing of it is outstanding or known to the service; true once,
  // for the thread that then deletes it.
  bool ClaimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (claimed_ || membership_ != Membership::kLeft || !done_) return false;
    if (writer_ == Writer::kWriting || writer_ == Writer::kFinishing) return false;
    claimed_ = true;
    return true;
  }

  HealthService* const health_;
  grpc::ServerContext ctx_;
  HealthCheckRequest request_;
  HealthCheckResponse response_;  // the write outstanding
  grpc::ServerAsyncWriter<HealthCheckResponse> stream_{&ctx_};
  Tag arrived_{this, Event::kArrived};
  Tag written_{this, Event::kWritten};
  Tag finished_{this, Event::kFinished};
  Tag done_tag_{this, Event::kDone};
  absl::Mutex mu_;
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  ServingStatus sent_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;  // nothing sent yet
  // What the call's stream is doing: a write or the Finish outstanding, or the Finish's tag back.
  enum class Writer { kIdle, kWriting, kFinishing, kFinished };
  Writer writer_ ABSL_GUARDED_BY(mu_) = Writer::kIdle;
  // Whether the service knows the call: not before the arrival's AddWatch has returned, not after
  // RemoveWatch.
  enum class Membership { kJoining, kWatching, kLeft };
  Membership membership_ ABSL_GUARDED_BY(mu_) = Membership::kJoining;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;   // a write failed
  bool ended_ ABSL_GUARDED_BY(mu_) = false;    // the service shut down
  bool done_ ABSL_GUARDED_BY(mu_) = false;     // the call is over (done tag back)
  bool claimed_ ABSL_GUARDED_BY(mu_) = false;  // one thread deletes it
};

HealthService::HealthService() { statuses_[""] = HealthCheckResponse::NOT_SERVING; }

HealthService::~HealthService() = default;

std::vector<QueuedCallFactory> HealthService::Calls() {
  using Call = UnaryQueuedCall<HealthCheckRequest, HealthCheckResponse>;
  return {Call::Factory(
              [this](grpc::ServerContext* ctx, HealthCheckRequest* request, Call::Responder* responder,
                     grpc::ServerCompletionQueue* cq, void* tag) { service_.RequestCheck(ctx, request, responder, cq, cq, tag); },
              [this](const HealthCheckRequest& request, HealthCheckResponse* response) { return Check(request, response); }),
          [this]() -> QueuedCall* { return new WatchCall(this); }};
}

void HealthService::SetServingStatus(const std::string& service_name, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  SetLocked(service_name, serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
}

void HealthService::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  SetAllLocked(serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  SetAllLocked(HealthCheckResponse::NOT_SERVING);
  shut_down_ = true;
  for (const auto& [name, calls] : watches_) {
    for (WatchCall* call : calls) call->End();
  }
}

absl::Status HealthService::Check(const HealthCheckRequest& request, HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  const auto it = statuses_.find(request.service());
  if (it == statuses_.end()) {
    return absl::NotFoundError(absl::StrCat("health: unknown service '", request.service(), "'"));
  }
  response->set_status(it->second);
  return absl::OkStatus();
}

void HealthService::AddWatch(const std::string& name, WatchCall* call) {
  absl::MutexLock lock(&mu_);
  watches_[name].insert(call);
  call->Send(StatusLocked(name));
  if (shut_down_) call->End();
}

void HealthService::RemoveWatch(const std::string& name, WatchCall* call) {
  absl::MutexLock lock(&mu_);
  auto it = watches_.find(name);
  if (it == watches_.end()) return;
  it->second.erase(call);
  if (it->second.empty()) watches_.erase(it);
}

HealthService::ServingStatus HealthService::StatusLocked(const std::string& name) const {
  const auto it = statuses_.find(name);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::SetLocked(const std::string& name, ServingStatus status) {
  statuses_[name] = status;
  const auto it = watches_.find(name);
  if (it == watches_.end()) return;
  for (WatchCall* call : it->second) call->Send(status);
}

void HealthService::SetAllLocked(ServingStatus status) {
  // SetLocked only overwrites a known name's entry, so the map is not changed under the loop.
  for (const auto& [name, old] : statuses_) SetLocked(name, status);
}

}  // namespace chronoserve::server
