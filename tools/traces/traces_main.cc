// chronoserve-traces: where the time of traced requests went, from trace files (--trace-file of
// chronoserve and chronobench), offline: a table per model and, with --json, the same as JSON.
//
//   build/bin/chronoserve-traces server.jsonl client.jsonl --json report.json --group-by chronoserve.batch.size
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/cli_integer.h"
#include "common/output_file.h"
#include "tools/traces/trace_report.h"

int main(int argc, char** argv) {
  CLI::App app{"chronoserve-traces: per model, the p50 / p99 / mean of each phase of the requests in trace files "
               "(OTLP/JSON lines, as chronoserve --trace-file and chronobench --trace-file write them); give the "
               "client's file beside the server's for e2e and transport"};
  std::vector<std::string> files;
  std::string json_path;
  app.add_option("files", files, "Trace files (OTLP/JSON lines)")->required()->check(CLI::ExistingFile);
  std::string group_by;
  app.add_option("--json", json_path, "Also write the report as JSON to this file");
  app.add_option("--group-by", group_by,
                 "Split each model's rows by this attribute of its server spans, e.g. chronoserve.batch.size, "
                 "chronoserve.worker, chronoserve.cold, chronoserve.request.items");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  if (!json_path.empty()) {
    // Refused before anything is read: --json onto a trace file would replace the data it reports.
    for (const std::string& file : files) {
      if (chronoserve::SameFile(json_path, file)) {
        std::fprintf(stderr, "chronoserve-traces: --json '%s' is the trace file '%s': name another file\n",
                     json_path.c_str(), file.c_str());
        return 2;
      }
    }
    if (const absl::Status writable = chronoserve::CheckWritable("--json", json_path); !writable.ok()) {
      std::fprintf(stderr, "chronoserve-traces: %s\n", std::string(writable.message()).c_str());
      return 2;
    }
  }
  std::vector<chronoserve::traces::TraceSpan> spans;
  for (const std::string& file : files) {
    chronoserve::traces::TornLines torn;
    auto read = chronoserve::traces::ReadTraceFile(file, &torn);
    if (!read.ok()) {
      std::fprintf(stderr, "chronoserve-traces: %s\n", std::string(read.status().message()).c_str());
      return 1;
    }
    if (torn.count > 0) {
      std::fprintf(stderr,
                   "chronoserve-traces: warning: %s: skipped %d torn line(s), the first at line %d (a write cut "
                   "short: a full disk, or a server killed while writing); their spans are not in the report\n",
                   file.c_str(), torn.count, torn.first);
    }
    spans.insert(spans.end(), read->begin(), read->end());
  }
  const chronoserve::traces::TraceReport report = chronoserve::traces::SummarizeTraces(spans, group_by);
  std::fputs(chronoserve::traces::FormatTraceReport(report).c_str(), stdout);
  if (!json_path.empty()) {
    // WriteFile checks the write once the file is closed: a full disk is seen, not only a failed open.
    const absl::Status written = chronoserve::WriteFile(
        json_path, chronoserve::traces::TraceReportJson(report).dump(2, ' ', /*ensure_ascii=*/false,
                                                                   nlohmann::json::error_handler_t::replace) +
                       "\n");
    if (!written.ok()) {
      std::fprintf(stderr, "chronoserve-traces: --json: %s\n", std::string(written.message()).c_str());
      return 1;
    }
  }
  return report.models.empty() ? 1 : 0;
}
