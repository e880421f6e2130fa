#include "server/grpc/infer_wire.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chronoserve::server {
namespace {

// Field numbers in inference.proto.
constexpr int kRawInputContents = 7;          // ModelInferRequest.raw_input_contents
constexpr int kRawOutputContents = 6;         // ModelInferResponse.raw_output_contents
constexpr int kStreamInferResponse = 2;       // ModelStreamInferResponse.infer_response

// A writer holding `response` without its raw_output_contents, which it takes.
wire::MessageWriter TakeResponse(inference::ModelInferResponse* response) {
  auto* raw = response->mutable_raw_output_contents();
  std::vector<std::string> outputs(static_cast<size_t>(raw->size()));
  for (int k = 0; k < raw->size(); ++k) outputs[k].swap(*raw->Mutable(k));  // no copy
  raw->Clear();
  wire::MessageWriter writer(response->SerializeAsString());
  for (std::string& bytes : outputs) writer.AddOwned(kRawOutputContents, std::move(bytes));
  return writer;
}

}  // namespace

void ReceivedInferRequest::Clear() {
  message.Clear();
  raw.rest.clear();
  raw.entries.clear();
  raw.slices.reset();
  status = absl::OkStatus();
}

absl::Status ParseModelInferRequest(const grpc::ByteBuffer& wire, ReceivedInferRequest* out) {
  if (absl::Status split = wire::SplitBytesField(wire, kRawInputContents, &out->raw); !split.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a ModelInferRequest: ", split.message()));
  }
  if (!out->message.ParseFromString(out->raw.rest)) {
    return absl::InvalidArgumentError("the request is not a ModelInferRequest: its fields do not parse");
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeModelInferResponse(inference::ModelInferResponse* response) {
  return TakeResponse(response).Finish();
}

grpc::ByteBuffer SerializeModelStreamInferResponse(inference::ModelStreamInferResponse* response) {
  wire::MessageWriter writer = TakeResponse(response->mutable_infer_response());
  inference::ModelStreamInferResponse outer;
  outer.set_error_message(response->error_message());
  writer.Nest(kStreamInferResponse, outer.SerializeAsString());
  return writer.Finish();
}

}  // namespace chronoserve::server
