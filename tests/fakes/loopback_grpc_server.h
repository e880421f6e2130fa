// StartLoopbackServer: a test's own gRPC service (a fake server, or chronoserve's service composed
// by hand) on 127.0.0.1 at a port the kernel picks, written to *port. Null when it did not start.
//
//   FakeService service;
//   int port = 0;
//   std::unique_ptr<grpc::Server> server = testing::StartLoopbackServer(&service, &port);
#ifndef CHRONOSERVE_TESTS_FAKES_LOOPBACK_GRPC_SERVER_H_
#define CHRONOSERVE_TESTS_FAKES_LOOPBACK_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>

namespace chronoserve::testing {

inline std::unique_ptr<grpc::Server> StartLoopbackServer(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_LOOPBACK_GRPC_SERVER_H_
