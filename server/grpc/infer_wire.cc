#include "server/grpc/infer_wire.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>

#include <limits>
#include <map>
#include <memory>
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

std::string FirstFieldThatFails(const google::protobuf::Descriptor* type, absl::string_view bytes, int depth) {
  namespace pb = google::protobuf;
  using pb::internal::WireFormatLite;
  // protobuf's streams count in int: a longer message is no protobuf message at all (and its size
  // would wrap).
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return "";
  const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(type);
  if (prototype == nullptr) return "";
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  std::map<int, int> seen;  // field number -> occurrences so far (a repeated field's index)
  while (true) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return "";
    // A length-delimited field's payload starts past its length (where a message field's own fields are).
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    int payload = -1;
    bool skipped = false;
    if (delimited) {
      uint32_t length = 0;
      skipped = in.ReadVarint32(&length);
      payload = in.CurrentPosition();
      skipped = skipped && in.Skip(static_cast<int>(length));
    } else {
      skipped = WireFormatLite::SkipField(&in, tag);
    }
    if (!skipped) return "";  // the split before would have said so
    const size_t end = static_cast<size_t>(in.CurrentPosition());
    const absl::string_view field_bytes = bytes.substr(static_cast<size_t>(start), end - static_cast<size_t>(start));
    const int number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const int index = seen[number]++;
    std::unique_ptr<pb::Message> alone(prototype->New());
    if (alone->ParseFromArray(field_bytes.data(), static_cast<int>(field_bytes.size()))) continue;
    const pb::FieldDescriptor* field = type->FindFieldByNumber(number);
    if (field == nullptr) return absl::StrCat("field ", number);
    std::string path(field->name());
    if (field->is_map()) {
      absl::StrAppend(&path, " (entry ", index, ")");
    } else if (field->is_packable() && delimited) {
      // A packed run of numbers: which one fails is not counted here, so the field is named whole.
    } else if (field->is_repeated()) {
      absl::StrAppend(&path, "[", index, "]");
    }
    if (field->type() == pb::FieldDescriptor::TYPE_MESSAGE && delimited && depth < 4) {
      const std::string nested = FirstFieldThatFails(
          field->message_type(), bytes.substr(static_cast<size_t>(payload), end - static_cast<size_t>(payload)),
          depth + 1);
      if (!nested.empty()) absl::StrAppend(&path, ".", nested);
    } else if (field->type() == pb::FieldDescriptor::TYPE_STRING) {
      absl::StrAppend(&path, " (a string, which must be UTF-8)");
    }
    return path;
  }
}

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
  if (out->raw.rest.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request is not a ModelInferRequest: its fields other than raw_input_contents take ",
        out->raw.rest.size(), " bytes, more than a protobuf message can (2 GiB); send large tensors in "
        "raw_input_contents or through shared memory"));
  }
  if (!out->message.ParseFromString(out->raw.rest)) {
    const std::string field = FirstFieldThatFails(inference::ModelInferRequest::descriptor(), out->raw.rest);
    return absl::InvalidArgumentError(absl::StrCat("the request is not a ModelInferRequest: ",
                                                   field.empty() ? "its fields do not parse"
                                                                 : absl::StrCat("its field ", field, " does not parse")));
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
