// Turning a KServe v2 ModelInferRequest into a validated InferRequest, checked against the model's
// spec: tensor names (unknown / missing / duplicate), datatypes, shapes, batch size, byte sizes,
// raw vs typed contents, requested outputs. Prepares the response's output entries so the backend
// writes output bytes straight into them. Pure function of its arguments; any thread.
#ifndef CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_
#define CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/inference.pb.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// INVALID_ARGUMENT with a message naming the model, the tensor and what was expected. The
// returned request holds views into `request`, which must outlive it; its outputs point into
// `response`. Sets response model_name, model_version and id.
absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request,
    inference::ModelInferResponse* response);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_
