// The channel arguments of chronoserve's gRPC server, for server::Server and for test harnesses
// that compose the service themselves, so that both serve calls through the same stack.
#ifndef CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_
#define CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_

#include <grpcpp/server_builder.h>

namespace chronoserve::server {

// No message size limit; large tensors in few round trips (a 16 MiB stream window, frames up to
// 16 MiB); no SO_REUSEPORT, so a second server on a port in use fails to start. `minimal_stack`
// (--grpc-minimal-stack): gRPC's minimal channel stack, without the compression, deadline and
// message-size filters, and only uncompressed messages accepted: gRPC refuses a compressed call by
// name (UNIMPLEMENTED) before it is handled, as no filter would decompress it.
void ConfigureServerChannel(bool minimal_stack, grpc::ServerBuilder* builder);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_
