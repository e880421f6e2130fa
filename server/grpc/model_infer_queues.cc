#include "server/grpc/model_infer_queues.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"
#include "server/grpc/grpc_status.h"

namespace chronoserve::server {

// One ModelInfer call, from the request for it to its end. Its queue's thread sees every tag of
// the call (the call arriving, its Finish sent, the call done) and the call deletes itself there
// once both of the last two are back. The worker or completion thread that answers the request
// touches only the context and the responder, before the Finish tag comes back.
class ModelInferQueues::UnaryCall final : public QueuedCall {
 public:
  void RequestFrom(InferenceService* service, grpc::ServerCompletionQueue* cq) override {
    service_ = service;
    ctx_.AsyncNotifyWhenDone(&done_);
    service->RequestModelInfer(&ctx_, &request_, &responder_, cq, &arrived_);
  }

  void Proceed(Event event, bool ok) override {
    switch (event) {
      case Event::kArrived:
        // Not matched to a call (the server is shutting down): gRPC sends no other tag for it.
        if (!ok) break;
        Start();
        return;
      case Event::kDone:
        if (ctx_.IsCancelled() && cancelled_ != nullptr) {
          cancelled_->store(true);
          if (model_ != nullptr) model_->queue().Poke();
        }
        if (--tags_left_ > 0) return;
        break;
      default:  // kFinished
        if (--tags_left_ > 0) return;
        break;
    }
    delete this;
  }

 private:
  void Start() {
    InferDispatcher& dispatcher = service_->dispatcher();
    CallInfo info = UnaryCallInfo(ctx_, dispatcher.clock(), dispatcher);
    cancelled_ = info.cancelled;
    auto built = dispatcher.Build(request_, &response_, std::move(info));
    if (!built.ok()) return Finish(built.status());
    model_ = built->model;
    absl::Status enqueued = dispatcher.Enqueue(
        *std::move(built), &response_, [this](const absl::Status& status, const RequestTiming& timing, bool timed) {
          if (status.ok() && timed) ctx_.AddTrailingMetadata(std::string(kServerTimingKey), EncodeServerTiming(timing));
          Finish(status);
        });
    if (!enqueued.ok()) Finish(enqueued);
  }

  void Finish(const absl::Status& status) {
    if (status.ok()) {
      responder_.Finish(response_, grpc::Status::OK, &finished_);
    } else {
      responder_.FinishWithError(ToGrpcStatus(status), &finished_);
    }
  }

  InferenceService* service_ = nullptr;
  grpc::ServerContext ctx_;
  inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder_{&ctx_};
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::shared_ptr<ModelRuntime> model_;  // set once the request is built (cancellation pokes its queue)
  int tags_left_ = 2;                    // kFinished and kDone, once the call has arrived
  Tag arrived_{this, Event::kArrived};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};
};

ModelInferQueues::ModelInferQueues(InferenceService* service, grpc::ServerBuilder* builder, int queues)
    : service_(service) {
  for (int i = 0; i < std::max(queues, 1); ++i) {
    queues_.push_back(std::make_unique<Queue>());
    queues_.back()->cq = builder->AddCompletionQueue();
  }
}

ModelInferQueues::~ModelInferQueues() { Stop(); }

void ModelInferQueues::Start() {
  for (size_t i = 0; i < queues_.size(); ++i) {
    Queue& queue = *queues_[i];
    for (int k = 0; k < kUnaryCallsRequested; ++k) RequestCall(kUnary, queue);
    for (int k = 0; k < kStreamsRequested; ++k) RequestCall(kStream, queue);
    queue.thread = std::thread([this, &queue, i] { Poll(queue, static_cast<int>(i)); });
  }
}

void ModelInferQueues::RequestCall(int kind, Queue& queue) {
  absl::MutexLock lock(&queue.mu);
  if (queue.shut) return;
  QueuedCall* call = kind == kUnary ? new UnaryCall() : service_->NewQueuedStream();
  call->kind = kind;
  call->RequestFrom(service_, queue.cq.get());
}

void ModelInferQueues::Poll(Queue& queue, int index) {
  SetCurrentThreadName(absl::StrCat("cs-grpc-cq", index));
  void* raw = nullptr;
  bool ok = false;
  while (queue.cq->Next(&raw, &ok)) {
    auto* tag = static_cast<QueuedCall::Tag*>(raw);
    // A call that arrived is replaced at once, so the queue always has calls requested.
    if (tag->event == QueuedCall::Event::kArrived && ok) RequestCall(tag->call->kind, queue);
    tag->call->Proceed(tag->event, ok);  // may delete the call
  }
}

void ModelInferQueues::Stop() {
  for (auto& queue : queues_) {
    absl::MutexLock lock(&queue->mu);
    if (queue->shut) continue;
    queue->shut = true;
    queue->cq->Shutdown();
  }
  for (auto& queue : queues_) {
    if (queue->thread.joinable()) {
      queue->thread.join();
      continue;
    }
    // Never started (or already joined): nothing of it is outstanding, but gRPC wants a queue
    // drained before it is destroyed.
    void* tag = nullptr;
    bool ok = false;
    while (queue->cq->Next(&tag, &ok)) {
    }
  }
}

}  // namespace chronoserve::server
