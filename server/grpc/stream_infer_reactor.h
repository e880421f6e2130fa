// StreamInferReactor: one ModelStreamInfer call (Triton's bidirectional streaming inference). Every
// message read goes through the InferDispatcher exactly as a unary ModelInfer request; the reactor
// keeps reading while requests are in flight, up to StreamOptions::max_in_flight read and not yet
// written back and StreamOptions::max_unsent_bytes of their answers' outputs, and resumes as
// responses go out, so a fast client (or one that never reads) cannot grow the server's memory
// without bound. Responses are written as they complete (any order; each echoes its request id),
// one write outstanding at a time with a queue of the others. A request that fails (bad input,
// queue full, deadline, cancellation, draining) gets a response with error_message set and the
// stream goes on.
//
// Lifetime: gRPC owns the reactor from the handler until OnDone (the one self-delete). It calls
// Finish only when nothing of the stream is live (no request being admitted, queued, executing or
// being written) and the stream is over: the client half-closed (OK), cancelled or broke a write
// (CANCELLED: its in-flight requests are marked cancelled and dropped before they execute), or the
// server drains (UNAVAILABLE). Workers reach the reactor only while one of their requests is live,
// so it cannot be gone; the state they lock is shared-owned and outlives the reactor.
//
// Threads: reactions on gRPC threads; completions on worker / completion-pool threads; Drain on
// the thread that shuts the server down.
//
// The same session serves on gRPC's callback API (Call = CallbackBidiCall: gRPC owns the reactor)
// and on its asynchronous API (Call = AsyncBidiCall, queued_call.h: a ModelInferQueues thread
// delivers the reactions); both give it the reactor's operations and reactions.
#ifndef CHRONOSERVE_SERVER_GRPC_STREAM_INFER_REACTOR_H_
#define CHRONOSERVE_SERVER_GRPC_STREAM_INFER_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/inference.pb.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "server/grpc/infer_dispatcher.h"
#include "server/grpc/infer_wire.h"
#include "server/grpc/queued_call.h"

namespace chronoserve::server {

struct StreamOptions {
  // Requests one stream may have read and not yet written back (admitting, queued, executing, or
  // waiting for the stream's one outstanding write); beyond it the stream stops reading.
  int max_in_flight = 1024;
  // Output bytes the stream's answers may hold before they are written (--max-stream-unsent-mib):
  // those answered and waiting for the write (outputs and error text), plus those still in flight,
  // each counted at the bytes its model's output shapes give it (fixed dims), or, with a variable
  // dim, at its model's largest answer on the stream so far (the whole budget before the first).
  // At or past it the stream stops reading until writes go out. One request is always read while
  // nothing is in flight, however large its answer. The server's own serving warm-up stream (a few
  // messages) is exempt. 0 = unbounded.
  uint64_t max_unsent_bytes = uint64_t{256} << 20;
};

// Where an estimate saturates: above any budget (--max-stream-unsent-mib is at most 2^50 bytes),
// and 1024 of them (StreamOptions::max_in_flight) still add up without wrapping.
inline constexpr uint64_t kMostCountedAnswerBytes = uint64_t{1} << 52;

// What the answer to `request` (built for `spec`) will carry in its message, from the outputs it
// returns there (not into shared memory): `fixed_bytes`, batch_items x fixed dims x type size of
// each output whose dims are all fixed (saturating at kMostCountedAnswerBytes); `variable`, whether
// another output's size cannot be told before it runs.
struct AnswerEstimate {
  uint64_t fixed_bytes = 0;
  bool variable = false;
};
AnswerEstimate EstimateAnswer(const InferRequest& request, const ModelSpec& spec);

// What StreamRegistry needs of a live stream.
class DrainableStream {
 public:
  // For StreamRegistry::DrainAll, under its lock: marks the stream draining; true when the caller
  // must then call FinishDrained() (nothing was live), after releasing its lock.
  virtual bool BeginDrain() = 0;
  virtual void FinishDrained() = 0;

 protected:
  ~DrainableStream() = default;
};

// The live streams of one service, so that draining reaches idle streams too. Thread-safe.
class StreamRegistry {
 public:
  // False once DrainAll ran: the stream must end at once.
  bool Add(DrainableStream* stream);
  void Remove(DrainableStream* stream);
  // Every live stream stops reading (a read already under way gets an error response) and ends
  // once its requests are answered; streams that start later end at once.
  void DrainAll();

 private:
  absl::Mutex mu_;
  std::set<DrainableStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

using CallbackBidiCall = grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>;

template <class Call>
class StreamInferReactor final : public Call, public DrainableStream {
 public:
  // `dispatcher` and `streams` must outlive every stream; `call_args` construct the Call (none for
  // the callback API; AsyncBidiCall: the service it asks for the call). Nothing happens until Begin().
  template <class... CallArgs>
  StreamInferReactor(InferDispatcher* dispatcher, StreamRegistry* streams, const StreamOptions& options,
                     CallArgs&&... call_args)
      : Call(std::forward<CallArgs>(call_args)...),
        dispatcher_(dispatcher),
        streams_(streams),
        options_(options),
        cancelled_flag_(std::make_shared<CancelFlag>()),
        state_(std::make_shared<State>()) {}

  // The call has started (its metadata and deadline are in `ctx`): starts reading.
  void Begin(const grpc::ServerContextBase& ctx);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  bool BeginDrain() override;
  void FinishDrained() override;

 private:
  // One request's messages; reused for later requests of the stream.
  struct Slot {
    // Read as a byte buffer on the asynchronous API (raw entries apart); by gRPC into the message on
    // the callback API.
    ReceivedInferRequest request;
    inference::ModelStreamInferResponse response;
    // Outputs the backend lent the response (asynchronous API only; CallInfo::lent_outputs).
    std::vector<LentBytes> lent;
    // In State::expected_bytes while the request is in flight (from its admission to its answer).
    uint64_t expected_bytes = 0;
    // The model it was admitted to, until its answer's size is noted (State::largest_answers),
    // and the request's items (batch_items, at least 1), by which that size is divided.
    const ModelRuntime* model = nullptr;
    uint64_t items = 1;
    // In State::unsent_bytes from its answer until it is written or dropped: its outputs' bytes.
    uint64_t answer_bytes = 0;
  };
  using SlotPtr = std::shared_ptr<Slot>;
  // What a locked section decided; carried out after the lock is released.
  struct Action {
    Slot* write = nullptr;            // StartWrite(&write->response)
    bool more = false;                // more answers wait: let gRPC buffer this write (coalesce)
    Slot* read = nullptr;             // StartRead(the slot's request): only from a reaction
    std::optional<grpc::Status> finish;
  };
  // Everything completions on worker threads share with the reactor.
  struct State {
    absl::Mutex mu;
    int live ABSL_GUARDED_BY(mu) = 0;  // slots read and not yet released
    SlotPtr reading ABSL_GUARDED_BY(mu);  // the slot a read is outstanding into
    SlotPtr writing ABSL_GUARDED_BY(mu);  // the slot whose write is outstanding
    std::deque<SlotPtr> pending ABSL_GUARDED_BY(mu);  // answers waiting for the write
    std::vector<SlotPtr> spare ABSL_GUARDED_BY(mu);   // released slots kept for reuse
    // StreamOptions::max_unsent_bytes's count: the in-flight requests' expected answers, the
    // answers waiting to be written, and per model the largest successful answer so far per item
    // (times a request's items, the guess for its next request whose answer's size its output
    // shapes do not give; an error's answer, only its text, is no guess). The models are keys only,
    // never dereferenced: one unloaded and another at its address only inherit a guess.
    uint64_t expected_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t unsent_bytes ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::pair<const ModelRuntime*, uint64_t>> largest_answers ABSL_GUARDED_BY(mu);
    // Poked on cancel. Weak: a long stream keeps no model it once used alive after an unload or a
    // reload (a runtime with requests queued is held by the registry or by whoever stops it).
    std::vector<std::weak_ptr<ModelRuntime>> models ABSL_GUARDED_BY(mu);
    bool read_closed ABSL_GUARDED_BY(mu) = false;  // the client half-closed
    bool cancelled ABSL_GUARDED_BY(mu) = false;    // cancelled, or a write failed
    bool draining ABSL_GUARDED_BY(mu) = false;
    bool finish_decided ABSL_GUARDED_BY(mu) = false;
  };

  // Validates and enqueues the request read into `slot`, or queues its error response.
  void Admit(const SlotPtr& slot, int64_t received_ns);
  CallInfo InfoFor(const inference::ModelInferRequest& request, int64_t received_ns) const;
  // A worker finished the request of `slot` (its response is filled or `status` is its error).
  void Answered(const SlotPtr& slot, const absl::Status& status);
  // Sets the slot's error response and queues it.
  void Refuse(const SlotPtr& slot, const absl::Status& status);
  // `outputs`: the answer carries the model's outputs (not an error), so its size per item is noted.
  void QueueResponseLocked(SlotPtr slot, bool outputs, Action* action) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  void ReleaseLocked(SlotPtr slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  // Starts the next read when the stream may read (called from reactions only).
  void MaybeReadLocked(Action* action) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  void MaybeFinishLocked(Action* action) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  // The client is gone (cancelled, or a write failed): the stream is marked cancelled and the models
  // it sent to are returned, for the caller to poke outside the lock, so their queued requests of
  // this stream are dropped (CANCELLED, never executed) at once, not at a worker's next look.
  std::vector<std::shared_ptr<ModelRuntime>> CancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  // Carries out `action`; the reactor may be gone once it returns.
  void Act(const Action& action);
  void NoteModelLocked(const std::shared_ptr<ModelRuntime>& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);
  // The largest answer of `model` on this stream so far; null before its first.
  uint64_t* LargestAnswerLocked(const ModelRuntime* model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu);

  InferDispatcher* const dispatcher_;
  StreamRegistry* const streams_;
  const StreamOptions options_;
  // The stream's own deadline, trace context (for requests that carry none) and serving warm-up
  // mark (serving_warmup.h), from Begin(); its `cancelled` is unused (cancelled_flag_ below).
  CallInfo call_;
  // Shared by every request of the stream: set when the client goes away.
  const std::shared_ptr<CancelFlag> cancelled_flag_;
  const std::shared_ptr<State> state_;
};

extern template class StreamInferReactor<CallbackBidiCall>;
extern template class StreamInferReactor<AsyncBidiCall>;

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_STREAM_INFER_REACTOR_H_
