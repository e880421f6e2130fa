// The request-level parameters of a KServe v2 ModelInferRequest that the server acts on, as
// Triton's clients send them, checked against the model. Pure function; any thread.
#ifndef CHRONOSERVE_SERVER_GRPC_REQUEST_PARAMETERS_H_
#define CHRONOSERVE_SERVER_GRPC_REQUEST_PARAMETERS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/inference.pb.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// The request-level parameters (ModelInferRequest.parameters) the server acts on, as Triton's
// clients send them (tritonclient's infer(timeout=, priority=, sequence_id=...)).
struct RequestParameters {
  // "timeout" (int64 or uint64, microseconds; 0 = none): how long the request may wait in the queue,
  // a deadline at receipt + timeout (the earlier of it and the call's gRPC deadline applies).
  int64_t timeout_us = 0;
};

// Checks the request's parameters against the model: "timeout" and "priority" must be int64_param
// or uint64_param and not negative ("priority" is accepted and ignored: no model has priority
// levels); "sequence_id" (int64 or string), "sequence_start" and "sequence_end" (bool) are refused
// when they ask for a sequence (a non-zero id, a true flag), as no model is a sequence model.
// Other keys are ignored (traceparent, tracestate, a client's own). INVALID_ARGUMENT names the
// model, the parameter and what was expected.
absl::StatusOr<RequestParameters> ParseRequestParameters(const ModelSpec& spec,
                                                         const inference::ModelInferRequest& request);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_REQUEST_PARAMETERS_H_
