#include "server/grpc/grpc_log.h"

#include <grpc/support/log.h>

#include "common/log.h"

namespace chronoserve::server {
namespace {

void WriteGrpcLine(gpr_log_func_args* args) {
  LogLevel level = LogLevel::kVerbose;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = LogLevel::kError;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = LogLevel::kInfo;
  LogMessage(level, args->file, args->line).stream() << args->message;
}

}  // namespace

void RouteGrpcLogThroughOurs() { gpr_set_log_function(&WriteGrpcLine); }

}  // namespace chronoserve::server
