#include "server/grpc/queued_call.h"

#include "server/grpc/inference_service.h"

namespace chronoserve::server {

void LiveCalls::Add() {
  absl::MutexLock lock(&mu_);
  ++count_;
}

void LiveCalls::Remove() {
  absl::MutexLock lock(&mu_);
  --count_;
}

bool LiveCalls::AwaitNone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return count_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

int LiveCalls::count() {
  absl::MutexLock lock(&mu_);
  return count_;
}

void AsyncBidiCall::RequestFrom(grpc::ServerCompletionQueue* cq) {
  // The done tag, which comes back only if the call arrives, and the arrival itself: counted until
  // Begin returns, so an operation Begin decided on is started on a live call even when another
  // thread (the server's drain) finishes the call meanwhile and all its other tags come back.
  outstanding_.store(2);
  ctx_.AsyncNotifyWhenDone(&done_);
  service_->RequestModelStreamInfer(&ctx_, &stream_, cq, &arrived_);
}

void AsyncBidiCall::StartRead(ReceivedInferRequest* request) {
  outstanding_.fetch_add(1);
  read_into_ = request;
  stream_.Read(&read_wire_, &read_);
}

void AsyncBidiCall::StartWrite(Response* response, std::vector<LentBytes>* lent, grpc::WriteOptions options) {
  outstanding_.fetch_add(1);
  stream_.Write(SerializeModelStreamInferResponse(response, lent), options, &written_);
}

void AsyncBidiCall::Finish(const grpc::Status& status) {
  outstanding_.fetch_add(1);
  stream_.Finish(status, &finished_);
}

void AsyncBidiCall::Proceed(Event event, bool ok) {
  switch (event) {
    case Event::kArrived:
      if (!ok) {  // never matched to a call: no other tag of it will come
        delete this;
        return;
      }
      Begin(ctx_);
      break;
    case Event::kRead:
      if (ok) {
        // Stamped before the parse, which is the request's admission (as a unary call's is).
        read_into_->arrived_ns = service_->dispatcher().clock()->NowNs();
        read_into_->status = ParseModelInferRequest(read_wire_, read_into_);
        read_wire_.Clear();  // the slices live on in the request's raw entries
      }
      OnReadDone(ok);
      break;
    case Event::kWritten:
      OnWriteDone(ok);
      break;
    case Event::kFinished:
      finish_back_.store(true);
      break;
    case Event::kDone:
      if (ctx_.IsCancelled()) OnCancel();
      break;
  }
  // A reaction that started another operation counted it before this one is uncounted, so the
  // count reaches 0 only when nothing is outstanding; before Finish the session still has work
  // (a worker may yet write or finish), so only Finish's return lets the call end. Finish's tag
  // sets the flag before it is uncounted, so whichever tag is uncounted last sees it.
  if (outstanding_.fetch_sub(1) == 1 && finish_back_.load()) OnDone();
}

}  // namespace chronoserve::server
