#include "common/otlp/otlp_grpc_exporter.h"

#include <algorithm>
#include <cmath>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace chronoserve::otlp {

namespace collector = opentelemetry::proto::collector::trace::v1;

bool IsRetryableOtlpCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<OtlpGrpcExporter>> OtlpGrpcExporter::Create(
    const OtlpGrpcExporterOptions& options) {
  if (options.endpoint.empty()) return absl::InvalidArgumentError("OTLP endpoint is empty");
  if (options.retry.max_attempts < 1) return absl::InvalidArgumentError("OTLP retry: max_attempts < 1");
  if (options.timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("OTLP timeout must be positive");
  return std::unique_ptr<OtlpGrpcExporter>(new OtlpGrpcExporter(options));
}

OtlpGrpcExporter::OtlpGrpcExporter(const OtlpGrpcExporterOptions& options) : options_(options) {
  auto credentials = options.use_tls ? grpc::SslCredentials(grpc::SslCredentialsOptions())
                                     : grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  // Reconnect quickly once a collector comes back; the default backoff reaches 2 minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  stub_ = collector::TraceService::NewStub(grpc::CreateCustomChannel(options.endpoint, credentials, args));
}

absl::StatusOr<ExportResult> OtlpGrpcExporter::Export(const std::vector<SpanData>& spans, absl::Time deadline) {
  if (spans.empty()) return ExportResult{};
  const collector::ExportTraceServiceRequest request = EncodeExportRequest(options_.resource, spans);
  grpc::Status status;
  for (int attempt = 1;; ++attempt) {
    collector::ExportTraceServiceResponse response;
    status = CallOnce(request, deadline, &response);
    if (status.ok()) {
      // Partial success: the collector took the call but not every span (never retried: the spec
      // says the rejected spans must not be sent again). A count outside [0, sent] is clamped.
      ExportResult result;
      if (response.has_partial_success()) {
        result.rejected_spans =
            std::clamp<int64_t>(response.partial_success().rejected_spans(), 0, static_cast<int64_t>(spans.size()));
        result.error_message = response.partial_success().error_message();
      }
      return result;
    }
    if (!IsRetryableOtlpCode(status.error_code()) || attempt >= options_.retry.max_attempts ||
        !Backoff(attempt, deadline)) {
      break;
    }
    CS_VLOG(1) << "OTLP export to " << options_.endpoint << " failed (" << status.error_message()
               << "), retry " << attempt;
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("OTLP export to ", options_.endpoint, ": ", status.error_message()));
}

grpc::Status OtlpGrpcExporter::CallOnce(const collector::ExportTraceServiceRequest& request,
                                        absl::Time deadline, collector::ExportTraceServiceResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + options_.timeout)));
  for (const auto& [key, value] : options_.headers) context.AddMetadata(key, value);
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return grpc::Status(grpc::StatusCode::CANCELLED, "exporter shut down");
    active_ = &context;
  }
  grpc::Status status = stub_->Export(&context, request, response);
  {
    absl::MutexLock lock(&mu_);
    active_ = nullptr;
  }
  return status;
}

bool OtlpGrpcExporter::Backoff(int attempt, absl::Time deadline) {
  const RetryPolicy& retry = options_.retry;
  absl::Duration backoff = retry.initial_backoff * std::pow(retry.multiplier, attempt - 1);
  backoff = std::min(backoff, retry.max_backoff);
  // Jittered within [backoff/2, backoff) ("equal jitter"): many servers restarting together do not
  // retry in step.
  thread_local absl::BitGen gen;
  backoff = backoff * absl::Uniform(gen, 0.5, 1.0);
  const absl::Time wake = absl::Now() + backoff;
  if (wake >= deadline) return false;
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&shut_down_), wake);
  return !shut_down_;
}

void OtlpGrpcExporter::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  if (active_ != nullptr) active_->TryCancel();
}

}  // namespace chronoserve::otlp
