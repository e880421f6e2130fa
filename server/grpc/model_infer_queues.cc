#include "server/grpc/model_infer_queues.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/infer_wire.h"

namespace chronoserve::server {

// One ModelInfer call, from the request for it to its end. Its queue's threads see every tag of
// the call (the call arriving, its Finish sent, the call done; the last two possibly at once) and
// the call deletes itself once both of the last two are back. The worker or completion thread that
// answers the request touches only the context and the responder, before the Finish tag comes back.
class ModelInferQueues::UnaryCall final : public QueuedCall {
 public:
  UnaryCall(InferenceService* service, ResponsePool* responses)
      : service_(service), responses_(responses), response_(responses->Take()) {}
  ~UnaryCall() override { responses_->Give(std::move(response_)); }

  void RequestFrom(grpc::ServerCompletionQueue* cq) override {
    ctx_.AsyncNotifyWhenDone(&done_);
    service_->RequestModelInfer(&ctx_, &request_wire_, &responder_, cq, &arrived_);
  }

  void Proceed(Event event, bool ok) override {
    switch (event) {
      case Event::kArrived:
        // Not matched to a call (the server is shutting down): gRPC sends no other tag for it.
        if (!ok) break;
        Start();
        return;
      case Event::kDone:
        if (ctx_.IsCancelled()) {
          cancelled_->Set(service_->dispatcher().clock()->NowNs());
          std::shared_ptr<ModelRuntime> model;
          {
            absl::MutexLock lock(&mu_);
            model = model_;
          }
          // Not built yet: the request is queued already cancelled, and dropped unexecuted.
          if (model != nullptr) model->queue().Poke();
        }
        if (tags_left_.fetch_sub(1) > 1) return;
        break;
      default:  // kFinished
        if (tags_left_.fetch_sub(1) > 1) return;
        break;
    }
    delete this;
  }

 private:
  void Start() {
    InferDispatcher& dispatcher = service_->dispatcher();
    CallInfo info = CallInfoOf(ctx_, dispatcher.clock(), dispatcher);
    // server_total starts when the request was fully received, not after this thread asked gRPC
    // for the call that replaces this one (Poll).
    if (arrived_ns > 0) info.received_ns = arrived_ns;
    info.cancelled = cancelled_;
    info.lent_outputs = &lent_;
    // Read here, not by gRPC before the call arrived: the tensors' bytes stay in the received
    // slices until Build stages them (infer_wire.h).
    if (absl::Status parsed = ParseModelInferRequest(request_wire_, &request_); !parsed.ok()) return Finish(parsed);
    request_wire_.Clear();  // the slices live on in request_.raw as long as the request needs them
    auto built = dispatcher.Build(request_.message, RawInputContents(request_.raw), response_.get(), std::move(info));
    request_.raw = {};  // the request holds the received bytes while it needs them, not the call
    if (!built.ok()) return Finish(built.status());
    {
      absl::MutexLock lock(&mu_);
      model_ = built->model;
    }
    absl::Status enqueued = dispatcher.Enqueue(
        *std::move(built), response_.get(), [this](const absl::Status& status, const RequestTiming& timing, bool timed) {
          AddServerTimingTrailer(status, timing, timed, &ctx_);
          Finish(status);
        });
    if (!enqueued.ok()) Finish(enqueued);
  }

  void Finish(const absl::Status& status) {
    if (status.ok()) {
      responder_.Finish(SerializeModelInferResponse(response_.get(), &lent_), grpc::Status::OK, &finished_);
    } else {
      lent_.clear();  // the backend's buffers go back now, not with the call
      responder_.FinishWithError(ToGrpcStatus(status), &finished_);
    }
  }

  InferenceService* const service_;
  ResponsePool* const responses_;
  grpc::ServerContext ctx_;
  grpc::ByteBuffer request_wire_;  // the request as received
  ReceivedInferRequest request_;    // and as read
  std::unique_ptr<inference::ModelInferResponse> response_;  // from `responses_`, given back at the end
  std::vector<LentBytes> lent_;  // outputs the backend lent the response (CallInfo::lent_outputs)
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_{&ctx_};
  const std::shared_ptr<CancelFlag> cancelled_ = std::make_shared<CancelFlag>();
  absl::Mutex mu_;
  std::shared_ptr<ModelRuntime> model_ ABSL_GUARDED_BY(mu_);  // once built: a cancellation pokes its queue
  std::atomic<int> tags_left_{2};  // kFinished and kDone, once the call has arrived
  Tag arrived_{this, Event::kArrived};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};
};

ModelInferQueues::ModelInferQueues(InferenceService* service, grpc::ServerBuilder* builder, int threads,
                                   int threads_per_queue)
    : service_(service), threads_(std::max(threads, 1)), factories_(service->ControlCalls()) {
  const int per_queue = std::clamp(threads_per_queue, 1, kMaxThreadsPerQueue);
  const int queues = (threads_ + per_queue - 1) / per_queue;
  for (int i = 0; i < queues; ++i) {
    queues_.push_back(std::make_unique<Queue>(kPooledResponses / static_cast<size_t>(queues)));
    queues_.back()->cq = builder->AddCompletionQueue();
  }
}

ModelInferQueues::~ModelInferQueues() { Stop(); }

void ModelInferQueues::AddCalls(QueuedCallFactory factory) { factories_.push_back(std::move(factory)); }

void ModelInferQueues::Start() {
  started_ = true;
  for (auto& queue : queues_) {
    for (int k = 0; k < kUnaryCallsRequested; ++k) RequestCall(kUnary, *queue);
    for (int k = 0; k < kStreamsRequested; ++k) RequestCall(kStream, *queue);
    for (size_t f = 0; f < factories_.size(); ++f) RequestCall(kFirstFactory + static_cast<int>(f), *queue);
  }
  for (int t = 0; t < threads_; ++t) {
    Queue& queue = *queues_[static_cast<size_t>(t) % queues_.size()];
    queue.threads.emplace_back([this, &queue, t] { Poll(queue, t); });
  }
}

void ModelInferQueues::RequestCall(int kind, Queue& queue) {
  absl::MutexLock lock(&queue.mu);
  if (queue.shut) return;
  QueuedCall* call = kind == kUnary    ? new UnaryCall(service_, &queue.responses)
                     : kind == kStream ? service_->NewQueuedStream()
                                       : factories_[static_cast<size_t>(kind - kFirstFactory)]();
  call->kind = kind;
  call->live = &queue.live;
  queue.live.Add();
  call->RequestFrom(queue.cq.get());
}

void ModelInferQueues::Poll(Queue& queue, int index) {
  SetCurrentThreadName(absl::StrCat("cs-grpc-cq", index));
  const Clock* clock = service_->dispatcher().clock();
  void* raw = nullptr;
  bool ok = false;
  while (queue.cq->Next(&raw, &ok)) {
    auto* tag = static_cast<QueuedCall::Tag*>(raw);
    // A call that arrived is replaced at once, so the queue always has calls requested; its
    // arrival is stamped first.
    if (tag->event == QueuedCall::Event::kArrived && ok) {
      tag->call->arrived_ns = clock->NowNs();
      RequestCall(tag->call->kind, queue);
    }
    tag->call->Proceed(tag->event, ok);  // may delete the call
  }
}

void ModelInferQueues::Stop() {
  // A server that never started (a listener BuildAndStart could not bind) requested no call: its
  // queues hold nothing, and their destructor shuts them down. Shutting them down here would log
  // gRPC's "CompletionQueue shutdown being shutdown before its server" (the failed builder left
  // them registered with a server that no longer exists) under the reason the start failed.
  if (!started_) return;
  // Every call must end before its queue shuts down: a call's reaction may still start an
  // operation (a stream's Finish once its last write is back), and gRPC aborts on one started on a
  // queue that is shut down. After grpc::Server::Shutdown every call ends by itself: calls
  // requested and never matched come back not ok, the rest were answered or cancelled.
  // One deadline for all the queues: a call left on each must not make the wait queues x as long.
  const absl::Time calls_end_by = absl::Now() + kCallsEndWithin;
  for (auto& queue : queues_) {
    if (queue->threads.empty()) continue;  // never started (no call requested) or already stopped
    if (!queue->live.AwaitNone(std::max(calls_end_by - absl::Now(), absl::ZeroDuration()))) {
      CS_LOG(WARNING) << queue->live.count() << " call(s) (inference, health or control) still alive "
                      << absl::FormatDuration(kCallsEndWithin)
                      << " after the server shut down; shutting their completion queue down anyway";
    }
  }
  for (auto& queue : queues_) {
    absl::MutexLock lock(&queue->mu);
    if (queue->shut) continue;
    queue->shut = true;
    queue->cq->Shutdown();
  }
  for (auto& queue : queues_) {
    if (!queue->threads.empty()) {
      for (std::thread& thread : queue->threads) thread.join();
      queue->threads.clear();
      continue;
    }
    // Never started (or already stopped): nothing of it is outstanding, but gRPC wants a queue
    // drained before it is destroyed.
    void* tag = nullptr;
    bool ok = false;
    while (queue->cq->Next(&tag, &ok)) {
    }
  }
}

}  // namespace chronoserve::server
