// InferStream: one ModelStreamInfer call (Triton's bidirectional streaming inference) on gRPC's
// callback client API. Send() never blocks: requests are written in order, one write outstanding
// at a time; responses are collected as they arrive (in completion order, matched to requests by
// id) and waited for with a timeout, so tests and tools never hang. Thread-safe; the stream is
// cancelled (and waited for) when the object goes.
//
//   auto stream = InferStream::Open(client.stub());
//   stream->Send(InferenceClient::BuildRequest("mlp", {input}, {.id = "a"}));
//   auto answer = stream->Next(absl::Seconds(30));   // nullopt: none within the timeout / stream over
//   stream->CloseSend();  auto status = stream->Finish(absl::Seconds(30));
#ifndef CHRONOSERVE_CLIENT_INFER_STREAM_H_
#define CHRONOSERVE_CLIENT_INFER_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client {

struct StreamAnswer {
  inference::ModelStreamInferResponse message;
  int64_t received_ns = 0;  // steady clock, when the response was read
};

class InferStream final
    : public grpc::ClientBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  // `metadata` goes with the call (e.g. traceparent for every request of the stream).
  static std::unique_ptr<InferStream> Open(inference::GRPCInferenceService::Stub* stub,
                                           const std::map<std::string, std::string>& metadata = {});
  ~InferStream() override;

  // Queues `request` for writing; false once the stream ended or CloseSend was called.
  bool Send(inference::ModelInferRequest request);
  // Half-closes after the queued requests are written.
  void CloseSend();
  void Cancel() { context_.TryCancel(); }

  // The next response not yet taken; nullopt when none arrived within `timeout` or the stream is
  // over with nothing left.
  std::optional<StreamAnswer> Next(absl::Duration timeout);
  // The stream's final status once it ended; nullopt if it did not end within `timeout`.
  std::optional<grpc::Status> Finish(absl::Duration timeout);

  // Decodes one response: its error (code from the "error_code" parameter when it is a gRPC code,
  // else UNKNOWN) or the result, as InferenceClient::Infer returns it (e2e_ns left 0).
  // `output_shared_memory`: where the request asked for outputs (InferOptions'), so that a server
  // that does not echo the region on an output it wrote there (Triton) is read as Infer reads it.
  static absl::StatusOr<InferResult> Decode(
      const inference::ModelStreamInferResponse& response,
      const std::map<std::string, SharedMemoryRef>* output_shared_memory = nullptr);

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  InferStream() = default;
  // Starts the next write when none is outstanding; returns the message to write, or null.
  const inference::ModelInferRequest* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether to start WritesDone now (then marked in flight): CloseSend was called, nothing is left
  // to write or being written, no write failed and the reads are not over.
  bool StartWritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True once, for the caller that must release the hold taken in Open(): the reads are over and
  // neither a write nor WritesDone is in flight (each started outside a reaction under the hold).
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::ClientContext context_;
  inference::ModelStreamInferResponse reading_;  // the read outstanding into it
  absl::Mutex mu_;
  std::deque<inference::ModelInferRequest> to_write_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool close_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;               // WritesDone was started
  bool writes_done_pending_ ABSL_GUARDED_BY(mu_) = false;  // ... and has not completed
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<StreamAnswer> answers_ ABSL_GUARDED_BY(mu_);
  bool reads_over_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_INFER_STREAM_H_
