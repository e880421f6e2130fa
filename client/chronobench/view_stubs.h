// ViewStubs: one channel's ModelInfer and ModelStreamInfer for the load workers, with the answers
// read as views (proto/response_view.proto: the parameters map as its repeated wire entries).
// Reading every answer's 17 timing.* parameters into a protobuf map cost chronobench ~3 us of CPU
// per response under load, about what the rest of its handling of a response costs
// (docs/BENCHMARKS.md §23); chronobench shares the host with the server it measures, so that CPU
// came out of the server's throughput. The requests are the generated messages, unchanged.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_VIEW_STUBS_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_VIEW_STUBS_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>

#include "proto/inference.pb.h"
#include "proto/response_view.pb.h"

namespace chronoserve::client::bench {

struct ViewStubs {
  // The methods' full names, as the generated stub calls them.
  static constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";
  static constexpr const char* kModelStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer";

  explicit ViewStubs(const std::shared_ptr<grpc::Channel>& channel) : unary(channel), streaming(channel) {}

  grpc::TemplatedGenericStub<inference::ModelInferRequest, view::ModelInferResponseView> unary;
  grpc::TemplatedGenericStub<inference::ModelInferRequest, view::ModelStreamInferResponseView> streaming;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_VIEW_STUBS_H_
