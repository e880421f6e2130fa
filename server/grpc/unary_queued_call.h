// UnaryQueuedCall: one call of a unary RPC that is not inference (health, readiness, metadata,
// configuration, statistics, shared-memory registration), served on ModelInferQueues' completion
// queues and answered at once on the queue's thread that sees it arrive (or, for a method given a
// LaterAnswer such as a model load, by whichever thread that answer ends on). With inference on the
// asynchronous API, these calls are there too, so that no RPC of the server is on gRPC's callback
// API: in gRPC 1.51 a single callback method starts the process's shared callback queue, polled by
// cores / 2 threads ("nexting_thread") that read every connection of the process, the inference
// streams' too, and hand each completion to the queue thread that owns it (docs/STREAMING.md).
//
//   QueuedCallFactory calls = UnaryQueuedCall<Req, Resp>::Factory(
//       [&](auto* ctx, Req* request, auto* responder, auto* cq, void* tag) { service.RequestX(ctx, request, responder, cq, cq, tag); },
//       [&](const Req& request, Resp* response) { return AnswerX(request, response); });
//   QueuedCall* call = calls();
//   call->RequestFrom(cq);  // then its tags come back on cq: call->Proceed(...)
#ifndef CHRONOSERVE_SERVER_GRPC_UNARY_QUEUED_CALL_H_
#define CHRONOSERVE_SERVER_GRPC_UNARY_QUEUED_CALL_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/queued_call.h"

namespace chronoserve::server {

template <typename Request, typename Response>
class UnaryQueuedCall final : public QueuedCall {
 public:
  using Responder = grpc::ServerAsyncResponseWriter<Response>;
  // Asks gRPC for the next call of the method on a queue, its arrival to come back as `tag` (an
  // AsyncService's RequestX with the queue as both the call's and the notification queue).
  using Ask = std::function<void(grpc::ServerContext*, Request*, Responder*, grpc::ServerCompletionQueue*, void*)>;
  // The call's answer: the response, or the error it ends with.
  using Answer = std::function<absl::Status(const Request&, Response*)>;
  // An answer that comes later (model control: a load takes seconds): it fills the response, then
  // calls `done` once, from any thread, with the status the call ends with.
  using Done = std::function<void(absl::Status)>;
  using LaterAnswer = std::function<void(const Request&, Response*, Done done)>;

  // The method's calls, each sharing its one Ask and Answer.
  static QueuedCallFactory Factory(Ask ask, Answer answer) {
    auto method = std::make_shared<const Method>(Method{std::move(ask), std::move(answer), nullptr});
    return [method]() -> QueuedCall* { return new UnaryQueuedCall(method); };
  }
  // The same for a method answered later: the queue's thread hands the call on and goes back to polling.
  static QueuedCallFactory LaterFactory(Ask ask, LaterAnswer answer) {
    auto method = std::make_shared<const Method>(Method{std::move(ask), nullptr, std::move(answer)});
    return [method]() -> QueuedCall* { return new UnaryQueuedCall(method); };
  }

  void RequestFrom(grpc::ServerCompletionQueue* cq) override {
    method_->ask(&ctx_, &request_, &responder_, cq, &arrived_);
  }

  void Proceed(Event event, bool ok) override {
    if (event == Event::kArrived && ok) {
      if (method_->later) {
        method_->later(request_, &response_, [this](const absl::Status& status) { FinishWith(status); });
      } else {
        FinishWith(method_->answer(request_, &response_));
      }
      return;
    }
    // Its Finish is back, or it was never matched to a call (the server shut down first): either
    // way no other tag of it will come.
    delete this;
  }

 private:
  struct Method {
    Ask ask;
    Answer answer;     // one of these two
    LaterAnswer later;
  };
  explicit UnaryQueuedCall(std::shared_ptr<const Method> method) : method_(std::move(method)) {}

  void FinishWith(const absl::Status& status) {
    if (status.ok()) {
      responder_.Finish(response_, grpc::Status::OK, &finished_);
    } else {
      responder_.FinishWithError(ToGrpcStatus(status), &finished_);
    }
  }

  const std::shared_ptr<const Method> method_;
  grpc::ServerContext ctx_;
  Request request_;
  Response response_;
  Responder responder_{&ctx_};
  Tag arrived_{this, Event::kArrived};
  Tag finished_{this, Event::kFinished};
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_UNARY_QUEUED_CALL_H_
