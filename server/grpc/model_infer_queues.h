// ModelInferQueues: serves ModelInfer and ModelStreamInfer (and the service's other RPCs, below) on
// gRPC's asynchronous API, on completion queues of its own, each polled by up to kDefaultThreadsPerQueue threads
// (--grpc-threads-per-queue; "cs-grpc-cqK", K
// counting every thread). On gRPC 1.51's callback API every operation of every call goes through
// one shared completion queue that (cores / 2) threads poll under one mutex; at tens of thousands of
// requests per second that queue was the busiest part of the server (docs/BENCHMARKS.md §19). Here
// each queue has its own lock and a thread or two, so inference no longer funnels through one.
// Two threads let one busy stream's reads and writes proceed at once (all of a call's tags come
// back on its queue). The other RPCs (health, readiness, metadata, configuration, statistics,
// shared memory) are served here too, one call of each kept requested per queue
// (InferenceService::ControlCalls, and health through AddCalls; unary_queued_call.h), so that the server has no callback-API method at all: one would start
// gRPC's callback queue, whose cores / 2 threads poll every connection beside these queues'.
//
// A unary call goes through the same InferDispatcher as on the callback API: validated and queued
// on a queue thread, answered (Finish) by the worker or completion thread that finished it; a
// client that cancels, or whose deadline passes, has its request marked cancelled before it
// executes. A stream is the same session as on the callback API (StreamInferReactor over
// AsyncBidiCall, queued_call.h), its reactions delivered by its queue's threads.
//
// Owned by the Server. Order: the constructor (before BuildAndStart: it adds the queues to the
// builder), Start() after BuildAndStart, Stop() after grpc::Server::Shutdown and once every
// accepted request has been answered (the models stopped), before the server is destroyed.
//
//   InferenceService service(..., /*async_inference=*/true);
//   ModelInferQueues queues(&service, &builder, 4);  // 4 threads on 2 queues
//   auto server = builder.BuildAndStart();
//   queues.Start();
//   ... server->Shutdown(); registry.StopAll(); server->Wait(); queues.Stop();
#ifndef CHRONOSERVE_SERVER_GRPC_MODEL_INFER_QUEUES_H_
#define CHRONOSERVE_SERVER_GRPC_MODEL_INFER_QUEUES_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/grpc/inference_service.h"
#include "server/grpc/queued_call.h"
#include "server/grpc/response_pool.h"

namespace chronoserve::server {

class ModelInferQueues {
 public:
  // Calls each queue keeps requested from gRPC, so a burst of new calls does not wait for the
  // queue's thread to ask for the next one.
  static constexpr int kUnaryCallsRequested = 16;
  static constexpr int kStreamsRequested = 4;

  // Threads polling each queue unless the caller says otherwise (--grpc-threads-per-queue).
  static constexpr int kDefaultThreadsPerQueue = 2;
  static constexpr int kMaxThreadsPerQueue = 4;
  // Unary responses kept for reuse (response_pool.h), in all, split evenly among the queues: above
  // the calls a loaded server has in flight (concurrency 256 in the benchmarks), plus the calls
  // requested ahead.
  static constexpr size_t kPooledResponses = 1024;

  // `threads` (>= 1) over ceil(threads / threads_per_queue) queues (threads_per_queue clamped to
  // 1 .. kMaxThreadsPerQueue), serving every RPC of `service`, which was built with async_inference
  // and must outlive this.
  ModelInferQueues(InferenceService* service, grpc::ServerBuilder* builder, int threads,
                   int threads_per_queue = kDefaultThreadsPerQueue);
  ~ModelInferQueues();  // Stop()s

  // Before Start: serve the calls `factory` makes too (e.g. HealthService::Calls), one kept
  // requested on each queue (a call that arrives is replaced at once, as the inference calls are).
  // The service's own other RPCs (InferenceService::ControlCalls) are served from the start.
  void AddCalls(QueuedCallFactory factory);

  // Requests the first calls and starts the threads.
  void Start();
  // Waits (up to kCallsEndWithin in all, not per queue) for every call to end, shuts the queues down, lets their threads
  // take what is left in them, joins them. Idempotent; nothing before Start() (the queues, holding
  // nothing, are shut down as they are destroyed).
  void Stop();

  // After grpc::Server::Shutdown the calls end as their last tags come back: milliseconds.
  static constexpr absl::Duration kCallsEndWithin = absl::Seconds(10);

  int queues() const { return static_cast<int>(queues_.size()); }
  int threads() const { return threads_; }

 private:
  class UnaryCall;
  // A call's kind: inference, or kFirstFactory + its factory's index.
  enum Kind { kUnary, kStream, kFirstFactory };
  struct Queue {
    explicit Queue(size_t pooled) : responses(pooled) {}
    // Its unary calls' responses, reused. Per queue: a call takes its response when the queue's
    // thread requests it and gives it back when the queue's thread deletes it, so only this
    // queue's threads share the pool's lock. Declared before the completion queue: calls give
    // theirs back until the queue is drained.
    ResponsePool responses;
    // Its calls, requested and not yet destroyed (a call is destroyed on its queue's thread, so
    // only this queue's threads share the count's lock). Stop waits for none before Shutdown.
    LiveCalls live;
    std::unique_ptr<grpc::ServerCompletionQueue> cq;
    std::vector<std::thread> threads;
    absl::Mutex mu;  // per queue: its threads request a call for every call that arrives
    bool shut ABSL_GUARDED_BY(mu) = false;  // cq->Shutdown() ran: nothing may be requested on it
  };

  // Asks gRPC for the next call of `kind` on `queue`, unless it is shut down.
  void RequestCall(int kind, Queue& queue);
  void Poll(Queue& queue, int index);

  InferenceService* const service_;
  const int threads_;
  bool started_ = false;  // Start() ran (both it and Stop() are called by the Server's thread)
  std::vector<QueuedCallFactory> factories_;  // the other RPCs' calls (AddCalls)
  std::vector<std::unique_ptr<Queue>> queues_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_MODEL_INFER_QUEUES_H_
