// Serving warm-up: before the server reports READY, a few requests per model travel the whole
// serving path from a client inside the server process, through the server's own gRPC port:
// HTTP/2 and message parsing, request validation, the batcher, a worker, the response, the
// server-timing trailer and the send. The backend's warm-up (Worker::Warmup) has already run the
// model; this one warms what a client's first request still found cold (code paths run for the
// first time, gRPC's per-method state, allocator pools, the completion threads), which made the
// first request after READY 2-4x the steady latency (docs/BENCHMARKS.md §10, §14).
//
// The requests carry the metadata `chronoserve-serving-warmup: TOKEN`, TOKEN random per process:
// the server marks them synthetic and counts them nowhere (statistics, metrics, traces). A client
// cannot forge the mark without the token, so it cannot hide its own traffic from the statistics.
//
//   const std::string token = NewServingWarmupToken();
//   ServingWarmupReport r = RunServingWarmup(LoopbackTarget("0.0.0.0", 8001), specs, token, 4, absl::Seconds(60));
#ifndef CHRONOSERVE_SERVER_GRPC_SERVING_WARMUP_H_
#define CHRONOSERVE_SERVER_GRPC_SERVING_WARMUP_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/inference.pb.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

inline constexpr char kServingWarmupMetadataKey[] = "chronoserve-serving-warmup";

// 32 random hex digits from std::random_device.
std::string NewServingWarmupToken();

// The address a client inside the server reaches its listening `host`:`port` at: a wildcard
// (0.0.0.0, ::, empty) becomes the loopback of its family; an IPv6 literal is bracketed.
std::string LoopbackTarget(const std::string& host, int port);

// Whether listening on `host` reaches only this machine: localhost, 127.0.0.0/8, ::1 (bracketed or
// not). A wildcard (0.0.0.0, ::, empty), any other address or a host name is not.
bool IsLoopbackHost(const std::string& host);

// One synthetic ModelInferRequest of `items` items for `spec` (items ignored when the model does not
// batch): random inputs (zeros where a model_warmup sample says zero_data), variable dims from the
// model's first model_warmup entry where it names them, else 1; no outputs named, so all are
// returned.
inference::ModelInferRequest SyntheticInferMessage(const ModelSpec& spec, int64_t items, uint64_t seed);

struct ServingWarmupReport {
  int sent = 0;                // requests sent or attempted (unary calls + stream messages)
  int failed = 0;              // of those, answered with an error (or never answered)
  std::string first_error;     // "model 'x' ...: message" of the first failure
  int64_t elapsed_ns = 0;
};

// For every model in `models`: `requests` unary ModelInfer calls at batch size 1 and `requests` at
// max_batch_size (one size when the model does not batch), then one ModelStreamInfer stream with
// `requests` messages alternating those sizes; all over one fresh channel to `target`, tagged with
// `token`, each call bounded by `call_timeout`. Within the model's own queue limits: a size whose
// request the queue could never hold (max_queue_bytes) is left out, and the stream keeps no more
// messages unanswered than max_queue_size and max_queue_bytes allow (one with a queue timeout), so
// a correct config never fails its warm-up. Failures are counted, never fatal: the server is
// usable without this warm-up, only its first requests are slower. Once `stop` (may be null) is
// set, nothing more is sent.
ServingWarmupReport RunServingWarmup(const std::string& target, const std::vector<ModelSpec>& models,
                                     const std::string& token, int requests, absl::Duration call_timeout,
                                     const std::atomic<bool>* stop = nullptr);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_SERVING_WARMUP_H_
