// The channel arguments of chronoserve's gRPC server, for server::Server and for test harnesses
// that compose the service themselves, so that both serve calls through the same stack.
#ifndef CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_
#define CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_

#include <grpcpp/server_builder.h>

#include <cstdint>

namespace chronoserve::server {

// Received messages up to `max_request_bytes` (0: no limit; --grpc-max-request-bytes), sent ones
// of any size; large tensors in few round trips (a 16 MiB stream window, frames up to 16 MiB); no
// SO_REUSEPORT, so a second server on a port in use fails to start. `minimal_stack`
// (--grpc-minimal-stack): gRPC's minimal channel stack, without the compression and deadline
// filters (and without the message-size filter unless there is a limit), and only
// uncompressed messages accepted: gRPC refuses a compressed call by name (UNIMPLEMENTED) before it
// is handled, as no filter would decompress it. Without the deadline filter the server does not end
// a call at its deadline itself: the queue still answers a request whose deadline passed there, and
// a running request or a stream ends when the client cancels it (gRPC clients do, at the deadline).
void ConfigureServerChannel(bool minimal_stack, grpc::ServerBuilder* builder, int64_t max_request_bytes = 0);

// gRPC's default grpc.health.v1 service only when every RPC is on the callback API (`async_api`
// false): it is a callback-API service, which would start gRPC's callback polling threads beside
// the asynchronous API's queues, where HealthService (health_service.h) answers instead. Turned off
// for this builder alone: the process-wide switch only ever goes on, so servers built side by side
// in one process each get the service they expect.
void ChooseHealthService(bool async_api, grpc::ServerBuilder* builder);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_SERVER_CHANNEL_H_
