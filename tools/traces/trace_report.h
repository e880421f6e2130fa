// Trace report: where the time of traced requests went, read offline from trace files (OTLP/JSON
// lines, as chronoserve's and chronobench's --trace-file write them). Per model: how many requests,
// and p50 / p99 / mean of the server span and of each of its phases (admit, queue, input_stage, h2d,
// compute, d2h, output_stage, handback); with chronobench's file beside the server's, also the
// client's e2e and the transport (e2e minus the server span) of the requests both files hold.
//
//   auto spans = ReadTraceFile("server.jsonl");   // append a second file's to the same vector
//   TraceReport report = SummarizeTraces(*spans);
//   std::cout << FormatTraceReport(report);
#ifndef CHRONOSERVE_TOOLS_TRACES_TRACE_REPORT_H_
#define CHRONOSERVE_TOOLS_TRACES_TRACE_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace chronoserve::traces {

// One span of a trace file, as far as the report needs it.
struct TraceSpan {
  std::string trace_id, span_id, parent_span_id;  // lower-case hex; parent "" for a root
  std::string name;
  int kind = 0;    // OTLP SpanKind: 2 server, 3 client
  int status = 0;  // OTLP Status.StatusCode: 2 error
  int64_t start_ns = 0, end_ns = 0;
  std::map<std::string, std::string> attributes;  // values as text (integers in decimal)
};

// Lines of a trace file that a cut-short write left unreadable: they start as an export request
// does ('{"resourceSpans"') but do not parse (a full disk, a server killed mid-write).
struct TornLines {
  int count = 0;
  int first = 0;  // line number of the first, 1-based; 0 when none
};

// Every span of `path`, one OTLP ExportTraceServiceRequest in JSON a line (blank lines skipped).
// Torn lines are skipped and counted in `torn` (when given): the lines around them still count.
// INVALID_ARGUMENT naming the file and line for any other line that is not such JSON (e.g. a log
// file given by mistake); NOT_FOUND when the file cannot be read.
absl::StatusOr<std::vector<TraceSpan>> ReadTraceFile(const std::string& path, TornLines* torn = nullptr);

// The phases in the order a request goes through them; "server" is the server span itself, "e2e"
// the client span and "transport" e2e minus server.
inline const std::vector<std::string>& TracePhases() {
  static const std::vector<std::string> phases = {"e2e",     "transport", "server", "admit",        "queue",
                                                  "input_stage", "h2d",   "compute", "d2h",        "output_stage",
                                                  "handback"};
  return phases;
}

struct PhaseStats {
  int64_t count = 0;
  double p50_us = 0, p99_us = 0, mean_us = 0;  // nearest-rank percentiles
};

struct ModelTraces {
  std::string model;
  std::string group_value;  // the server spans' value of the grouping attribute ("" when not grouped)
  int64_t requests = 0;     // server spans (ModelInfer / ModelStreamInfer) of this model
  int64_t errors = 0;       // of those, with an error status
  int64_t with_client = 0;  // of those, whose client span is in the files too
  std::map<std::string, PhaseStats> phases;  // by TracePhases() name; a phase no request has is absent
};

struct TraceReport {
  std::string group_by;        // the attribute the rows are split by ("" = one row set per model)
  int64_t spans = 0;           // read
  int64_t duplicates = 0;      // of those, a span read before (same ids, name, times: one file given twice): skipped
  int64_t id_collisions = 0;   // of the others, a span with the ids of a different one read before (kept)
  int64_t client_spans = 0;    // of the others, CLIENT spans
  std::vector<ModelTraces> models;  // by name, then by group_value (as text)
};

// Groups the server spans by chronoserve.model.name (and, with `group_by`, by their value of that
// attribute, e.g. chronoserve.batch.size, chronoserve.worker or chronoserve.cold; "(none)" where a
// span has none), their phases by parent span id, and a server span's client span by its parent id,
// every id within its trace; a span read twice counts once. Where different client spans carry one
// id (two runs that drew the same ids), a server span's is the only one whose time holds it. e2e and
// transport come from a client span that ended OK and parents that one server span alone: a cancelled
// call's span ends at its cancellation, and one client span over several server spans (a stream's)
// times none of them.
TraceReport SummarizeTraces(const std::vector<TraceSpan>& spans, const std::string& group_by = "");

// A table per model, phases in TracePhases() order, µs.
std::string FormatTraceReport(const TraceReport& report);
nlohmann::json TraceReportJson(const TraceReport& report);

}  // namespace chronoserve::traces

#endif  // CHRONOSERVE_TOOLS_TRACES_TRACE_REPORT_H_
