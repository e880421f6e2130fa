// Turning a KServe v2 ModelInferRequest into a validated InferRequest, checked against the model's
// spec: tensor names (unknown / missing / duplicate), datatypes, shapes, batch size, byte sizes,
// raw vs typed contents vs shared memory, requested outputs. Prepares the response's output entries
// so the backend writes output bytes straight into them (or into the client's shared-memory
// region). Pure function of its arguments; any thread.
#ifndef CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_
#define CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "proto/inference.pb.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

// INVALID_ARGUMENT with a message naming the model, the tensor and what was expected (NOT_FOUND
// for an unregistered shared-memory region; FAILED_PRECONDITION, before any other check could
// answer, when `shared_memory` is null and a tensor names a region). The returned request holds views into `request`, which must outlive it,
// and into the shared-memory regions it pins (InferRequest::keep_alive); its outputs point into
// `response` or those regions. Sets response model_name, model_version and id.
absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request,
    inference::ModelInferResponse* response, const SharedMemoryRegistry* shared_memory = nullptr);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_
