#include "client/chronobench/client_tracer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/version.h"

namespace chronoserve::client::bench {

absl::StatusOr<std::unique_ptr<ClientTracer>> ClientTracer::Create(const TraceOptions& options,
                                                                   const otlp::EnvLookup& env) {
  absl::StatusOr<otlp::TracingConfig> config = otlp::ResolveTracingConfig(
      options.otlp_endpoint, kChronoserveVersion, env, kClientServiceName, options.trace_file);
  if (!config.ok()) {
    if (!options.trace_file.empty()) return config.status();  // names both flags
    return absl::InvalidArgumentError(absl::StrCat("--otlp-endpoint: ", config.status().message()));
  }
  for (const std::string& warning : config->warnings) CS_LOG(WARNING) << warning;  // e.g. tracing turned off
  if (!config->enabled) return std::unique_ptr<ClientTracer>();
  absl::StatusOr<std::unique_ptr<otlp::SpanExporter>> exporter = otlp::CreateSpanExporter(*config);
  if (!exporter.ok()) return exporter.status();
  auto processor = std::make_unique<otlp::BatchSpanProcessor>(*std::move(exporter), config->processor);
  processor->Start();
  std::string destination = config->file.empty() ? config->exporter.endpoint : absl::StrCat("file ", config->file);
  return std::unique_ptr<ClientTracer>(new ClientTracer(std::move(processor), std::move(destination)));
}

ClientTracer::~ClientTracer() { Shutdown(absl::Now()); }

bool ClientTracer::Record(const ClientSpan& span) {
  std::vector<otlp::SpanData> spans;
  spans.push_back(MakeClientSpanData(span));
  return processor_->OnEnd(std::move(spans));
}

void ClientTracer::Shutdown(absl::Time deadline) { processor_->Shutdown(deadline); }

otlp::SpanData MakeClientSpanData(const ClientSpan& span) {
  otlp::SpanData out;
  out.trace_id = span.trace_id;
  out.span_id = span.span_id;  // parent_span_id stays zero: the client span is the trace's root
  // The W3C flags, and, as the server marks its own root spans, "the parent is known not to be
  // remote" (a client span is its trace's root).
  out.flags = (span.flags & 0xffu) | otlp::kSpanFlagsContextHasIsRemote;
  const std::string method = span.streamed ? "ModelStreamInfer" : "ModelInfer";
  out.name = absl::StrCat(method, " ", span.model);
  out.kind = otlp::SpanKind::kClient;
  out.start_unix_ns = span.start_unix_ns;
  out.end_unix_ns = span.end_unix_ns;
  out.attributes.push_back({"rpc.system", std::string("grpc")});
  out.attributes.push_back({"rpc.service", std::string("inference.GRPCInferenceService")});
  out.attributes.push_back({"rpc.method", method});
  out.attributes.push_back({"rpc.grpc.status_code", static_cast<int64_t>(span.grpc_code)});
  out.attributes.push_back({"chronoserve.model.name", span.model});
  out.attributes.push_back({"chronoserve.request.items", span.batch_size});
  out.status = span.grpc_code == 0 ? otlp::SpanStatus::kUnset : otlp::SpanStatus::kError;
  return out;
}

}  // namespace chronoserve::client::bench
