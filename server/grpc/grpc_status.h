// The one place absl::Status becomes grpc::Status (codes map 1:1; messages capped at 1 KiB, cut on
// a UTF-8 character boundary: Utf8PrefixLength, common/text_excerpt.h).
#ifndef CHRONOSERVE_SERVER_GRPC_GRPC_STATUS_H_
#define CHRONOSERVE_SERVER_GRPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

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
