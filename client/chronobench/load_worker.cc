#include "client/chronobench/load_worker.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/infer_wire.h"
#include "client/inference_client.h"
#include "client/response_view.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "common/traceparent.h"

namespace chronoserve::client::bench {
namespace {

// The longest the loop blocks, so Stop() is noticed promptly.
constexpr int64_t kMaxWaitNs = 20'000'000;
// Open loop keeps its schedule when the server falls behind, up to this many calls in flight
// per worker; beyond it sends wait (and the schedule lag shows it).
constexpr size_t kMaxOutstanding = 16384;
// Open loop with shared memory: slots registered up front; more are added when all are in flight.
constexpr int kRateInitialSlots = 8;

std::string ShmTag(int worker) {
  static std::atomic<int> pools{0};
  return absl::StrCat("chronobench_", getpid(), "_", pools.fetch_add(1), "_w", worker);
}

}  // namespace

size_t ChannelForSend(int worker, int workers, size_t channels, uint64_t turn, bool affinity) {
  const auto w = static_cast<size_t>(worker);
  const auto n = static_cast<size_t>(workers);
  // A worker outside its plan's count has no channels of its own: round-robin, as without affinity.
  if (!affinity || worker < 0 || w >= n) return (w + turn) % channels;
  if (channels <= n) return w % channels;
  const size_t own = (channels - w + n - 1) / n;  // the channels c < `channels` with c % n == w
  return w + n * (turn % own);
}

namespace {
// A seed no run repeats: the random device's, 64 bits.
uint64_t FreshIdSeed() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}
}  // namespace

LoadWorker::LoadWorker(int index, const WorkerPlan& plan, const WorkerShared& shared)
    : index_(index),
      plan_(plan),
      shared_(shared),
      streams_(shared.stubs, &cq_, shared.request),
      waiter_(&cq_, shared.clock, &stop_),
      rng_(plan.seed * 7919 + index),
      id_rng_(FreshIdSeed()) {
  if (shared.request != nullptr) {
    inference::ModelInferRequest head = *shared.request;
    const SharedRawInputs raw = TakeRawInputs(&head);
    request_wire_ = WriteInferRequest(head, raw);
  }
  absl::MutexLock lock(&mu_);
  recorder_.Allocate();
}

LoadWorker::~LoadWorker() {
  if (started_ && !stopped_) {
    CS_LOG(ERROR) << "LoadWorker " << index_ << " destroyed while running; stopping it";
    Stop();
  }
}

absl::Status LoadWorker::Prepare() {
  if (shared_.shm_layout == nullptr) return absl::OkStatus();
  auto* stub = (*shared_.stubs)[index_ % shared_.stubs->size()].generated.get();
  shm_ = std::make_unique<ShmSlotPool>(stub, shared_.request, shared_.shm_layout, ShmTag(index_));
  switch (plan_.mode) {
    case LoadMode::kConcurrency: return shm_->Grow(plan_.in_flight);
    case LoadMode::kRate: return shm_->Grow(kRateInitialSlots);
    case LoadMode::kIdleGap: return shm_->Grow(1);
  }
  return absl::OkStatus();
}

void LoadWorker::Start(int64_t start_ns) {
  started_ = true;
  thread_ = std::thread([this, start_ns] {
    SetCurrentThreadName("cb-load");
    Run(start_ns);
  });
  native_thread_ = thread_.native_handle();
}

void LoadWorker::RequestStop(int64_t stop_ns) {
  int64_t unset = 0;
  if (!stop_ns_.compare_exchange_strong(unset, stop_ns)) return;  // asked already
  stop_.store(true);
}

void LoadWorker::Stop(absl::Time unregister_deadline) {
  if (stopped_) return;
  stopped_ = true;
  if (started_) {
    RequestStop(shared_.clock->NowNs());
    thread_.join();
  }
  if (shm_ != nullptr) {
    if (absl::Status s = shm_->UnregisterAll(unregister_deadline); !s.ok()) {
      CS_LOG(WARNING) << "worker " << index_ << ": unregistering shared memory: " << s.message();
    }
  }
}

LatencyRecorder LoadWorker::SwapRecorder(bool measure_from_now) {
  LatencyRecorder fresh;
  fresh.Allocate();  // on the caller's thread, not the worker's
  absl::MutexLock lock(&mu_);
  // The clock read under mu_: a request recorded before this was answered, so sent, before it.
  fresh.DiscardSentBefore(measure_from_now ? shared_.clock->NowNs() : recorder_.measure_from_ns());
  if (measure_from_now) {
    completed_before_measuring_.store(completed_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  std::swap(fresh, recorder_);
  return fresh;
}

LatencyRecorder LoadWorker::TakeRecorder() { return SwapRecorder(/*measure_from_now=*/false); }

void LoadWorker::StartMeasuring() { (void)SwapRecorder(/*measure_from_now=*/true); }

int64_t LoadWorker::ThreadCpuNs() const {
  if (!started_ || stopped_) return 0;
  clockid_t cid;
  timespec ts{};
  if (pthread_getcpuclockid(native_thread_, &cid) != 0) return 0;
  if (clock_gettime(cid, &ts) != 0) return 0;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool LoadWorker::AwaitCompleted(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n] { return completed_.load(std::memory_order_relaxed) >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool LoadWorker::AwaitSlotGrowthFailed(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto failed = [this] { return slot_growth_failed_.load(std::memory_order_relaxed); };
  return mu_.AwaitWithTimeout(absl::Condition(&failed), timeout);
}

void LoadWorker::Run(int64_t start_ns) {
  std::optional<Pacer> pacer;
  if (plan_.mode == LoadMode::kRate) {
    pacer.emplace(plan_.distribution, plan_.total_rate_per_s, index_, plan_.workers, start_ns,
                  plan_.seed);
  }
  next_idle_send_ns_ = start_ns;
  if (plan_.mode != LoadMode::kConcurrency) waiter_.StartWaker(plan_.max_send_poll_ns);  // send times to keep
  while (!stop_.load(std::memory_order_relaxed)) {
    const int64_t now = shared_.clock->NowNs();
    if (std::optional<Event> event = waiter_.Next(SendDue(now, pacer ? &*pacer : nullptr))) Handle(*event);
  }
  // The moment the stop was asked for, not when this loop noticed: a send time that came after it
  // (while a response was handled, or an alarm came late) was not due.
  (void)stop_.load(std::memory_order_acquire);  // pairs with RequestStop's store: stop_ns_ is set
  const int64_t stop_ns = stop_ns_.load(std::memory_order_relaxed);
  // Open loop: the send times that had come and were not sent (a worker behind its schedule) are
  // counted, not lost; the oldest of them had waited since the first.
  int64_t unsent_wait_ns = 0;
  if (pacer && pacer->Peek() <= stop_ns) {
    unsent_wait_ns = stop_ns - pacer->Peek();
    oldest_unsent_ns_.store(unsent_wait_ns, std::memory_order_relaxed);
    unsent_.store(pacer->SkipThrough(stop_ns), std::memory_order_relaxed);
  }
  // No alarm is set from here on; one set before may still come off the queue (Handle, Drain).
  waiter_.StopWaker();
  // Events taken off the queue before the stop are answers that came before it: recorded as any.
  while (std::optional<Event> event = waiter_.TakeReady()) Handle(*event);
  Drain(stop_ns, unsent_wait_ns);
}

LoadWorker::Wake LoadWorker::SendDue(int64_t now, Pacer* pacer) {
  Wake wake{now + kMaxWaitNs, false};
  switch (plan_.mode) {
    case LoadMode::kConcurrency:
      // The free slots as counted now: a call that fails at once frees its slot for the next round,
      // not for this loop.
      for (int n = static_cast<int>(calls_.size()); n < plan_.in_flight; ++n) Send(std::nullopt);
      break;
    case LoadMode::kRate: {
      bool blocked = false;
      while (!blocked && pacer->Peek() <= now) {
        blocked = calls_.size() >= kMaxOutstanding || !EnsureFreeSlot();
        if (!blocked) Send(pacer->Next());
      }
      // Blocked by the outstanding limit or a slot that cannot be added, only a completion helps:
      // wait for one (bounded) rather than spin on a send time that has passed.
      if (!blocked && pacer->Peek() < wake.at_ns) wake = {pacer->Peek(), true};
      break;
    }
    case LoadMode::kIdleGap:
      if (calls_.empty()) {
        if (next_idle_send_ns_ <= now) Send(std::nullopt);
        // A send that failed at once (a copy into a region) left nothing in flight and set the next
        // send a gap from now: wake for it, not after the longest wait.
        if (calls_.empty() && next_idle_send_ns_ > now && next_idle_send_ns_ < wake.at_ns) {
          wake = {next_idle_send_ns_, true};
        }
      }
      break;
  }
  return wake;
}

std::string LoadWorker::NextTraceparent(Call* call) {
  for (auto& b : call->trace_id) b = static_cast<uint8_t>(id_rng_());
  for (auto& b : call->span_id) b = static_cast<uint8_t>(id_rng_());
  call->trace_id[15] |= 1;  // all-zero ids are invalid
  call->span_id[7] |= 1;
  call->traced = true;
  return FormatTraceparent(call->trace_id, call->span_id, kTraceFlagSampled);
}

void LoadWorker::RecordClientSpan(const Call& call, int64_t done_ns) {
  ClientSpan span;
  span.trace_id = call.trace_id;
  span.span_id = call.span_id;
  span.flags = kTraceFlagSampled;
  span.model = shared_.request->model_name();
  span.batch_size = shared_.batch_size;
  span.start_unix_ns = call.sent_unix_ns;
  span.end_unix_ns = call.sent_unix_ns + (done_ns - call.sent_ns);
  span.grpc_code = static_cast<int>(call.status.error_code());
  span.streamed = plan_.streaming;
  shared_.tracer->Record(span);  // dropped and counted by the processor when its queue is full
}

void LoadWorker::LogCopyError(const absl::Status& status) {
  if (copy_error_logged_) return;
  copy_error_logged_ = true;
  CS_LOG(ERROR) << "worker " << index_ << ": " << status.message()
                << " (counted as a failed request; later copy failures of this worker are not logged)";
}

bool LoadWorker::EnsureFreeSlot() {
  if (shm_ == nullptr || shm_->HasFree()) return true;
  // A region that could not be added once (/dev/shm full, the server refusing) would fail again, each
  // attempt a blocking registration: from then on the worker sends only as its slots free up.
  if (slot_growth_failed_.load(std::memory_order_relaxed)) return false;
  absl::Status grown = shm_->Grow(1);
  if (!grown.ok()) {
    {
      absl::MutexLock lock(&mu_);
      slot_growth_failed_.store(true, std::memory_order_relaxed);
    }
    CS_LOG(ERROR) << "worker " << index_ << ": " << grown.message()
                  << " (this worker now keeps the shared-memory slots it has: its sends wait for a free one, "
                     "so the offered rate may not be reached)";
  }
  return grown.ok();
}

void LoadWorker::Send(std::optional<int64_t> intended_ns) {
  auto call = std::make_unique<Call>();
  Call* raw = call.get();
  if (shm_ != nullptr) raw->slot = shm_->Acquire();  // never null: one slot per call allowed in flight
  if (plan_.timeout_ms > 0 && !plan_.streaming) {  // a stream's messages have no deadline of their own
    raw->context.set_deadline(std::chrono::system_clock::now() +
                              std::chrono::milliseconds(plan_.timeout_ms));
  }
  std::string traceparent;
  if (plan_.traceparent_rate > 0 &&
      std::uniform_real_distribution<double>(0, 1)(rng_) < plan_.traceparent_rate) {
    traceparent = NextTraceparent(raw);
    // Unary: call metadata. Streamed: the request's parameter (the stream's metadata is shared).
    if (!plan_.streaming) raw->context.AddMetadata("traceparent", traceparent);
  }
  auto& stubs = *shared_.stubs;
  const size_t channel = ChannelForSend(index_, plan_.workers, stubs.size(), next_channel_++, plan_.connection_affinity);
  raw->sent_ns = shared_.clock->NowNs();
  // Closed loop and idle gap: one stamp for both, so e2e and e2e_actual_send agree exactly.
  raw->intended_ns = intended_ns.value_or(raw->sent_ns);
  // The client span starts at the send's own stamp, in Unix time (chronoserve places its spans the
  // same way: one offset, read with care, onto steady stamps).
  if (raw->traced && shared_.tracer != nullptr) {
    raw->sent_unix_ns = raw->sent_ns + WallMinusSteadyNs(*shared_.clock, WallNowNs);
  }
  if (raw->slot != nullptr) {  // the client's tensors into its region: timed
    if (absl::Status copied = shm_->CopyIn(*raw->slot); !copied.ok()) {
      // Not sent, but counted as a request that failed (INTERNAL), so no send goes missing.
      LogCopyError(copied);
      sent_.fetch_add(1, std::memory_order_relaxed);
      Record(std::move(call), grpc::StatusCode::INTERNAL, nullptr, shared_.clock->NowNs());
      return;
    }
  }
  calls_.emplace(raw, std::move(call));
  sent_.fetch_add(1, std::memory_order_relaxed);
  if (plan_.streaming) {
    SendStreamed(raw, channel, traceparent);
    return;
  }
  if (spare_responses_.empty()) {
    raw->response = std::make_unique<view::ModelInferResponseView>();
  } else {
    raw->response = std::move(spare_responses_.back());
    spare_responses_.pop_back();
  }
  // The shared request's bytes are written once (its tensors shared by every send); a slot's
  // request (its tensors in the slot's regions) is a small message of its own.
  raw->reader = stubs[channel].unary.PrepareUnaryCall(
      &raw->context, ChannelStubs::kModelInfer,
      raw->slot != nullptr ? WriteInferRequest(raw->slot->request, nullptr) : request_wire_, &cq_);
  raw->reader->StartCall();
  raw->reader->Finish(&raw->answer, &raw->status, raw);
}

void LoadWorker::SendStreamed(Call* call, size_t channel, const std::string& traceparent) {
  call->seq = next_seq_++;
  inference::ModelInferRequest* own = call->slot != nullptr ? &call->slot->request : nullptr;
  if (streams_.For(channel)->Send(call->seq, own, traceparent)) {
    by_seq_.emplace(call->seq, call);
    return;
  }
  // A fresh stream accepts until its first event, so this should not happen; if it does, the
  // request is counted as failed rather than left holding its slot with no stream to answer it.
  FailNow(call, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
}

void LoadWorker::OnStreamEvent(LoadStream::Tag* tag, bool ok, int64_t received_ns) {
  // Reading the answer is part of receiving it, as for a unary answer (Complete): an answer is
  // handed over once read, so the time from here to that is its read.
  const int64_t read_start_ns = shared_.clock->NowNs();
  streams_.OnEvent(tag, ok, [this, received_ns, read_start_ns](const LoadStream::Answer& answer) {
    const int64_t answered_ns = received_ns + (shared_.clock->NowNs() - read_start_ns);
    auto it = by_seq_.find(answer.seq);
    if (it == by_seq_.end()) return;
    Call* call = it->second;
    by_seq_.erase(it);
    auto owned = calls_.find(call);
    if (owned == calls_.end()) return;
    std::unique_ptr<Call> done = std::move(owned->second);
    calls_.erase(owned);
    Record(std::move(done), answer.grpc_code, answer.response, answered_ns);
  });
}

void LoadWorker::Handle(Event event) {
  if (waiter_.IsWake(event.tag)) {
    waiter_.OnWake(event);  // the next SendDue looks at the time
    return;
  }
  if (plan_.streaming) {
    OnStreamEvent(static_cast<LoadStream::Tag*>(event.tag), event.ok, event.received_ns);
  } else {
    Complete(static_cast<Call*>(event.tag), event.received_ns);
  }
}

void LoadWorker::Complete(Call* call, int64_t received_ns) {
  auto it = calls_.find(call);
  if (it == calls_.end()) return;
  std::unique_ptr<Call> owned = std::move(it->second);
  calls_.erase(it);
  int code = static_cast<int>(owned->status.error_code());
  const view::ModelInferResponseView* response = nullptr;
  if (owned->status.ok()) {
    // Reading the answer is part of receiving it (gRPC's own parse was, before the event): timed.
    const int64_t read_start_ns = shared_.clock->NowNs();
    if (ReadInferResponse(owned->answer, owned->response.get(), &answer_raw_).ok()) {
      response = owned->response.get();
    } else {
      code = static_cast<int>(grpc::StatusCode::DATA_LOSS);
    }
    owned->answer.Clear();
    answer_raw_.slices.reset();  // the outputs are not read: let gRPC's buffers go
    received_ns += shared_.clock->NowNs() - read_start_ns;
  }
  Record(std::move(owned), code, response, received_ns);
}

void LoadWorker::FailNow(Call* call, int grpc_code) {
  auto it = calls_.find(call);
  if (it == calls_.end()) return;
  std::unique_ptr<Call> owned = std::move(it->second);
  calls_.erase(it);
  Record(std::move(owned), grpc_code, nullptr, shared_.clock->NowNs());
}

void LoadWorker::Record(std::unique_ptr<Call> owned, int grpc_code, const view::ModelInferResponseView* response,
                        int64_t received_ns) {
  int64_t done_ns = received_ns;
  owned->status = grpc::Status(static_cast<grpc::StatusCode>(grpc_code), "");  // the client span's code
  if (owned->slot != nullptr) {
    if (grpc_code == 0 && response != nullptr) {
      // Out of the region: part of the timed interval, its own copy only (not those of the answers
      // handled before it in the same round).
      const int64_t copy_start_ns = shared_.clock->NowNs();
      if (absl::Status copied = shm_->CopyOut(*owned->slot, response->outputs()); !copied.ok()) {
        LogCopyError(copied);
        grpc_code = grpc::StatusCode::INTERNAL;  // the outputs never reached this process: a failed request
        response = nullptr;
        owned->status = grpc::Status(grpc::StatusCode::INTERNAL, "");
      }
      done_ns += shared_.clock->NowNs() - copy_start_ns;
    }
    // A failed call's slot is reused at once; should the server still write a late output into it,
    // only bytes chronobench never checks change, not any timing.
    shm_->Release(owned->slot);
  }
  // The client span ends with e2e (at the response time, plus the output copy), not when handled.
  if (owned->traced && shared_.tracer != nullptr) {
    RecordClientSpan(*owned, done_ns);
  }
  RequestRecord record;
  record.intended_ns = owned->intended_ns;
  record.sent_ns = owned->sent_ns;
  record.done_ns = done_ns;
  record.grpc_code = grpc_code;
  record.traced = owned->traced;
  if (grpc_code == 0 && response != nullptr) record.timing = client::DecodeTiming(*response);
  {
    absl::MutexLock lock(&mu_);
    if (!recorder_.Record(record)) discarded_.fetch_add(1, std::memory_order_relaxed);  // sent in the warm-up
    completed_.fetch_add(1, std::memory_order_relaxed);  // under mu_: AwaitCompleted's condition
  }
  // Bounded by the calls this worker ever had in flight at once.
  if (owned->response != nullptr) spare_responses_.push_back(std::move(owned->response));
  if (plan_.mode == LoadMode::kIdleGap) next_idle_send_ns_ = done_ns + plan_.idle_gap_ns;
}

void LoadWorker::Drain(int64_t stop_ns, int64_t unsent_wait_ns) {
  int64_t oldest_ns = unsent_wait_ns;
  for (const auto& [raw, call] : calls_) oldest_ns = std::max(oldest_ns, stop_ns - call->intended_ns);
  oldest_unanswered_ns_.store(oldest_ns, std::memory_order_relaxed);
  if (plan_.streaming) {
    DrainStreams();
    return;
  }
  // Calls still in flight belong to no window: cancel them and wait for gRPC to hand them back.
  for (auto& [raw, call] : calls_) call->context.TryCancel();
  void* tag = nullptr;
  bool ok = false;
  while (!calls_.empty() && cq_.Next(&tag, &ok)) {
    if (waiter_.IsWake(tag)) continue;
    auto it = calls_.find(static_cast<Call*>(tag));
    if (it == calls_.end()) continue;
    // A traceparent went out, so the server may have a span under it: give it its parent.
    if (it->second->traced && shared_.tracer != nullptr) RecordClientSpan(*it->second, shared_.clock->NowNs());
    if (it->second->slot != nullptr) shm_->Release(it->second->slot);
    calls_.erase(it);
    drained_.fetch_add(1, std::memory_order_relaxed);
  }
  cq_.Shutdown();
  while (cq_.Next(&tag, &ok)) {
  }
}

void LoadWorker::DrainStreams() {
  // As Drain: what is in flight belongs to no window. Cancel every stream and hand its events back
  // until each has returned its last tag.
  streams_.CancelAll();
  void* tag = nullptr;
  bool ok = false;
  while (!streams_.AllDone() && cq_.Next(&tag, &ok)) {
    if (waiter_.IsWake(tag)) continue;
    streams_.OnEvent(static_cast<LoadStream::Tag*>(tag), ok, [this](const LoadStream::Answer& answer) {
      auto it = by_seq_.find(answer.seq);
      if (it == by_seq_.end()) return;
      auto call = calls_.find(it->second);
      by_seq_.erase(it);
      if (call == calls_.end()) return;
      // A traceparent went out, so the server may have a span under it: give it its parent, with
      // the answer's code (CANCELLED for what the cancellation failed), as Drain's unary calls.
      call->second->status = grpc::Status(static_cast<grpc::StatusCode>(answer.grpc_code), "");
      if (call->second->traced && shared_.tracer != nullptr) RecordClientSpan(*call->second, shared_.clock->NowNs());
      if (call->second->slot != nullptr) shm_->Release(call->second->slot);
      calls_.erase(call);
      drained_.fetch_add(1, std::memory_order_relaxed);
    });
  }
  streams_.Clear();
  cq_.Shutdown();
  while (cq_.Next(&tag, &ok)) {
  }
}

}  // namespace chronoserve::client::bench
