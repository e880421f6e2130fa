// ChannelStubs: what chronobench calls on one channel (one connection). `generated` is the generated
// stub, for the set-up calls (validation, shared-memory registration); `unary` and `streaming` are
// the load's ModelInfer and ModelStreamInfer, their messages byte buffers (client/infer_wire.h): a
// request's tensors go as slices every send shares, and an answer's outputs are never copied out
// of what gRPC received, while the rest of it is read as a view (proto/response_view.proto: the
// parameters map as its repeated wire entries). Reading every answer's 17 timing.* parameters
// into a protobuf map cost chronobench ~3 us of CPU per response under load, about what the rest
// of its handling of a response costs (docs/BENCHMARKS.md §23); chronobench shares the host with
// the server it measures, so that CPU came out of the server's throughput.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STUBS_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STUBS_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>

#include "proto/inference.grpc.pb.h"
#include "proto/response_view.pb.h"

namespace chronoserve::client::bench {

struct ChannelStubs {
  // The methods' full names, as the generated stub calls them.
  static constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";
  static constexpr const char* kModelStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer";

  explicit ChannelStubs(const std::shared_ptr<grpc::Channel>& channel)
      : generated(inference::GRPCInferenceService::NewStub(channel)), unary(channel), streaming(channel) {}

  std::unique_ptr<inference::GRPCInferenceService::Stub> generated;
  grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer> unary;
  grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer> streaming;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STUBS_H_
