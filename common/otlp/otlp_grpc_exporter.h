// OtlpGrpcExporter: sends spans to an OTLP/gRPC collector (TraceService/Export) over our own gRPC
// with the hand-written OTLP protos. Retries with exponential backoff and jitter only on the codes
// the OTLP spec calls retryable, never past the caller's deadline; Shutdown() cancels a call or a
// backoff in progress. Owned by the BatchSpanProcessor; Export runs on its export thread.
#ifndef CHRONOSERVE_COMMON_OTLP_OTLP_GRPC_EXPORTER_H_
#define CHRONOSERVE_COMMON_OTLP_OTLP_GRPC_EXPORTER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"
#include "common/otlp/otlp_encoder.h"
#include "common/otlp/span_exporter.h"

namespace chronoserve::otlp {

struct RetryPolicy {
  int max_attempts = 5;  // including the first
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(5);
  double multiplier = 1.5;
};

struct OtlpGrpcExporterOptions {
  std::string endpoint;  // HOST:PORT (gRPC target)
  bool use_tls = false;  // https:// endpoints: the system's root certificates, no client certificate
  OtlpResource resource;
  RetryPolicy retry;
  // Sent as request metadata on every Export call (OTEL_EXPORTER_OTLP_HEADERS): keys are valid
  // gRPC metadata keys (lower case), values printable ASCII.
  std::vector<std::pair<std::string, std::string>> headers;
  // Deadline of each Export attempt (OTEL_EXPORTER_OTLP_TIMEOUT; the spec's default 10 s), within
  // the caller's deadline for the whole export with its retries.
  absl::Duration timeout = absl::Seconds(10);
};

// The OTLP spec's retryable codes: CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
// UNAVAILABLE, DATA_LOSS. (RESOURCE_EXHAUSTED counts only with RetryInfo, which we do not parse.)
bool IsRetryableOtlpCode(grpc::StatusCode code);

class OtlpGrpcExporter final : public SpanExporter {
 public:
  // INVALID_ARGUMENT for an empty endpoint. The channel connects lazily (no thread is started).
  static absl::StatusOr<std::unique_ptr<OtlpGrpcExporter>> Create(const OtlpGrpcExporterOptions& options);

  // The result carries the collector's partial_success (rejected_spans, error_message) of the
  // attempt that succeeded.
  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time deadline) override;
  void Shutdown() override;

 private:
  explicit OtlpGrpcExporter(const OtlpGrpcExporterOptions& options);

  // One Export RPC, cancellable by Shutdown.
  grpc::Status CallOnce(const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request,
                        absl::Time deadline,
                        opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse* response);
  // Sleeps for the attempt's backoff, or until shutdown/deadline; false when it must stop.
  bool Backoff(int attempt, absl::Time deadline);

  const OtlpGrpcExporterOptions options_;
  std::unique_ptr<opentelemetry::proto::collector::trace::v1::TraceService::Stub> stub_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_OTLP_GRPC_EXPORTER_H_
