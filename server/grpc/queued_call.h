// The calls ModelInferQueues serves on gRPC's asynchronous API, as its completion queues see them:
// every tag a call hands to gRPC is a QueuedCall::Tag that names the call and the event, and comes
// back on the call's queue's thread, which hands it to Proceed().
//
// A queue may be polled by more than one thread, so a call's tags may come back on two threads at
// once (a read and a write of one stream; a unary call's Finish and its cancellation).
//
// AsyncBidiCall gives a ModelStreamInfer call the shape of gRPC's callback reactor
// (grpc::ServerBidiReactor): StartRead / StartWrite / Finish from any thread, and the reactions
// OnReadDone / OnWriteDone / OnCancel / OnDone on the queue's threads, as concurrently as the
// reactor's. So one stream session (StreamInferReactor<Call>) serves on either API. As with the
// reactor, OnDone comes last, once Finish has completed and no read or write is outstanding; the
// session deletes itself there.
#ifndef CHRONOSERVE_SERVER_GRPC_QUEUED_CALL_H_
#define CHRONOSERVE_SERVER_GRPC_QUEUED_CALL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/inference.grpc.pb.h"
#include "server/grpc/infer_wire.h"

namespace chronoserve::server {

class InferenceService;

// The calls alive on an owner's queues, requested or arrived, so the owner can wait for the last
// to end before it shuts the queues down: a call that starts an operation on a queue already shut
// down aborts the process (gRPC asserts), and a call's reaction may start one (a stream's Finish
// after its last write) as long as the call lives.
class LiveCalls {
 public:
  void Add();
  void Remove();
  // Whether none is left within `timeout`.
  bool AwaitNone(absl::Duration timeout);
  int count();

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

class QueuedCall {
 public:
  enum class Event { kArrived, kRead, kWritten, kFinished, kDone };
  struct Tag {
    QueuedCall* call;
    Event event;
  };
  // Counted out of `live` (if set) last, once the call's gRPC state is gone.
  virtual ~QueuedCall() {
    if (live != nullptr) live->Remove();
  }
  // Asks gRPC for the next call of this kind on `cq`; its kArrived tag comes back there, not ok
  // when the server shut down first (then nothing else of the call comes back).
  virtual void RequestFrom(grpc::ServerCompletionQueue* cq) = 0;
  // One of the call's tags is back (`ok` as gRPC says). The call may delete itself here: the
  // caller must not touch it afterwards.
  virtual void Proceed(Event event, bool ok) = 0;

  int kind = 0;  // which of its owner's kinds of call this is (ModelInferQueues)
  LiveCalls* live = nullptr;  // counted in by its owner when requested; out when destroyed
  // When its kArrived tag came back (the request fully received), stamped by the queue's thread
  // before it does anything else for the call; 0 until then.
  int64_t arrived_ns = 0;
};

// Makes one call of an RPC (not yet requested): how ModelInferQueues gets the calls of the RPCs that
// are not inference (InferenceService::ControlCalls, HealthService::Calls).
using QueuedCallFactory = std::function<QueuedCall*()>;

class AsyncBidiCall : public QueuedCall {
 public:
  using Response = inference::ModelStreamInferResponse;

  // Operations, as on grpc::ServerBidiReactor: at most one read and one write outstanding; Finish
  // once, with no write outstanding. The messages are read and written as byte buffers
  // (infer_wire.h): a read fills `request` (its status says when the bytes were no
  // ModelInferRequest) before OnReadDone; a write takes the response's raw_output_contents and the
  // outputs the backend lent it (`lent`, CallInfo::lent_outputs; may be null).
  void StartRead(ReceivedInferRequest* request);
  void StartWrite(Response* response, std::vector<LentBytes>* lent, grpc::WriteOptions options);
  void Finish(const grpc::Status& status);

  // Reactions, on the queue's thread.
  virtual void OnReadDone(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  // The client cancelled (or the deadline passed); Finish must still be called.
  virtual void OnCancel() = 0;
  virtual void OnDone() = 0;

  // Asks `service` (which must outlive the call) for ModelStreamInfer calls.
  explicit AsyncBidiCall(InferenceService* service) : service_(service) {}

  void RequestFrom(grpc::ServerCompletionQueue* cq) final;
  void Proceed(Event event, bool ok) final;

 protected:
  // The call has arrived (its metadata and deadline are in `ctx`): the session starts.
  virtual void Begin(const grpc::ServerContextBase& ctx) = 0;

 private:
  InferenceService* const service_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&ctx_};
  grpc::ByteBuffer read_wire_;                   // the message a read is under way into
  ReceivedInferRequest* read_into_ = nullptr;    // where it goes once read
  // Tags not yet back: the arrival (until Begin returns) and the done tag, both counted when the
  // call is requested, and every read, write and Finish.
  std::atomic<int> outstanding_{0};
  std::atomic<bool> finish_back_{false};  // Finish's tag is back
  Tag arrived_{this, Event::kArrived};
  Tag read_{this, Event::kRead};
  Tag written_{this, Event::kWritten};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_QUEUED_CALL_H_
