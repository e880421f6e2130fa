// Tensor bytes between gRPC byte buffers and protobuf messages without copying them in user space.
//
// gRPC's protobuf serialization copies every `bytes` field: a received message is parsed out of
// the slices gRPC read it into (one copy of each tensor into a std::string), and a message sent is
// serialized into a freshly allocated buffer (one more copy of each tensor, after the one that
// filled the message). For KServe v2's raw_input_contents / raw_output_contents, hundreds of KiB a
// request, those copies were a large share of a request's transport (docs/BENCHMARKS.md §43).
// Here, one `repeated bytes` field of a message travels beside the rest:
//
// - SplitBytesField reads a received message: the field's entries become views into the received
//   slices (ReceivedBytes, one or more pieces each), and every other field is handed back in its
//   wire form for an ordinary ParseFromString.
// - MessageWriter writes a message: its other fields serialized as usual (the head), then the
//   field's entries appended as slices that own or share their bytes. Protobuf reads a message's
//   fields in any order and keeps a repeated field's entries in the order they arrive, so any
//   protobuf reader decodes the result exactly as the message it stands for.
//
// Thread-compatible values; no global state.
#ifndef CHRONOSERVE_COMMON_WIRE_BYTES_FIELD_H_
#define CHRONOSERVE_COMMON_WIRE_BYTES_FIELD_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chronoserve::wire {

// One entry of a `repeated bytes` field as received: views into the received slices, in order (an
// entry straddles the slices gRPC read the message into). Valid while the slices are
// (ReceivedMessage::slices).
struct ReceivedBytes {
  absl::InlinedVector<absl::string_view, 2> pieces;
  size_t size = 0;

  // The bytes when they lie in one piece (or there are none); empty otherwise.
  bool contiguous() const { return pieces.size() <= 1; }
  const char* data() const { return pieces.empty() ? nullptr : pieces.front().data(); }
  // The bytes, copied into one string.
  std::string ToString() const;
};

// A received message with one `repeated bytes` field set apart.
struct ReceivedMessage {
  std::string rest;                    // every other field, in wire form (ParseFromString it)
  std::vector<ReceivedBytes> entries;  // the field's entries, in order
  // The received slices that `entries` view: share it to keep them valid.
  std::shared_ptr<const std::vector<grpc::Slice>> slices;
};

// Splits `wire`, a serialized protobuf message, into the entries of its `repeated bytes` field
// number `field` and the rest. INVALID_ARGUMENT naming what is wrong when the bytes are not a
// well-formed message (a truncated field, a field number 0, a wire type protobuf does not write).
// Reuses `out`'s capacity; nothing is copied but the other fields' bytes.
absl::Status SplitBytesField(const grpc::ByteBuffer& wire, int field, ReceivedMessage* out);
// The same for a message that lies in `bytes` (such as one entry of another message's split field:
// a nested message); the entries view what `bytes` views.
absl::Status SplitBytesField(absl::Span<const absl::string_view> bytes, int field, std::string* rest,
                             std::vector<ReceivedBytes>* entries);

// Writes one serialized message as slices: the head (the message's other fields, serialized), then
// entries of `repeated bytes` fields, then optionally wraps the whole as a field of an outer
// message (Nest). Entries of at least kOwnSliceBytes get a slice of their own that owns or shares
// their bytes; smaller ones are copied beside the tags.
class MessageWriter {
 public:
  static constexpr size_t kOwnSliceBytes = 4096;

  // `head`: the message's other fields in wire form (e.g. SerializeAsString of the message with the
  // field cleared).
  explicit MessageWriter(std::string head);

  // An entry of field `field` whose bytes the message takes over (kept by their slice until gRPC
  // has sent them; a std::string's heap buffer moves without a copy).
  void AddOwned(int field, std::string bytes);
  // An entry of field `field` viewing `bytes`, which `keep` keeps valid until gRPC has sent them.
  void AddShared(int field, absl::string_view bytes, std::shared_ptr<const void> keep);
  // An entry of field `field` with a copy of `bytes` (the one copy a sender whose bytes gRPC may not
  // hold on to makes, where protobuf's serialization made two: into the message, then out of it).
  void AddCopy(int field, absl::string_view bytes);

  // Makes everything written so far field `field` (length-delimited) of an outer message whose
  // other fields are `outer_head`, in wire form.
  void Nest(int field, absl::string_view outer_head);

  // Bytes written so far.
  size_t size() const { return size_; }

  // The message. The writer is left empty.
  grpc::ByteBuffer Finish();

 private:
  // Writes an entry's tag and length, and its bytes too when it is small (then false); true when
  // the caller is to add them as a slice of their own (the pending bytes went into one before).
  bool StartEntry(int field, absl::string_view bytes);
  void FlushPending();

  std::vector<grpc::Slice> slices_;
  std::string pending_;  // small bytes not yet in a slice
  size_t size_ = 0;
};

// Appends `value` as a protobuf varint.
void AppendVarint(uint64_t value, std::string* out);

}  // namespace chronoserve::wire

#endif  // CHRONOSERVE_COMMON_WIRE_BYTES_FIELD_H_
