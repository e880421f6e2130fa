#include "common/wire/bytes_field.h"

#include <grpc/slice.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::wire {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

uint64_t Tag(int field, WireType type) { return (static_cast<uint64_t>(field) << 3) | type; }

// Reads a message's bytes across the pieces that hold them.
class PieceCursor {
 public:
  explicit PieceCursor(absl::Span<const absl::string_view> pieces) : pieces_(pieces) {}

  bool AtEnd() {
    SkipEmpty();
    return index_ == pieces_.size();
  }
  size_t offset() const { return consumed_; }

  bool ReadByte(uint8_t* byte) {
    SkipEmpty();
    if (index_ == pieces_.size()) return false;
    *byte = static_cast<uint8_t>(pieces_[index_][offset_++]);
    ++consumed_;
    return true;
  }

  // A varint of at most 10 bytes.
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // The next `bytes` bytes, as views (`pieces`) or appended to `out`.
  bool Take(uint64_t bytes, ReceivedBytes* pieces, std::string* out) {
    while (bytes > 0) {
      SkipEmpty();
      if (index_ == pieces_.size()) return false;
      const absl::string_view piece = pieces_[index_];
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, piece.size() - offset_));
      const char* at = piece.data() + offset_;
      if (pieces != nullptr) {
        pieces->pieces.emplace_back(at, n);
        pieces->size += n;
      } else {
        out->append(at, n);
      }
      offset_ += n;
      consumed_ += n;
      bytes -= n;
    }
    return true;
  }

 private:
  void SkipEmpty() {
    while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const absl::Span<const absl::string_view> pieces_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t consumed_ = 0;
};

absl::Status Malformed(const PieceCursor& at, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the message is not well-formed protobuf: ", what, " at byte ", at.offset()));
}

}  // namespace

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

std::string ReceivedBytes::ToString() const {
  std::string bytes;
  bytes.reserve(size);
  for (absl::string_view piece : pieces) bytes.append(piece.data(), piece.size());
  return bytes;
}

absl::Status SplitBytesField(absl::Span<const absl::string_view> bytes, int field, std::string* rest,
                             std::vector<ReceivedBytes>* entries) {
  rest->clear();
  entries->clear();
  PieceCursor cursor(bytes);
  // Inside an (unknown, proto2) group every field stays in the rest, `field` too: it is the group's.
  // Protobuf skips the group, and checks that its end matches its start.
  int group_depth = 0;
  while (!cursor.AtEnd()) {
    uint64_t tag = 0;
    if (!cursor.ReadVarint(&tag)) return Malformed(cursor, "a truncated field tag");
    const uint64_t number = tag >> 3;
    const auto type = static_cast<uint32_t>(tag & 7);
    if (number == 0 || number > (uint64_t{1} << 29) - 1) return Malformed(cursor, "an invalid field number");
    if (number == static_cast<uint64_t>(field) && type == kLengthDelimited && group_depth == 0) {
      uint64_t length = 0;
      ReceivedBytes entry;
      if (!cursor.ReadVarint(&length) || !cursor.Take(length, &entry, nullptr)) {
        return Malformed(cursor, absl::StrCat("field ", field, " longer than the message"));
      }
      entries->push_back(std::move(entry));
      continue;
    }
    AppendVarint(tag, rest);
    uint64_t value = 0;
    bool read = false;
    switch (type) {
      case kVarint:
        read = cursor.ReadVarint(&value);
        if (read) AppendVarint(value, rest);
        break;
      case kFixed64: read = cursor.Take(8, nullptr, rest); break;
      case kFixed32: read = cursor.Take(4, nullptr, rest); break;
      case kLengthDelimited:
        read = cursor.ReadVarint(&value);
        if (read) {
          AppendVarint(value, rest);
          read = cursor.Take(value, nullptr, rest);
        }
        break;
      case kStartGroup:
        ++group_depth;
        read = true;
        break;
      case kEndGroup:
        if (group_depth == 0) return Malformed(cursor, absl::StrCat("the end of a group (field ", number, ") never begun"));
        --group_depth;
        read = true;
        break;
      default:
        return Malformed(cursor, absl::StrCat("field ", number, " of wire type ", type, " (no such wire type)"));
    }
    if (!read) return Malformed(cursor, absl::StrCat("field ", number, " longer than the message"));
  }
  if (group_depth != 0) return Malformed(cursor, "a group that never ends");
  return absl::OkStatus();
}

absl::Status SplitBytesField(const grpc::ByteBuffer& wire, int field, ReceivedMessage* out) {
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  if (wire.Valid()) {
    if (grpc::Status dumped = wire.Dump(slices.get()); !dumped.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the message could not be read: ", dumped.error_message()));
    }
  }
  absl::InlinedVector<absl::string_view, 16> pieces;
  for (const grpc::Slice& slice : *slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (absl::Status split = SplitBytesField(pieces, field, &out->rest, &out->entries); !split.ok()) {
    // The entries read so far view `slices`, which go with this call: none may outlive it.
    out->entries.clear();
    out->rest.clear();
    return split;
  }
  out->slices = std::move(slices);
  return absl::OkStatus();
}

MessageWriter::MessageWriter(std::string head) : pending_(std::move(head)), size_(pending_.size()) {}

void MessageWriter::FlushPending() {
  if (pending_.empty()) return;
  slices_.emplace_back(pending_.data(), pending_.size());  // a copy of the small bytes
  pending_.clear();
}

bool MessageWriter::StartEntry(int field, absl::string_view bytes) {
  const size_t before = pending_.size();
  AppendVarint(Tag(field, kLengthDelimited), &pending_);
  AppendVarint(bytes.size(), &pending_);
  size_ += pending_.size() - before + bytes.size();
  if (bytes.size() < kOwnSliceBytes) {
    pending_.append(bytes.data(), bytes.size());
    return false;
  }
  FlushPending();
  return true;
}

void MessageWriter::AddOwned(int field, std::string bytes) {
  if (!StartEntry(field, bytes)) return;
  auto* owned = new std::string(std::move(bytes));
  grpc_slice slice = grpc_slice_new_with_user_data(
      owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); }, owned);
  slices_.emplace_back(slice, grpc::Slice::STEAL_REF);
}

void MessageWriter::AddShared(int field, absl::string_view bytes, std::shared_ptr<const void> keep) {
  if (!StartEntry(field, bytes)) return;
  auto* held = new std::shared_ptr<const void>(std::move(keep));
  grpc_slice slice = grpc_slice_new_with_user_data(
      const_cast<char*>(bytes.data()), bytes.size(),
      [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, held);
  slices_.emplace_back(slice, grpc::Slice::STEAL_REF);
}

void MessageWriter::AddCopy(int field, absl::string_view bytes) {
  if (StartEntry(field, bytes)) slices_.emplace_back(bytes.data(), bytes.size());  // grpc::Slice copies
}

void MessageWriter::Nest(int field, absl::string_view outer_head) {
  FlushPending();
  std::string prefix(outer_head);
  AppendVarint(Tag(field, kLengthDelimited), &prefix);
  AppendVarint(size_, &prefix);
  size_ += prefix.size();
  slices_.insert(slices_.begin(), grpc::Slice(prefix.data(), prefix.size()));
}

grpc::ByteBuffer MessageWriter::Finish() {
  FlushPending();
  grpc::ByteBuffer buffer(slices_.data(), slices_.size());
  slices_.clear();
  size_ = 0;
  return buffer;
}

}  // namespace chronoserve::wire
