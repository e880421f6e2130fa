#include "server/grpc/server_channel.h"

#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/health_check_service_interface.h>

#include <memory>

namespace chronoserve::server {

void ConfigureServerChannel(bool minimal_stack, grpc::ServerBuilder* builder, int64_t max_request_bytes) {
  builder->SetMaxReceiveMessageSize(max_request_bytes > 0 ? static_cast<int>(max_request_bytes) : -1);
  builder->SetMaxSendMessageSize(-1);
  // Large tensors: let a whole request/response fly without waiting for HTTP/2 window updates.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1);
  // gRPC sets SO_REUSEPORT on Linux by default: a second server on a port in use would bind it
  // too and silently take a share of the connections. Ours must fail to start instead.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (minimal_stack) {
    builder->AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
    builder->AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET, 1 << GRPC_COMPRESS_NONE);
  }
}

void ChooseHealthService(bool async_api, grpc::ServerBuilder* builder) {
  if (!async_api) {
    grpc::EnableDefaultHealthCheckService(true);
    return;
  }
  builder->SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
}

}  // namespace chronoserve::server
