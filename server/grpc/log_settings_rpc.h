// Triton's logging extension (LogSettings RPC): reads the server's log settings (common/log.h) and
// changes some of them while it runs. Keys and types as Triton's: log_info, log_warning, log_error
// (bool), log_verbose_level (uint32, 0-10 as --log-verbose), log_format (string: "default" or
// "ISO8601"), log_file (string, read only: chronoserve logs to stderr, so it is always ""). Called
// inline on the thread gRPC hands the call to (InferenceService::AnswerLogSettings).
#ifndef CHRONOSERVE_SERVER_GRPC_LOG_SETTINGS_RPC_H_
#define CHRONOSERVE_SERVER_GRPC_LOG_SETTINGS_RPC_H_

#include "absl/status/status.h"
#include "proto/inference.pb.h"

namespace chronoserve::server {

// Highest --log-verbose / log_verbose_level.
inline constexpr int kMaxLogVerbosity = 10;

// Applies `request`'s settings (none: nothing changes) and fills `response` with every setting's
// value afterwards. All or nothing: an unknown key, a value of the wrong type, a verbosity past
// kMaxLogVerbosity, a format that is not one, or a log_file other than "" is INVALID_ARGUMENT
// naming the setting and what it takes, and changes nothing. A change is logged at INFO (before
// INFO is turned off, after it is turned on).
absl::Status AnswerLogSettings(const inference::LogSettingsRequest& request, inference::LogSettingsResponse* response);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_LOG_SETTINGS_RPC_H_
