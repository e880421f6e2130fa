// ReadOtlpJsonFile: decodes a trace file (--trace-file: OTLP/JSON lines) with decoders chronoserve
// did not write: nlohmann's JSON parser checks each line and the OTLP/JSON rules protobuf's JSON
// does not know (trace and span ids as lower-case hex, enums as integers, lowerCamelCase names),
// then protobuf's own JSON parser reads the line into an ExportTraceServiceRequest (the ids turned
// to base64 first, the one place OTLP/JSON and protobuf's JSON mapping differ). The spans come out
// as the node receiver's ReceivedSpan, so file and collector tests read alike.
#ifndef CHRONOSERVE_TESTS_TELEMETRY_OTLP_JSON_FILE_H_
#define CHRONOSERVE_TESTS_TELEMETRY_OTLP_JSON_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "tests/telemetry/otlp_test_receiver.h"

namespace chronoserve::testing {

// One ExportTraceServiceRequest per line of `path` (a last line without its newline is an error: a
// write cut short). INVALID_ARGUMENT naming the line for anything that breaks the rules above.
absl::StatusOr<std::vector<opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest>> ReadOtlpJsonFile(
    const std::string& path);

// Every span of those requests, with its resource's attributes and scope name.
std::vector<ReceivedSpan> SpansOf(
    const std::vector<opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest>& requests);

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_TELEMETRY_OTLP_JSON_FILE_H_
