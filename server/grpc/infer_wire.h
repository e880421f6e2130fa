// ModelInfer's messages as gRPC byte buffers, with the tensors' bytes never copied in user space
// (common/wire/bytes_field.h): a request's raw_input_contents stay in the slices gRPC received them
// in until the receiving thread stages them into the input arena, and a response's
// raw_output_contents go to gRPC in the strings the backend wrote them into, or straight from the
// backend's buffer when it lent them (LentBytes: a GPU's page-locked landing buffer). gRPC's protobuf
// serialization copied each of them once more (a parse into strings, a serialization into a fresh
// buffer). Used by the unary ModelInfer and the streams of ModelStreamInfer on the asynchronous API
// (model_infer_queues.h, queued_call.h); the callback API (--grpc-infer-threads 0) keeps gRPC's
// protobuf serialization. Any thread.
#ifndef CHRONOSERVE_SERVER_GRPC_INFER_WIRE_H_
#define CHRONOSERVE_SERVER_GRPC_INFER_WIRE_H_

#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/wire/bytes_field.h"
#include "proto/inference.pb.h"
#include "server/core/infer_request.h"

namespace chronoserve::server {

// A ModelInferRequest as read: the message without raw_input_contents, and those entries as views
// into the received slices (a RawInputContents for BuildInferRequest).
struct ReceivedInferRequest {
  inference::ModelInferRequest message;
  wire::ReceivedMessage raw;
  // A streamed message's read: OK, or why its bytes were no ModelInferRequest (the stream answers
  // it with that error and goes on).
  absl::Status status;
  // Steady clock: the whole message was in the server's hands, before it was parsed (the
  // asynchronous API, which parses it itself: the parse is then in `admit`, as for a unary call);
  // 0 = not stamped (gRPC's callback API parses it before the reactor sees it).
  int64_t arrived_ns = 0;

  // Whether the raw entries were read apart from the message (else they are in it, as gRPC's
  // callback API parses them).
  bool raw_apart() const { return raw.slices != nullptr; }
  // Empty, keeping the message's capacity.
  void Clear();
};

// Reads `wire` into `out` (reusing its capacity). INVALID_ARGUMENT, saying what is wrong, when the
// bytes are not a ModelInferRequest.
absl::Status ParseModelInferRequest(const grpc::ByteBuffer& wire, ReceivedInferRequest* out);

// The first field of `bytes` (a message of type `type` on the wire) that does not parse, as a path
// ("inputs[1].name"; a packed run of numbers by the field's name, "inputs[0].shape"), found by
// parsing each field alone and going into a message field that fails (`depth` levels down at most
// 4); "" when every field parses alone, or when `bytes` is longer than a protobuf message can be.
// Only for an error's text: it parses the failed message again.
std::string FirstFieldThatFails(const google::protobuf::Descriptor* type, absl::string_view bytes, int depth = 0);

// `response` as a message on the wire. Its raw_output_contents move into the message without a
// copy: `response` keeps every other field and is left without raw_output_contents. Where `lent`
// (CallInfo::lent_outputs, may be null) has an entry with an owner, that entry's bytes stand for
// raw_output_contents of the same index (the backend lent them, and left the string empty): the
// message views them, and the owner goes with it until gRPC has sent them. `lent` is left empty.
grpc::ByteBuffer SerializeModelInferResponse(inference::ModelInferResponse* response,
                                             std::vector<LentBytes>* lent = nullptr);

// The same for a streamed answer (ModelStreamInferResponse: error_message, infer_response).
grpc::ByteBuffer SerializeModelStreamInferResponse(inference::ModelStreamInferResponse* response,
                                                   std::vector<LentBytes>* lent = nullptr);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_INFER_WIRE_H_
