#include "server/grpc/infer_wire.h"

#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server {
namespace {

static_assert(kMinLentOutputBytes == wire::MessageWriter::kOwnSliceBytes,
              "a lent output smaller than an own slice would be copied into the message anyway");

// A writer holding `response` without its raw_output_contents, which it takes: a large entry's
// bytes move into the message (no copy); a small one is copied beside the tags and its string,
// cleared, keeps its capacity for the response's next use (ResponsePool, stream slots), so that the
// receiving thread reserves nothing for it again. An entry `lent` has bytes for goes as a view of
// them, holding their owner.
wire::MessageWriter TakeResponse(inference::ModelInferResponse* response, std::vector<LentBytes>* lent) {
  auto* raw = response->mutable_raw_output_contents();
  absl::InlinedVector<std::string, 4> large(static_cast<size_t>(raw->size()));  // empty: a small entry
  for (int k = 0; k < raw->size(); ++k) {
    if (raw->Get(k).size() >= wire::MessageWriter::kOwnSliceBytes) large[k].swap(*raw->Mutable(k));
  }
  // The head is serialized without the entries, which follow it in their order.
  google::protobuf::RepeatedPtrField<std::string> entries;
  entries.Swap(raw);
  wire::MessageWriter writer(response->SerializeAsString());
  entries.Swap(raw);
  for (int k = 0; k < raw->size(); ++k) {
    LentBytes* borrowed = lent != nullptr && static_cast<size_t>(k) < lent->size() ? &(*lent)[k] : nullptr;
    if (borrowed != nullptr && borrowed->owner != nullptr) {
      writer.AddShared(inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                       absl::string_view(borrowed->data, borrowed->size), std::move(borrowed->owner));
    } else if (!large[k].empty()) {
      writer.AddOwned(inference::ModelInferResponse::kRawOutputContentsFieldNumber, std::move(large[k]));
    } else {
      writer.AddCopy(inference::ModelInferResponse::kRawOutputContentsFieldNumber, raw->Get(k));
    }
  }
  raw->Clear();  // keeps the strings, cleared, with their capacity
  if (lent != nullptr) lent->clear();
  return writer;
}

}  // namespace

void ReceivedInferRequest::Clear() {
  message.Clear();
  raw.rest.clear();
  raw.entries.clear();
  raw.slices.reset();
  status = absl::OkStatus();
  arrived_ns = 0;
}

absl::Status ParseModelInferRequest(const grpc::ByteBuffer& wire, ReceivedInferRequest* out) {
  if (absl::Status split = wire::SplitBytesField(wire, inference::ModelInferRequest::kRawInputContentsFieldNumber,
                                                  &out->raw); !split.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a ModelInferRequest: ", split.message()));
  }
  if (!out->message.ParseFromString(out->raw.rest)) {
    return absl::InvalidArgumentError("the request is not a ModelInferRequest: its fields do not parse");
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeModelInferResponse(inference::ModelInferResponse* response, std::vector<LentBytes>* lent) {
  return TakeResponse(response, lent).Finish();
}

grpc::ByteBuffer SerializeModelStreamInferResponse(inference::ModelStreamInferResponse* response,
                                                   std::vector<LentBytes>* lent) {
  wire::MessageWriter writer = TakeResponse(response->mutable_infer_response(), lent);
  inference::ModelStreamInferResponse outer;
  outer.set_error_message(response->error_message());
  writer.Nest(inference::ModelStreamInferResponse::kInferResponseFieldNumber, outer.SerializeAsString());
  return writer.Finish();
}

}  // namespace chronoserve::server
