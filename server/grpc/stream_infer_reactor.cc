#include "server/grpc/stream_infer_reactor.h"

#include <algorithm>

#include "common/clock.h"
#include "common/dtype.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/response_pool.h"

namespace chronoserve::server {
namespace {

// Released slots kept for the next requests (their messages keep their buffers); more are freed,
// and so is a slot whose buffers grew large (KeepSlotForReuse).
constexpr size_t kSpareSlots = 64;
// The int64 parameter of an error response's infer_response: the gRPC code a unary call would get.
constexpr char kErrorCodeParam[] = "error_code";

// Marks a streamed response as its request's last (and only) one, as Triton marks every response of
// a model that is not decoupled, errors included: clients that read a stream until this flag (Triton's
// streaming examples, PyTriton) would otherwise wait for ever.
void MarkFinal(inference::ModelInferResponse* response) {
  (*response->mutable_parameters())[kTritonFinalResponseParam].set_bool_param(true);
}

std::string StringParam(const inference::ModelInferRequest& request, const char* key) {
  auto it = request.parameters().find(key);
  if (it == request.parameters().end() ||
      it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return "";
  }
  return it->second.string_param();
}

// The bytes of outputs (and error text) the slot's response carries, in the message or lent beside it.
uint64_t AnswerBytes(const inference::ModelStreamInferResponse& response, const std::vector<LentBytes>& lent) {
  uint64_t bytes = response.error_message().size();
  for (const std::string& raw : response.infer_response().raw_output_contents()) bytes += raw.size();
  for (const LentBytes& l : lent) bytes += l.size;
  return bytes;
}

}  // namespace

namespace {
// a x b, or kMostCountedAnswerBytes when it would be more: compared before multiplying, never wrapped.
uint64_t CountedProduct(uint64_t a, uint64_t b) {
  return b != 0 && a > kMostCountedAnswerBytes / b ? kMostCountedAnswerBytes : std::min(a * b, kMostCountedAnswerBytes);
}
}  // namespace

AnswerEstimate EstimateAnswer(const InferRequest& request, const ModelSpec& spec) {
  AnswerEstimate estimate;
  auto saturate = [](uint64_t v) { return std::min(v, kMostCountedAnswerBytes); };
  for (const OutputTensor& out : request.outputs) {
    if (out.data == nullptr) continue;  // into shared memory, or computed and dropped
    const size_t element_bytes = out.index >= 0 && static_cast<size_t>(out.index) < spec.outputs.size()
                                     ? DataTypeByteSize(spec.outputs[out.index].dtype)
                                     : 0;
    if (element_bytes == 0) {
      estimate.variable = true;
      continue;
    }
    uint64_t bytes = CountedProduct(static_cast<uint64_t>(std::max<int64_t>(request.batch_items, 1)), element_bytes);
    for (int64_t d : spec.outputs[out.index].dims) {
      if (d < 0) {
        estimate.variable = true;
        bytes = 0;
        break;
      }
      bytes = CountedProduct(bytes, static_cast<uint64_t>(d));
    }
    estimate.fixed_bytes = saturate(estimate.fixed_bytes + bytes);
  }
  return estimate;
}

// ---- StreamRegistry ----

bool StreamRegistry::Add(DrainableStream* stream) {
  absl::MutexLock lock(&mu_);
  if (draining_) return false;
  streams_.insert(stream);
  return true;
}

void StreamRegistry::Remove(DrainableStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void StreamRegistry::DrainAll() {
  std::vector<DrainableStream*> idle;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (DrainableStream* s : streams_) {
      if (s->BeginDrain()) idle.push_back(s);
    }
  }
  // Each of these decided to finish and nothing else will: it stays alive until FinishDrained.
  for (DrainableStream* s : idle) s->FinishDrained();
}

// ---- StreamInferReactor ----

template <class Call>
void StreamInferReactor<Call>::Begin(const grpc::ServerContextBase& ctx) {
  call_ = CallInfoOf(ctx, dispatcher_->clock(), *dispatcher_);
  if (!streams_->Add(this)) {
    {
      absl::MutexLock lock(&state_->mu);
      // On the asynchronous API a cancellation may already have decided the finish.
      if (state_->finish_decided) return;
      state_->finish_decided = true;
    }
    this->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    return;
  }
  Action action;
  {
    absl::MutexLock lock(&state_->mu);
    MaybeReadLocked(&action);
  }
  Act(action);
}

template <class Call>
void StreamInferReactor<Call>::OnReadDone(bool ok) {
  int64_t received_ns = dispatcher_->clock()->NowNs();
  SlotPtr slot;
  Action action;
  {
    absl::MutexLock lock(&state_->mu);
    slot = std::move(state_->reading);
    if (!ok || state_->finish_decided || state_->cancelled) {
      // Half-close, or a read that ended with the stream: nothing more will be read. A message
      // that raced the stream's end is dropped unanswered (the stream's status tells the client).
      state_->read_closed = true;
      slot.reset();
      MaybeFinishLocked(&action);
    } else {
      ++state_->live;
    }
  }
  if (slot == nullptr) {
    Act(action);
    return;
  }
  // On the asynchronous API the message arrived before this server parsed it: its parse is admission.
  if (slot->request.arrived_ns > 0) received_ns = slot->request.arrived_ns;
  Admit(slot, received_ns);
  {
    absl::MutexLock lock(&state_->mu);
    MaybeReadLocked(&action);
  }
  Act(action);
}

template <class Call>
CallInfo StreamInferReactor<Call>::InfoFor(const inference::ModelInferRequest& request, int64_t received_ns) const {
  CallInfo info;
  info.received_ns = received_ns;
  info.deadline_ns = call_.deadline_ns;
  // Per-request trace context (request parameters) beats the stream's metadata: one stream carries
  // many requests, each may belong to its own trace.
  // A tracestate belongs to its traceparent: a request's own tracestate without its own
  // traceparent is not joined to the stream's.
  info.traceparent = StringParam(request, "traceparent");
  if (!info.traceparent.empty()) {
    info.tracestate = StringParam(request, "tracestate");
  } else {
    info.traceparent = call_.traceparent;
    info.tracestate = call_.tracestate;
  }
  info.cancelled = cancelled_flag_;
  info.synthetic = call_.synthetic;
  info.streamed = true;
  return info;
}

template <class Call>
void StreamInferReactor<Call>::Admit(const SlotPtr& slot, int64_t received_ns) {
  const ReceivedInferRequest& request = slot->request;
  if (!request.status.ok()) {
    Refuse(slot, request.status);
    return;
  }
  inference::ModelInferResponse* response = slot->response.mutable_infer_response();
  CallInfo info = InfoFor(request.message, received_ns);
  if constexpr (std::is_same_v<Call, AsyncBidiCall>) info.lent_outputs = &slot->lent;  // sent as byte buffers
  auto built = request.raw_apart()
                   ? dispatcher_->Build(request.message, RawInputContents(request.raw), response, std::move(info))
                   : dispatcher_->Build(request.message, response, std::move(info));
  slot->request.raw = {};  // the request holds the received bytes while it needs them, not the slot
  if (!built.ok()) {
    Refuse(slot, built.status());
    return;
  }
  const AnswerEstimate estimate = EstimateAnswer(*built->request, built->model->spec());
  {
    absl::MutexLock lock(&state_->mu);
    NoteModelLocked(built->model);
    slot->model = built->model.get();
    slot->items = static_cast<uint64_t>(std::max<int64_t>(built->request->batch_items, 1));
    slot->expected_bytes = estimate.fixed_bytes;
    if (estimate.variable) {
      // The model's largest answer per item on this stream so far, times this request's items;
      // none yet: the whole budget, so that nothing more is read until one is answered and its
      // size known.
      const uint64_t* per_item = LargestAnswerLocked(slot->model);
      const uint64_t guess = per_item == nullptr ? options_.max_unsent_bytes : CountedProduct(*per_item, slot->items);
      slot->expected_bytes = std::max(slot->expected_bytes, guess);
    }
    state_->expected_bytes += slot->expected_bytes;
  }
  // `this` stays valid in the completion: the slot is live until it is written back or dropped,
  // and the stream cannot finish while a slot is live. `state` keeps the mutex alive beyond that.
  absl::Status enqueued = dispatcher_->Enqueue(
      *std::move(built), response,
      [this, state = state_, slot](const absl::Status& status, const RequestTiming&, bool) { Answered(slot, status); });
  if (!enqueued.ok()) Refuse(slot, enqueued);
}

template <class Call>
void StreamInferReactor<Call>::NoteModelLocked(const std::shared_ptr<ModelRuntime>& model) {
  auto& models = state_->models;
  for (const auto& m : models) {
    if (!m.owner_before(model) && !model.owner_before(m)) return;  // the usual case: a model it used
  }
  // A model new to the stream: the ones unloaded or replaced since go first.
  models.erase(std::remove_if(models.begin(), models.end(), [](const auto& m) { return m.expired(); }), models.end());
  models.push_back(model);
}

template <class Call>
void StreamInferReactor<Call>::Answered(const SlotPtr& slot, const absl::Status& status) {
  if (!status.ok()) {
    Refuse(slot, status);
    return;
  }
  MarkFinal(slot->response.mutable_infer_response());
  Action action;
  {
    absl::MutexLock lock(&state_->mu);
    QueueResponseLocked(slot, /*outputs=*/true, &action);
  }
  Act(action);
}

template <class Call>
void StreamInferReactor<Call>::Refuse(const SlotPtr& slot, const absl::Status& status) {
  const inference::ModelInferRequest& request = slot->request.message;
  inference::ModelInferResponse* response = slot->response.mutable_infer_response();
  // Clear() would keep output buffers a failed request filled out of ReleaseLocked's sight (it
  // measures the strings in use): drop large ones here.
  if (!KeepForReuse(*response)) *response = inference::ModelInferResponse();
  response->Clear();
  slot->lent.clear();  // the backend's buffers go back now
  response->set_model_name(request.model_name());
  response->set_model_version(request.model_version());
  response->set_id(request.id());
  (*response->mutable_parameters())[kErrorCodeParam].set_int64_param(static_cast<int64_t>(status.code()));
  MarkFinal(response);
  slot->response.set_error_message(ToGrpcStatus(status).error_message());
  Action action;
  {
    absl::MutexLock lock(&state_->mu);
    QueueResponseLocked(slot, /*outputs=*/false, &action);
  }
  Act(action);
}

template <class Call>
void StreamInferReactor<Call>::QueueResponseLocked(SlotPtr slot, bool outputs, Action* action) {
  State& s = *state_;
  s.expected_bytes -= slot->expected_bytes;
  slot->expected_bytes = 0;
  slot->answer_bytes = AnswerBytes(slot->response, slot->lent);
  s.unsent_bytes += slot->answer_bytes;
  if (slot->model != nullptr && outputs) {
    const uint64_t per_item = (slot->answer_bytes + slot->items - 1) / slot->items;  // rounded up
    if (uint64_t* largest = LargestAnswerLocked(slot->model)) {
      *largest = std::max(*largest, per_item);
    } else {
      s.largest_answers.emplace_back(slot->model, per_item);
    }
  }
  slot->model = nullptr;
  slot->items = 1;
  if (state_->cancelled) {
    ReleaseLocked(std::move(slot));  // nobody to answer
  } else if (state_->writing == nullptr) {
    state_->writing = std::move(slot);
    action->write = state_->writing.get();
  } else {
    state_->pending.push_back(std::move(slot));
  }
  MaybeFinishLocked(action);
}

template <class Call>
uint64_t* StreamInferReactor<Call>::LargestAnswerLocked(const ModelRuntime* model) {
  for (auto& [m, bytes] : state_->largest_answers) {
    if (m == model) return &bytes;
  }
  return nullptr;
}

template <class Call>
void StreamInferReactor<Call>::OnWriteDone(bool ok) {
  Action action;
  std::vector<std::shared_ptr<ModelRuntime>> models;
  {
    absl::MutexLock lock(&state_->mu);
    ReleaseLocked(std::move(state_->writing));
    if (!ok) {
      // The client is gone: drop what waits and let queued requests go unexecuted.
      models = CancelLocked();
      while (!state_->pending.empty()) {
        ReleaseLocked(std::move(state_->pending.front()));
        state_->pending.pop_front();
      }
    } else if (!state_->pending.empty()) {
      state_->writing = std::move(state_->pending.front());
      state_->pending.pop_front();
      action.write = state_->writing.get();
      action.more = !state_->pending.empty();
    }
    MaybeReadLocked(&action);
    MaybeFinishLocked(&action);
  }
  for (const auto& m : models) m->queue().Poke();
  Act(action);
}

template <class Call>
void StreamInferReactor<Call>::OnCancel() {
  std::vector<std::shared_ptr<ModelRuntime>> models;
  Action action;
  {
    absl::MutexLock lock(&state_->mu);
    models = CancelLocked();
    MaybeFinishLocked(&action);
  }
  for (const auto& m : models) m->queue().Poke();
  Act(action);
}

template <class Call>
std::vector<std::shared_ptr<ModelRuntime>> StreamInferReactor<Call>::CancelLocked() {
  state_->cancelled = true;
  cancelled_flag_->Set(dispatcher_->clock()->NowNs());
  std::vector<std::shared_ptr<ModelRuntime>> live;
  for (const auto& m : state_->models) {
    if (auto model = m.lock()) live.push_back(std::move(model));
  }
  return live;
}

template <class Call>
void StreamInferReactor<Call>::OnDone() {
  streams_->Remove(this);
  delete this;
}

template <class Call>
bool StreamInferReactor<Call>::BeginDrain() {
  absl::MutexLock lock(&state_->mu);
  state_->draining = true;
  Action action;
  MaybeFinishLocked(&action);
  return action.finish.has_value();
}

template <class Call>
void StreamInferReactor<Call>::FinishDrained() {
  this->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
}

template <class Call>
void StreamInferReactor<Call>::ReleaseLocked(SlotPtr slot) {
  if (slot == nullptr) return;
  --state_->live;
  state_->unsent_bytes -= slot->answer_bytes;
  slot->answer_bytes = 0;
  slot->lent.clear();  // not written (the stream was cancelled): the backend's buffers go back
  if (state_->spare.size() >= kSpareSlots || !KeepSlotForReuse(slot->response.infer_response(), slot->request)) {
    return;
  }
  slot->request.Clear();
  ClearKeepingTimingParams(&slot->response);  // see infer_dispatcher.h
  state_->spare.push_back(std::move(slot));
}

template <class Call>
void StreamInferReactor<Call>::MaybeReadLocked(Action* action) {
  State& s = *state_;
  // Draining: no new reads, so a client that keeps sending cannot keep the stream busy; a read
  // already outstanding is answered (UNAVAILABLE) or dropped once the stream finishes.
  if (s.reading != nullptr || s.read_closed || s.cancelled || s.finish_decided || s.draining) return;
  if (s.live >= options_.max_in_flight) return;  // resumed by OnWriteDone as slots go out
  // Likewise, as answers are written (each of them was counted in flight, then unsent). Not on the
  // server's own serving warm-up stream: it writes a window of messages before it reads, which a
  // model with large outputs would stall until the deadline (its window is bounded by count).
  if (options_.max_unsent_bytes > 0 && !call_.synthetic && s.live > 0 &&
      s.expected_bytes + s.unsent_bytes >= options_.max_unsent_bytes) {
    return;
  }
  if (s.spare.empty()) {
    s.reading = std::make_shared<Slot>();
  } else {
    s.reading = std::move(s.spare.back());
    s.spare.pop_back();
  }
  action->read = s.reading.get();
}

template <class Call>
void StreamInferReactor<Call>::MaybeFinishLocked(Action* action) {
  State& s = *state_;
  if (s.finish_decided || s.live > 0) return;
  if (s.cancelled) {
    action->finish = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
  } else if (s.read_closed) {
    action->finish = grpc::Status::OK;
  } else if (s.draining) {
    action->finish = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
  } else {
    return;
  }
  s.finish_decided = true;
  action->read = nullptr;
}

template <class Call>
void StreamInferReactor<Call>::Act(const Action& action) {
  if (action.write != nullptr) {
    // Buffered only when another answer is already queued: its (unbuffered) write follows as
    // soon as this one completes and flushes both, in one transport write instead of two.
    const grpc::WriteOptions options = action.more ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions();
    if constexpr (std::is_same_v<Call, AsyncBidiCall>) {
      this->StartWrite(&action.write->response, &action.write->lent, options);
    } else {
      this->StartWrite(&action.write->response, options);
    }
  }
  if (action.read != nullptr) {
    if constexpr (std::is_same_v<Call, AsyncBidiCall>) {
      this->StartRead(&action.read->request);  // read as bytes, parsed by the call
    } else {
      this->StartRead(&action.read->request.message);
    }
  }
  if (action.finish.has_value()) this->Finish(*action.finish);
}

template class StreamInferReactor<CallbackBidiCall>;
template class StreamInferReactor<AsyncBidiCall>;

}  // namespace chronoserve::server
