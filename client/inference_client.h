// InferenceClient: a small synchronous KServe v2 client for chronoserve (and any KServe/Triton
// server whose tensors are numeric or BOOL: a response with a BYTES output is UNIMPLEMENTED, naming
// it): health, metadata, statistics, Triton's system shared-memory registration, and Infer()
// that returns outputs plus the server's per-request timing (timing.* parameters and the
// server-timing trailer) and the client's own end-to-end time. Tensors may travel in registered
// shared-memory regions (client/system_shared_memory.h) instead of the message. Thread-safe (gRPC
// stubs are); share one per channel.
#ifndef CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_
#define CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_

#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/timing.h"
#include "common/wire/bytes_field.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client {

// Where a tensor's bytes lie in a region registered with the server (Triton's parameters
// shared_memory_region, shared_memory_byte_size, shared_memory_offset).
struct SharedMemoryRef {
  std::string region;  // the name it was registered under
  size_t byte_size = 0;
  size_t offset = 0;
};

struct Tensor {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;
  std::string data;  // row-major bytes (empty when the tensor is in shared memory)
  // Set: the bytes are in this region (inputs: written by the caller before Infer; outputs: by the
  // server before the response), not in the message.
  std::optional<SharedMemoryRef> shared_memory;
};

struct InferOptions {
  std::string id;
  std::string version;                              // the model version; empty: the server's choice
  std::vector<std::string> outputs;                 // empty: all
  // Outputs the server writes into a registered region instead of the response. Names not in
  // `outputs` are requested too (so with `outputs` empty, only these are returned).
  std::map<std::string, SharedMemoryRef> output_shared_memory;
  std::optional<std::chrono::milliseconds> timeout;  // gRPC deadline
  std::multimap<std::string, std::string> metadata;  // e.g. traceparent; a key may repeat, as in gRPC
  // Send typed contents (InferTensorContents) instead of raw bytes: the shape's element count of
  // values, or as many whole values as `data` holds when it holds fewer (never read past it; the
  // server then refuses the count, naming the input). FP16/BF16 have no typed field.
  bool typed_contents = false;
};

struct InferResult {
  std::string id;
  std::vector<Tensor> outputs;
  std::optional<RequestTiming> timing;  // from the response parameters
  std::string server_timing;            // the trailer, as received
  int64_t e2e_ns = 0;                   // client send -> response received
};

// The channel arguments of our clients: no message size limit, and large tensors in few round
// trips (a 16 MiB stream window and frames up to 16 MiB). Callers add their own to a copy.
grpc::ChannelArguments ClientChannelArguments();

class InferenceClient {
 public:
  // An insecure channel to HOST:PORT (created lazily by gRPC). `default_timeout` set: the deadline
  // of every call that sets none (all but an Infer with InferOptions::timeout); unset: no deadline.
  static std::unique_ptr<InferenceClient> Connect(
      const std::string& address, std::optional<std::chrono::milliseconds> default_timeout = std::nullopt);
  explicit InferenceClient(std::shared_ptr<grpc::Channel> channel,
                           std::optional<std::chrono::milliseconds> default_timeout = std::nullopt);

  absl::StatusOr<bool> ServerLive();
  absl::StatusOr<bool> ServerReady();
  absl::StatusOr<bool> ModelReady(const std::string& model, const std::string& version = "");
  absl::StatusOr<inference::ServerMetadataResponse> ServerMetadata();
  // `version` empty: the server's choice.
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                                 const std::string& version = "");
  absl::StatusOr<inference::ModelStatisticsResponse> ModelStatistics(const std::string& model);

  // Triton's system_shared_memory extension. Register maps [offset, offset + byte_size) of the
  // POSIX object `key` in the server under `name`; Unregister with an empty name drops them all;
  // Status with an empty name lists them all.
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key, size_t byte_size,
                                          size_t offset = 0);
  absl::Status UnregisterSystemSharedMemory(const std::string& name = "");
  absl::StatusOr<inference::SystemSharedMemoryStatusResponse> SystemSharedMemoryStatus(const std::string& name = "");

  // Triton's cuda_shared_memory extension: `raw_handle` is the bytes of a cudaIpcMemHandle_t for
  // `byte_size` bytes of memory on GPU `device_id` (cudaIpcGetMemHandle; the client keeps the
  // memory allocated while it is registered). Empty names as above.
  absl::Status RegisterCudaSharedMemory(const std::string& name, const std::string& raw_handle, int64_t device_id,
                                        size_t byte_size);
  absl::Status UnregisterCudaSharedMemory(const std::string& name = "");
  absl::StatusOr<inference::CudaSharedMemoryStatusResponse> CudaSharedMemoryStatus(const std::string& name = "");

  // Runs one inference. Non-OK for transport or server errors (the server's code and message).
  absl::StatusOr<InferResult> Infer(const std::string& model, const std::vector<Tensor>& inputs,
                                    const InferOptions& options = {});

  // Builds the request message (exposed for clients that drive the stub themselves).
  static inference::ModelInferRequest BuildRequest(const std::string& model,
                                                   const std::vector<Tensor>& inputs,
                                                   const InferOptions& options);
  // Decodes a response message. An output the server wrote into shared memory comes back with
  // `shared_memory` set and no data (read it from the region).
  static absl::StatusOr<InferResult> DecodeResponse(const inference::ModelInferResponse& response);
  // Marks the outputs of `response` that the request asked for in a region (`asked`) as there,
  // with the region's parameters, when the server did not (Triton does not echo them): those whose
  // raw entry is empty (or all of them when the entries are only for outputs in the message).
  // `entry_sizes`: the raw entries' sizes when read apart from the message (else its own).
  static void MarkAskedSharedMemory(const std::map<std::string, SharedMemoryRef>& asked,
                                    inference::ModelInferResponse* response,
                                    const std::vector<size_t>* entry_sizes = nullptr);
  // The same for a response whose raw_output_contents were read apart from it (`raw_apart`; the
  // message's own when null), as Infer reads them.
  static absl::StatusOr<InferResult> DecodeResponse(const inference::ModelInferResponse& response,
                                                    const std::vector<wire::ReceivedBytes>* raw_apart);
  // Only the timing.* parameters of a response (no output copies); nullopt when it has none.
  static std::optional<RequestTiming> DecodeTiming(const inference::ModelInferResponse& response);

  inference::GRPCInferenceService::Stub* stub() { return stub_.get(); }

 private:
  // Sets the default deadline on a fresh call's context, when there is one.
  void ApplyDefaultTimeout(grpc::ClientContext* ctx) const;
  // BuildRequest without raw_input_contents: the inputs that travel as raw bytes go to `raw`, in order.
  static inference::ModelInferRequest BuildRequestHead(const std::string& model, const std::vector<Tensor>& inputs,
                                                       const InferOptions& options, std::vector<const Tensor*>* raw);

  std::shared_ptr<grpc::Channel> channel_;
  const std::optional<std::chrono::milliseconds> default_timeout_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const grpc::internal::RpcMethod model_infer_;  // ModelInfer, called with byte buffers (Infer)
};

absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_INFERENCE_CLIENT_H_
