// gRPC's own log lines (its C core's gpr_log: a port it cannot bind, a transport error) written
// through common/log, so that they take the server's --log-format and --log-error / --log-info
// settings (and LogSettings' changes) like every other line. gRPC still chooses what it logs
// (GRPC_VERBOSITY, default ERROR); its DEBUG lines print with the letter V.
#ifndef CHRONOSERVE_SERVER_GRPC_GRPC_LOG_H_
#define CHRONOSERVE_SERVER_GRPC_GRPC_LOG_H_

namespace chronoserve::server {

// Installs the route for the whole process (main calls it once, before gRPC starts).
void RouteGrpcLogThroughOurs();

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_GRPC_LOG_H_
