// LoadWorker: one load-generating thread with its own gRPC CompletionQueue and its own
// LatencyRecorder (Nighthawk's shape: workers never share a histogram; the TrialRunner merges them
// per window). It offers load in one of three ways (closed loop with N in flight, open loop from a
// Pacer, or one request per idle gap), picks its channels with ChannelForSend (its own ones, or
// round-robin over all), and stamps a W3C traceparent on a sampled fraction of requests. With
// --streaming it sends on one ModelStreamInfer stream per channel it uses (ChannelStreams), matching responses to requests by id, and replaces a stream as soon as it
// fails; e2e still runs from the request's send (queued on its stream) to its response read. A
// response is stamped when its event is taken off the queue: once the events taken are handled,
// the next wait takes every event already queued; each turn handles the oldest and sends what the
// load allows. In open loop and idle-gap mode a SendWaker (a second thread, "cb-wake") ends the
// worker's wait on its queue just before each send time, and the worker polls the queue for the
// rest, up to the waker's lead (LeadNs: 20-100 µs by default, how late its recent wakes came), so sends are on
// time without the worker spinning between them; its EventWaiter does this waiting.
// With --shared-memory system or cuda each request in flight uses a slot of its ShmSlotPool (inputs copied
// in after the send time is stamped; the output copy's duration is added to the response time).
// Owned by the TrialRunner: Prepare(), Start() and Stop() from its thread, TakeRecorder() from its
// thread while the worker runs; everything else on the worker thread, which also starts and stops
// its SendWaker.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_WORKER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_WORKER_H_

#include <grpcpp/grpcpp.h>

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/chronobench/bench_options.h"
#include "client/chronobench/channel_streams.h"
#include "client/chronobench/client_tracer.h"
#include "client/chronobench/event_waiter.h"
#include "client/chronobench/latency_recorder.h"
#include "client/chronobench/load_stream.h"
#include "client/chronobench/pacer.h"
#include "client/chronobench/shm_slot_pool.h"
#include "client/chronobench/channel_stubs.h"
#include "common/clock.h"
#include "common/wire/bytes_field.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

// How this worker offers load.
struct WorkerPlan {
  LoadMode mode = LoadMode::kConcurrency;
  int in_flight = 1;                 // closed loop: requests kept outstanding by this worker
  Distribution distribution = Distribution::kConstant;
  double total_rate_per_s = 0;       // open loop: the whole run's rate, shared by `workers`
  int workers = 1;
  int64_t idle_gap_ns = 0;           // idle-gap mode: from a response to the next send
  int64_t timeout_ms = 0;            // per-request deadline; 0 = none
  double traceparent_rate = 0;
  uint64_t seed = 1;
  bool streaming = false;            // ModelStreamInfer instead of unary ModelInfer
  bool connection_affinity = true;   // send only on this worker's own channels (ChannelForSend)
  int64_t max_send_poll_ns = WakeLead::kMaxNs;  // the SendWaker's lead at most (--max-send-poll-us)
};

// The channel of worker `worker`'s (of `workers`) send number `turn`, of `channels`. With `affinity`
// (chronobench's default) a worker sends only on its own channels: worker, worker + workers, ... (so
// no two workers share one) when there are at least as many channels as workers, otherwise on
// channel worker % channels alone. Without it, or for a `worker` not below `workers`, every worker
// goes round-robin over every channel, starting at its own index.
size_t ChannelForSend(int worker, int workers, size_t channels, uint64_t turn, bool affinity);

// Read-only state shared by all workers; outlives them.
struct WorkerShared {
  std::vector<ChannelStubs>* stubs = nullptr;  // one per channel
  const inference::ModelInferRequest* request = nullptr;
  const Clock* clock = nullptr;
  ClientTracer* tracer = nullptr;  // null: traced requests export no client span
  int64_t batch_size = 0;          // of `request` (client span attribute)
  const ShmLayout* shm_layout = nullptr;  // set: tensors travel in system shared memory
};

class LoadWorker {
 public:
  LoadWorker(int index, const WorkerPlan& plan, const WorkerShared& shared);
  ~LoadWorker();
  LoadWorker(const LoadWorker&) = delete;
  LoadWorker& operator=(const LoadWorker&) = delete;

  // Before Start: creates and registers the shared-memory slots the plan needs (none without
  // --shared-memory); the server's message on failure.
  absl::Status Prepare();
  // Starts the thread; load begins at `start_ns` (open-loop schedules are anchored there).
  void Start(int64_t start_ns);
  // Asks the worker to stop as of `stop_ns` (steady clock): it sends nothing more, and the send times
  // up to that moment that it had not sent count as unsent(). Returns at once; Stop() joins. Give
  // every worker of a point the same moment before stopping any, so that none counts the time the
  // others take to stop. Only the first call counts.
  void RequestStop(int64_t stop_ns);
  // Stops sending (RequestStop now, unless asked already), cancels what is in flight, joins, and
  // unregisters the shared-memory slots, all of them by `unregister_deadline` (a frozen server
  // delays Stop that long, once: pass several workers one deadline). Idempotent; on a worker never
  // started (a Prepare failed) it only unregisters the slots Prepare made.
  void Stop(absl::Time unregister_deadline);
  void Stop() { Stop(absl::Now() + ShmSlotPool::kUnregisterTimeout); }
  // Returns what was recorded since the last call and starts a fresh window.
  LatencyRecorder TakeRecorder();
  // Ends the warm-up: drops what was recorded so far, and from now on records only requests whose
  // intended send time is now or later; those sent before, answered later, count in completed()
  // and discarded() but in no window. (Every request recorded before the call was sent before it.)
  void StartMeasuring();
  // Requests sent since Start(). Once stopped, sent() == completed() + drained(): every request
  // was answered, failed or cancelled at the end, none lost.
  int64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  // Requests finished (OK or not) since Start(): recorded, or discarded.
  int64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  // Of those, the ones sent before StartMeasuring() and finished after it: in no window.
  int64_t discarded() const { return discarded_.load(std::memory_order_relaxed); }
  // Requests finished (OK or not, recorded or discarded) since StartMeasuring(): whether the server
  // answered anything once the warm-up was over. All of completed() when it was never called.
  int64_t completed_while_measuring() const {
    return completed() - completed_before_measuring_.load(std::memory_order_relaxed);
  }
  // Requests still in flight when Stop() cancelled the load: handed back, recorded in no window.
  int64_t drained() const { return drained_.load(std::memory_order_relaxed); }
  // Open loop, once stopped: the send times of its schedule that had come by the stop (RequestStop's
  // moment, or Stop()'s) but were never sent (the worker was behind: its outstanding limit, a shared-memory slot it could not add,
  // or no CPU). Requests whose latency would have begun, recorded in no window; 0 in other modes.
  int64_t unsent() const { return unsent_.load(std::memory_order_relaxed); }
  // Once stopped: how long the oldest of the drained and unsent requests had waited at the stop,
  // from its intended send time (as e2e); 0 when there were none.
  int64_t oldest_unanswered_ns() const { return oldest_unanswered_ns_.load(std::memory_order_relaxed); }
  // Once stopped: how long the oldest of the unsent() send times had waited at the stop; 0 with none.
  int64_t oldest_unsent_ns() const { return oldest_unsent_ns_.load(std::memory_order_relaxed); }
  // Waits until completed() >= n; false when `timeout` passed first (tests).
  bool AwaitCompleted(int64_t n, absl::Duration timeout);
  // Whether a shared-memory slot could not be added when every slot was in flight (/dev/shm full,
  // the server refusing the region): the worker then sends only as its slots free up, so an open
  // loop may fall behind its rate. Waits up to `timeout` for that; whether it happened (tests).
  bool AwaitSlotGrowthFailed(absl::Duration timeout);
  // CPU time this worker thread has used, ns (for the client-saturation warning; the SendWaker's
  // thread is not counted).
  int64_t ThreadCpuNs() const;
  // Of that, the CPU time of the polls of the completion queue that found nothing just before a
  // send time (open loop, idle gap: at most the SendWaker's lead, 20-100 µs by default, per send): waiting,
  // not work, so the saturation warning leaves it out. Since Start(), ns.
  int64_t PollNs() const { return waiter_.PollNs(); }
  // ThreadCpuNs() less PollNs(): the CPU time the saturation warning judges.
  int64_t BusyCpuNs() const { return ThreadCpuNs() - PollNs(); }
  // The waits on the queue before a send time (open loop, idle gap), those its SendWaker's alarm
  // ended, and those the queue's millisecond-rounded deadline ended (EventWaiter::SendWaits; a
  // response ends the rest). Since Start().
  int64_t SendWaits() const { return waiter_.SendWaits(); }
  int64_t SendWaitsWoken() const { return waiter_.SendWaitsWoken(); }
  int64_t SendWaitsPastDeadline() const { return waiter_.SendWaitsPastDeadline(); }

 private:
  // Hands the recorder back and puts a fresh one in its place, which discards requests sent before
  // now (`measure_from_now`) or before the old one's cutoff.
  LatencyRecorder SwapRecorder(bool measure_from_now);
  using Wake = EventWaiter::Wake;
  using Event = EventWaiter::Event;

  struct Call {
    grpc::ClientContext context;
    // Unary: the answer as received, then read into `response`, a message of spare_responses_ (its
    // entries' strings reused), given back once recorded.
    grpc::ByteBuffer answer;
    std::unique_ptr<view::ModelInferResponseView> response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader;
    int64_t intended_ns = 0;
    int64_t sent_ns = 0;
    // Traced requests only: the traceparent's ids and the send wall time (client span).
    bool traced = false;
    TraceId trace_id{};
    SpanId span_id{};
    int64_t sent_unix_ns = 0;
    ShmSlot* slot = nullptr;  // --shared-memory system or cuda: the regions this call's tensors are in
    uint64_t seq = 0;         // --streaming: the request id on its stream
  };

  void Run(int64_t start_ns);
  // Sends what the plan allows at `now`; returns when the loop should wake up.
  Wake SendDue(int64_t now, Pacer* pacer);
  // Sends one request; `intended_ns` is its open-loop schedule time, nullopt to time it from the
  // actual send (closed loop, idle gap).
  void Send(std::optional<int64_t> intended_ns);
  // Shared memory in open loop: a free slot exists, growing the pool by one when all are in flight
  // (a registration on this thread; any delay shows as schedule lag). False if growing failed.
  bool EnsureFreeSlot();
  // The first failed copy into or out of a slot's regions (CUDA only), logged once a worker.
  void LogCopyError(const absl::Status& status);
  // Records a unary completion, reacts to a stream's event, or frees the SendWaker's alarm.
  void Handle(Event event);
  void Complete(Call* call, int64_t received_ns);
  // Records a finished call received at `received_ns`: `response` (may be null) when `grpc_code` is 0.
  void Record(std::unique_ptr<Call> call, int grpc_code, const view::ModelInferResponseView* response,
              int64_t received_ns);
  // Records `call`, still in calls_, as failed with `grpc_code` now.
  void FailNow(Call* call, int grpc_code);
  // Notes how long the oldest call still in flight, or the oldest send time that came unsent, had
  // waited at `stop_ns` (unsent_wait_ns: 0 when none), then cancels the calls and counts each as
  // drained as gRPC hands it back.
  void Drain(int64_t stop_ns, int64_t unsent_wait_ns);
  void SendStreamed(Call* call, size_t channel, const std::string& traceparent);
  void OnStreamEvent(LoadStream::Tag* tag, bool ok, int64_t received_ns);
  void DrainStreams();
  // Draws fresh ids into `call` and returns its traceparent header value.
  std::string NextTraceparent(Call* call);
  // Hands a finished traced call to the tracer (never blocks); `done_ns` is a steady stamp, moved to
  // Unix time by the offset the call's start was (sent_unix_ns - sent_ns).
  void RecordClientSpan(const Call& call, int64_t done_ns);

  const int index_;
  const WorkerPlan plan_;
  const WorkerShared shared_;
  grpc::CompletionQueue cq_;
  std::thread thread_;
  pthread_t native_thread_{};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> stop_ns_{0};  // RequestStop's moment; set before stop_
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> completed_{0};  // written under mu_, so that AwaitCompleted sees it change
  std::atomic<int64_t> drained_{0};
  std::atomic<int64_t> discarded_{0};
  std::atomic<int64_t> unsent_{0};
  std::atomic<int64_t> oldest_unanswered_ns_{0};
  std::atomic<int64_t> oldest_unsent_ns_{0};
  std::atomic<int64_t> completed_before_measuring_{0};  // completed() at StartMeasuring(), under mu_
  std::unique_ptr<ShmSlotPool> shm_;  // null without shared memory
  bool copy_error_logged_ = false;
  // A shared-memory slot could not be added: no more are tried. Set under mu_ (AwaitSlotGrowthFailed).
  std::atomic<bool> slot_growth_failed_{false};

  // Worker-thread state.
  std::unordered_map<Call*, std::unique_ptr<Call>> calls_;
  ChannelStreams streams_;                            // --streaming: one stream per channel
  std::unordered_map<uint64_t, Call*> by_seq_;        // --streaming: calls by request id
  std::vector<std::unique_ptr<view::ModelInferResponseView>> spare_responses_;  // unary answers to reuse
  // The shared request on the wire, its tensors' bytes shared by every unary send.
  grpc::ByteBuffer request_wire_;
  wire::ReceivedMessage answer_raw_;  // a unary answer's outputs, as views, while it is read
  EventWaiter waiter_;  // takes cq_'s events; in open loop and idle gap with its SendWaker
  uint64_t next_seq_ = 1;
  uint64_t next_channel_ = 0;
  int64_t next_idle_send_ns_ = 0;
  std::mt19937_64 rng_;  // --seed's: inputs, gaps, which requests carry a traceparent
  // Trace and span ids: never from --seed, so that two runs (which append to the same trace files,
  // or export to the same collector) never share one; W3C trace context wants them unique.
  std::mt19937_64 id_rng_;

  absl::Mutex mu_;
  LatencyRecorder recorder_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_WORKER_H_
