// ResponsePool: ModelInferResponse messages that unary ModelInfer calls on the asynchronous API
// (model_infer_queues.h) take for their answer and give back when the call is gone, cleared with
// ClearKeepingTimingParams: the next call's response overwrites the same 17 timing.* map entries
// instead of allocating, hashing and freeing them. Under load, a fresh message per call cost the
// completion threads ~12 us of CPU per request with request timing on (malloc contention among
// them; docs/BENCHMARKS.md §23), against ~1 us for a reused one. Stream sessions reuse their slots'
// responses the same way (stream_infer_reactor.h).
//
// Bounded: at most `capacity` messages are kept, and a message whose output bytes kept more than
// kMaxKeptOutputBytes of capacity is freed rather than kept (KeepForReuse, the rule stream slots
// follow too). Thread-safe.
#ifndef CHRONOSERVE_SERVER_GRPC_RESPONSE_POOL_H_
#define CHRONOSERVE_SERVER_GRPC_RESPONSE_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/inference.pb.h"
#include "server/grpc/infer_wire.h"

namespace chronoserve::server {

class ResponsePool {
 public:
  // Raw contents capacity above which a message is freed rather than kept (KeepForReuse).
  static constexpr size_t kMaxKeptOutputBytes = 64 * 1024;

  explicit ResponsePool(size_t capacity) : capacity_(capacity) {}

  // A cleared message (it may hold timing.* entries that the next successful answer overwrites;
  // see ClearKeepingTimingParams).
  std::unique_ptr<inference::ModelInferResponse> Take();
  // Clears `response` and keeps it for a later Take(), unless the pool is full or it holds too
  // much output capacity.
  void Give(std::unique_ptr<inference::ModelInferResponse> response);

  size_t kept() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<inference::ModelInferResponse>> free_ ABSL_GUARDED_BY(mu_);
};

// Whether a message about to be cleared for reuse is worth keeping: Clear() keeps the capacity of
// its raw contents strings, so one large request would otherwise pin its buffers for as long as the
// pool (or a stream's spare slots) keeps it. True when the raw_output_contents of `response`, with
// the raw_input_contents of `request` when given, hold at most kMaxKeptOutputBytes of capacity.
bool KeepForReuse(const inference::ModelInferResponse& response,
                  const inference::ModelInferRequest* request = nullptr);
// A ModelStreamInfer slot's rule: KeepForReuse of its response and parsed request, with the capacity
// of the request's wire form counted too. On the asynchronous API every field but
// raw_input_contents is read into one string (ReceivedMessage::rest) that Clear() keeps, so a
// request carrying its tensors in typed contents (fp32_contents...) would otherwise pin that many
// bytes in the slot for the life of the stream.
bool KeepSlotForReuse(const inference::ModelInferResponse& response, const ReceivedInferRequest& request);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_RESPONSE_POOL_H_
