// chronobench: load-tests a KServe v2 model and sets end-to-end latency against the server's
// per-request spans. Flags only; the work lives in Benchmark and the report writers.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/chronobench/bench_flags.h"
#include "client/chronobench/benchmark.h"
#include "client/chronobench/client_tracer.h"
#include "client/chronobench/console_report.h"
#include "client/chronobench/html_report.h"
#include "client/chronobench/json_report.h"
#include "common/cli_integer.h"
#include "common/clock.h"
#include "common/malloc_tuning.h"
#include "common/output_file.h"
#include "common/status_macros.h"

namespace {

using namespace chronoserve::client::bench;  // NOLINT: main only
using chronoserve::CheckWritable;
using chronoserve::SameFile;
using chronoserve::WriteFile;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "chronobench: %s\n", std::string(status.message()).c_str());
  return 1;
}

// Every report asked for: one that cannot be written does not keep the others from being written.
absl::Status WriteOutputs(const BenchOptions& options, const BenchReport& report) {
  const nlohmann::json json = ReportToJson(report);
  std::string failures;
  auto note = [&failures](const absl::Status& s) {
    if (!s.ok()) absl::StrAppend(&failures, failures.empty() ? "" : "; ", s.message());
  };
  auto write = [&note](const char* flag, const std::string& path, const std::string& contents) {
    const absl::Status written = WriteFile(path, contents);
    if (!written.ok()) note(absl::Status(written.code(), absl::StrCat(flag, ": ", written.message())));
  };
  if (!options.output.json_path.empty()) write("--json", options.output.json_path, DumpJson(json) + "\n");
  if (!options.output.csv_path.empty()) write("--csv", options.output.csv_path, ReportToCsv(report));
  if (!options.output.html_path.empty()) {
    auto chart_js = LoadChartJs();
    if (chart_js.ok()) {
      write("--html", options.output.html_path, RenderHtml(json, *chart_js));
    } else {
      note(chart_js.status());
    }
  }
  return failures.empty() ? absl::OkStatus() : absl::InternalError(failures);
}

// Flags that are bad only in this machine's state: a report path that cannot be written, Chart.js
// missing for --html. Found before the run, not after it.
absl::Status CheckOutputs(const BenchOptions& options) {
  const std::pair<const char*, const std::string*> outputs[] = {{"--json", &options.output.json_path},
                                                                {"--csv", &options.output.csv_path},
                                                                {"--html", &options.output.html_path}};
  for (const auto& [flag, path] : outputs) {
    if (!path->empty()) RETURN_IF_ERROR(CheckWritable(flag, *path));
  }
  // Two reports into one file, or a report onto the client spans' file (the tracer checks that one
  // when it opens it): the last written would be the only one left.
  const std::pair<const char*, const std::string*> files[] = {
      outputs[0], outputs[1], outputs[2], {"--trace-file", &options.trace.trace_file}};
  for (size_t a = 0; a < std::size(files); ++a) {
    for (size_t b = a + 1; b < std::size(files); ++b) {
      if (files[a].second->empty() || files[b].second->empty()) continue;
      if (SameFile(*files[a].second, *files[b].second)) {
        return absl::InvalidArgumentError(absl::StrCat(files[a].first, " and ", files[b].first, " name the same file ('",
                                                       *files[b].second, "'); give each a path of its own"));
      }
    }
  }
  if (!options.output.html_path.empty()) RETURN_IF_ERROR(LoadChartJs().status());
  return absl::OkStatus();
}

// Bounded: a collector that is down costs at most kFlushTimeout at exit, never the run itself.
void FlushClientSpans(ClientTracer& tracer) {
  constexpr absl::Duration kFlushTimeout = absl::Seconds(5);
  tracer.Shutdown(absl::Now() + kFlushTimeout);
  const chronoserve::otlp::SpanProcessorStats s = tracer.stats();
  std::fprintf(stderr, "chronobench: client spans to %s: %llu exported, %llu dropped (queue full or at shutdown), %llu failed\n",
               tracer.destination().c_str(), static_cast<unsigned long long>(s.exported),
               static_cast<unsigned long long>(s.dropped), static_cast<unsigned long long>(s.export_failed));
}

}  // namespace

int main(int argc, char** argv) {
  // As chronoserve's main: Debian's abseil checks every Mutex::Lock for deadlock cycles otherwise.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Answers of hundreds of KiB: gRPC's read buffers stay in the heap instead of being mapped and
  // faulted in again for every answer (common/malloc_tuning.h).
  chronoserve::TuneMallocForLargeMessages();
  CLI::App app{"chronobench: load-test a KServe v2 model; end-to-end latency against the server's "
               "queue / copy / compute spans, per request"};
  RawFlags raw;
  AddBenchFlags(&app, &raw);
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  auto options = ResolveFlags(raw);
  if (!options.ok()) {  // flags that do not go together: a flag error, as CLI11's are
    Fail(options.status());
    return 2;
  }
  options->output.progress = isatty(STDERR_FILENO) != 0;
  if (auto s = CheckOutputs(*options); !s.ok()) {
    Fail(s);
    return 2;
  }

  auto tracer = ClientTracer::Create(options->trace, chronoserve::otlp::ProcessEnv());
  if (!tracer.ok()) return Fail(tracer.status());
  if (*tracer != nullptr && options->trace.traceparent_rate == 0) {  // an endpoint from the flag or OTEL_*
    std::fprintf(stderr, "chronobench: warning: client spans go to %s, but --traceparent-rate is 0: spans are made "
                         "only for requests that carry a traceparent, so none will be exported\n",
                 (*tracer)->destination().c_str());
  }
  auto bench = Benchmark::Create(*options, chronoserve::SteadyClock::Get(), tracer->get());
  if (!bench.ok()) return Fail(bench.status());
  ProgressLine progress(options->output.progress);
  std::cout << TableHeader() << std::flush;
  auto report = (*bench)->Run(
      [&](const PointResult& point) {
        progress.Clear();
        std::cout << TableRow(point) << std::flush;
        // Clamped values falsify the figures: said on stderr too, where a script piping stdout sees it.
        if (std::optional<std::string> clamped = ClampedValuesWarning(point.recorder)) {
          std::fprintf(stderr, "chronobench: warning: %s: %s\n", point.spec.Label().c_str(), clamped->c_str());
        }
      },
      [&](const std::string& line) { progress.Update(line); });
  progress.Clear();
  if (*tracer != nullptr) FlushClientSpans(**tracer);
  if (!report.ok()) return Fail(report.status());
  std::cout << Summary(*report);
  // A failed point: the points before it are still written, then the failure exits 1.
  if (auto s = WriteOutputs(*options, *report); !s.ok()) return Fail(s);
  if (report->failed_point.has_value()) {
    return Fail(absl::UnknownError(absl::StrCat(report->failed_point->message, " (the reports hold the ",
                                                report->points.size(), " point(s) measured before it)")));
  }
  return 0;
}
