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
#include "common/wire/bytes_field.h"
#include "proto/inference.pb.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

// Where a request's raw_input_contents are: in the message, or set apart from it as it was read
// from gRPC's received bytes (wire::SplitBytesField; infer_wire.h), views into the received slices
// that keep no copy. A message must outlive the built request's use of its entries; received
// entries are kept alive by the request (InferRequest::received_bytes).
class RawInputContents {
 public:
  explicit RawInputContents(const inference::ModelInferRequest& request) : message_(&request) {}
  explicit RawInputContents(const wire::ReceivedMessage& received) : received_(&received) {}

  int size() const;
  size_t byte_size(int i) const;
  // Points `in` at entry `i`: at its bytes when they lie in one piece, else at its pieces, which
  // ModelRuntime::StageInputs gathers.
  void Assign(int i, InputTensor& in, InferRequest* request) const;

 private:
  const inference::ModelInferRequest* message_ = nullptr;
  const wire::ReceivedMessage* received_ = nullptr;
};

// INVALID_ARGUMENT with a message naming the model, the tensor and what was expected (NOT_FOUND
// for an unregistered shared-memory region; FAILED_PRECONDITION, before any other check could
// answer, when `shared_memory` is null and a tensor names a region). The returned request holds views into `request`, which must outlive it,
// and into the shared-memory regions it pins (InferRequest::regions); its outputs point into
// `response` or those regions. Sets response model_name, model_version and id.
// The request's raw_input_contents are `raw` (by default its own); inputs whose bytes arrived in
// pieces must be staged (ModelRuntime::StageInputs) before they are read.
// With `lent` (a transport that sends bytes it does not own: infer_wire.h), it is sized to the
// response's raw_output_contents, and the backend may lend an output's bytes into its entry
// (OutputTensor::lend_to) instead of writing the response's string; `lent` must then outlive the
// request like `response`.
absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request,
    inference::ModelInferResponse* response, const SharedMemoryRegistry* shared_memory = nullptr);
absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request, const RawInputContents& raw,
    inference::ModelInferResponse* response, const SharedMemoryRegistry* shared_memory = nullptr,
    std::vector<LentBytes>* lent = nullptr);

// FAILED_PRECONDITION naming the model and the first tensor of `request` in a client's GPU memory (a
// CUDA shared-memory region), when the model has an instance on the CPU: the batcher hands a batch
// to whichever worker is free, and a CPU worker cannot read or write GPU memory. OK otherwise, and
// always when `has_cpu_instance` is false (ModelRuntime::has_cpu_instance).
absl::Status RefuseGpuMemoryOnCpuInstances(const ModelSpec& spec, const InferRequest& request, bool has_cpu_instance);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_REQUEST_BUILDER_H_
