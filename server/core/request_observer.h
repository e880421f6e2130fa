// RequestObserver: telemetry's view of requests, received and finished. OnRequestDone is called
// once per request after its timeline is finalized — on the worker thread that completed it, or on
// the gRPC handler's thread for a request refused before it was queued (then `request` may be
// null). Implementations must not block (bounded queues, drop and count): they run on the request
// path.
#ifndef CHRONOSERVE_SERVER_CORE_REQUEST_OBSERVER_H_
#define CHRONOSERVE_SERVER_CORE_REQUEST_OBSERVER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/timing.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // Called once when a request of a known model is received, before it is validated, on the
  // handler's thread (never for warm-up traffic): whether it is traced, taken now so that trace
  // settings changed while it runs (TraceSetting) never reach it. nullopt: no decision (nothing
  // traces, or the observer decides in OnRequestDone).
  virtual std::optional<TraceDecision> DecideTrace(const ModelSpec& spec, const std::string& traceparent) {
    return std::nullopt;
  }
  // `status` is the request's final status; `timing` its finalized spans (zeros where not reached).
  virtual void OnRequestDone(const ModelSpec& spec, const InferRequest* request,
                             const RequestTiming& timing, const absl::Status& status) = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_REQUEST_OBSERVER_H_
