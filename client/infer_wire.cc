#include "client/infer_wire.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chronoserve::client {
namespace {

constexpr int kRawInputContentsField = inference::ModelInferRequest::kRawInputContentsFieldNumber;
constexpr int kRawOutputContentsField = inference::ModelInferResponse::kRawOutputContentsFieldNumber;
constexpr int kStreamInferResponseField = inference::ModelStreamInferResponse::kInferResponseFieldNumber;

absl::Status NotA(absl::string_view type, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("the answer is not a ", type, ": ", why));
}

}  // namespace

SharedRawInputs TakeRawInputs(inference::ModelInferRequest* request) {
  auto raw = std::make_shared<std::vector<std::string>>(static_cast<size_t>(request->raw_input_contents_size()));
  for (int k = 0; k < request->raw_input_contents_size(); ++k) (*raw)[k].swap(*request->mutable_raw_input_contents(k));
  request->clear_raw_input_contents();
  return raw;
}

grpc::ByteBuffer WriteInferRequest(const inference::ModelInferRequest& head, const SharedRawInputs& raw) {
  wire::MessageWriter writer(head.SerializeAsString());
  if (raw != nullptr) {
    for (const std::string& bytes : *raw) writer.AddShared(kRawInputContentsField, bytes, raw);
  }
  return writer.Finish();
}

absl::Status ReadInferResponse(const grpc::ByteBuffer& wire, google::protobuf::MessageLite* head,
                               wire::ReceivedMessage* raw) {
  if (absl::Status split = wire::SplitBytesField(wire, kRawOutputContentsField, raw); !split.ok()) {
    return NotA("ModelInferResponse", split.message());
  }
  if (!head->ParseFromString(raw->rest)) return NotA("ModelInferResponse", "its fields do not parse");
  return absl::OkStatus();
}

absl::Status ReadStreamInferResponse(const grpc::ByteBuffer& wire, std::string* error,
                                     google::protobuf::MessageLite* head, wire::ReceivedMessage* raw) {
  wire::ReceivedMessage outer;
  if (absl::Status split = wire::SplitBytesField(wire, kStreamInferResponseField, &outer); !split.ok()) {
    return NotA("ModelStreamInferResponse", split.message());
  }
  inference::ModelStreamInferResponse rest;
  if (!rest.ParseFromString(outer.rest)) return NotA("ModelStreamInferResponse", "its fields do not parse");
  *error = rest.error_message();
  raw->entries.clear();
  raw->slices = std::move(outer.slices);
  if (outer.entries.empty()) {  // no infer_response: an empty one
    raw->rest.clear();
    head->Clear();
    return absl::OkStatus();
  }
  // A message field given more than once merges on the wire; a server sends it once.
  if (absl::Status split = wire::SplitBytesField(outer.entries.back().pieces, kRawOutputContentsField, &raw->rest,
                                                 &raw->entries);
      !split.ok()) {
    return NotA("ModelStreamInferResponse", split.message());
  }
  if (!head->ParseFromString(raw->rest)) return NotA("ModelStreamInferResponse", "its infer_response does not parse");
  return absl::OkStatus();
}

}  // namespace chronoserve::client
