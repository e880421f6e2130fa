// InferenceClient: a small synchronous KServe v2 client for chronoserve (and any KServe/Triton
// server): health, metadata, statistics, and Infer() that returns outputs plus the server's
// per-request timing (timing.* parameters and the server-timing trailer) and the client's own
// end-to-end time. Thread-safe (gRPC stubs are); share one per channel.
#ifndef CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_
#define CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/timing.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client {

struct Tensor {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;
  std::string data;  // row-major bytes
};

struct InferOptions {
  std::string id;
  std::vector<std::string> outputs;                 // empty: all
  std::optional<std::chrono::milliseconds> timeout;  // gRPC deadline
  std::map<std::string, std::string> metadata;       // e.g. traceparent
  bool typed_contents = false;                       // send typed contents instead of raw bytes
};

struct InferResult {
  std::string id;
  std::vector<Tensor> outputs;
  std::optional<RequestTiming> timing;  // from the response parameters
  std::string server_timing;            // the trailer, as received
  int64_t e2e_ns = 0;                   // client send -> response received
};

class InferenceClient {
 public:
  // An insecure channel to HOST:PORT (created lazily by gRPC).
  static std::unique_ptr<InferenceClient> Connect(const std::string& address);
  explicit InferenceClient(std::shared_ptr<grpc::Channel> channel);

  absl::StatusOr<bool> ServerLive();
  absl::StatusOr<bool> ServerReady();
  absl::StatusOr<bool> ModelReady(const std::string& model, const std::string& version = "");
  absl::StatusOr<inference::ServerMetadataResponse> ServerMetadata();
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model);
  absl::StatusOr<inference::ModelStatisticsResponse> ModelStatistics(const std::string& model);

  // Runs one inference. Non-OK for transport or server errors (the server's code and message).
  absl::StatusOr<InferResult> Infer(const std::string& model, const std::vector<Tensor>& inputs,
                                    const InferOptions& options = {});

  // Builds the request message (exposed for clients that drive the stub themselves).
  static inference::ModelInferRequest BuildRequest(const std::string& model,
                                                   const std::vector<Tensor>& inputs,
                                                   const InferOptions& options);
  // Decodes a response message.
  static absl::StatusOr<InferResult> DecodeResponse(const inference::ModelInferResponse& response);
  // Only the timing.* parameters of a response (no output copies); nullopt when it has none.
  static std::optional<RequestTiming> DecodeTiming(const inference::ModelInferResponse& response);

  inference::GRPCInferenceService::Stub* stub() { return stub_.get(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_
