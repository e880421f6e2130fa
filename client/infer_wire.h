// The client's side of ModelInfer's messages as gRPC byte buffers (common/wire/bytes_field.h):
// requests whose raw_input_contents go as slices that are copied once (InferenceClient::Infer) or
// shared by every send (chronobench), and answers whose raw_output_contents are read in place, so
// that the rest parses into any message type that reads those fields (inference.proto's or
// chronobench's views, proto/response_view.proto). gRPC's protobuf serialization copied each
// tensor twice on the way out (into the message, out of it) and once on the way in.
#ifndef CHRONOSERVE_CLIENT_INFER_WIRE_H_
#define CHRONOSERVE_CLIENT_INFER_WIRE_H_

#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/message_lite.h>

#include "absl/status/status.h"
#include "common/wire/bytes_field.h"
#include "proto/inference.pb.h"

namespace chronoserve::client {

// A request's raw_input_contents, held once and shared by every message written with them.
using SharedRawInputs = std::shared_ptr<const std::vector<std::string>>;

// Moves `request`'s raw_input_contents out into shared bytes (no copy), leaving the request its head.
SharedRawInputs TakeRawInputs(inference::ModelInferRequest* request);

// `head` (a request without raw_input_contents) with `raw`'s entries appended, as slices that share
// them (null `raw`: none).
grpc::ByteBuffer WriteInferRequest(const inference::ModelInferRequest& head, const SharedRawInputs& raw);

// A ModelInferResponse answer: every field but raw_output_contents parsed into `head`, which may be
// any message type with the same fields (chronobench's views), and those as views into `wire`'s
// slices, kept in `raw`. DATA_LOSS naming what is wrong when the bytes are no such message.
absl::Status ReadInferResponse(const grpc::ByteBuffer& wire, google::protobuf::MessageLite* head,
                               wire::ReceivedMessage* raw);

// A ModelStreamInferResponse answer: error_message into `error`, the infer_response's fields into
// `head` and its raw_output_contents as views (`raw`, whose `rest` holds the infer_response's
// other fields).
absl::Status ReadStreamInferResponse(const grpc::ByteBuffer& wire, std::string* error,
                                     google::protobuf::MessageLite* head, wire::ReceivedMessage* raw);

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_INFER_WIRE_H_
