// The one place absl::Status becomes grpc::Status (codes map 1:1; messages capped at 1 KiB, cut on
// a UTF-8 character boundary).
#ifndef CHRONOSERVE_SERVER_GRPC_GRPC_STATUS_H_
#define CHRONOSERVE_SERVER_GRPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace chronoserve::server {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

// The length of the longest prefix of `text` of at most `max_bytes` bytes that splits no UTF-8
// character. A streamed error travels in a proto3 string (ModelStreamInferResponse.error_message),
// and a client's parser refuses invalid UTF-8: half a character would fail its read and end the
// stream for every later response. Backs up at most 3 bytes (a character is at most 4), so text
// that is not UTF-8 at the cut is still cut near `max_bytes`.
inline size_t Utf8PrefixLength(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t cut = max_bytes;
  auto continues = [&text](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  for (int back = 0; back < 3 && cut > 0 && continues(cut); ++back) --cut;
  return cut;
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    message.resize(Utf8PrefixLength(message, kMaxStatusMessageBytes - 3));
    message += "...";
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_GRPC_STATUS_H_
