#include "client/chronobench/json_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace chronoserve::client::bench {
namespace {

double Us(double ns) { return std::round(ns) / 1000.0; }

// {"p50": us, ..., "mean": us}; null when nothing was recorded (absent, never zero).
nlohmann::json Summary(const Histogram& h, const std::vector<double>& percentiles) {
  if (h.count() == 0) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (double p : percentiles) out[PercentileKey(p)] = Us(h.ValueAtPercentile(p));
  out["mean"] = Us(h.mean());
  out["min"] = Us(h.min());
  out["max"] = Us(h.max());
  out["count"] = h.count();
  return out;
}

// Executed batch sizes and other plain counts (not latencies).
nlohmann::json CountSummary(const Histogram& h) {
  if (h.count() == 0) return nullptr;
  return {{"mean", h.mean()}, {"p50", h.ValueAtPercentile(50)}, {"max", h.max()}, {"min", h.min()}};
}

void AddPointKeys(const PointSpec& spec, const BenchReport& report, nlohmann::json* run) {
  (*run)["mode"] = LoadModeName(spec.mode);
  switch (spec.mode) {
    case LoadMode::kConcurrency: (*run)["concurrency"] = spec.concurrency; break;
    case LoadMode::kRate:
      (*run)["rate"] = spec.rate;
      (*run)["distribution"] = report.distribution == Distribution::kPoisson ? "poisson" : "constant";
      break;
    case LoadMode::kIdleGap: (*run)["idle_gap_ms"] = spec.idle_gap_ms; break;
  }
  (*run)["batch_size"] = spec.batch_size;
}

nlohmann::json RunToJson(const PointResult& p, const BenchReport& report, const std::vector<double>& percentiles) {
  const LatencyRecorder& r = p.recorder;
  nlohmann::json run = nlohmann::json::object();
  AddPointKeys(p.spec, report, &run);
  run["requests"] = r.successes() + r.errors();  // as each window's: finished, OK or not
  run["errors"] = r.errors();
  nlohmann::json by_code = nlohmann::json::object();
  for (const auto& [code, n] : r.errors_by_code()) {
    nlohmann::json& count = by_code[GrpcCodeName(code)];
    count = (count.is_null() ? 0 : count.get<int64_t>()) + n;  // two codes may share a name
  }
  run["errors_by_code"] = by_code;
  run["throughput_rps"] = p.throughput_rps;
  run["throughput_items_per_s"] = p.items_per_s;
  run["duration_s"] = p.duration_s;
  nlohmann::json latency = nlohmann::json::object();
  for (int m = 0; m < kMetricCount; ++m) {
    const auto metric = static_cast<Metric>(m);
    if (metric == Metric::kE2eActualSend && p.spec.mode != LoadMode::kRate) continue;
    latency[MetricName(metric)] = Summary(r.metric(metric), percentiles);
  }
  run["latency_us"] = latency;
  run["batch_size_executed"] = CountSummary(r.batch_size());
  if (r.batch_size().count() > 0) {
    run["batch_size_executed"]["per_batch_mean"] =
        r.batch_size_responses() > 0 ? nlohmann::json(r.items_per_batch()) : nlohmann::json(nullptr);
    nlohmann::json by_size = nlohmann::json::object();  // keys are sizes (JSON keys are strings)
    for (const auto& [size, n] : r.responses_by_batch_size()) by_size[std::to_string(size)] = n;
    run["batch_size_executed"]["responses_by_size"] = by_size;
  }
  run["idle_before_us"] = CountSummary(r.idle_before());
  if (p.spec.mode == LoadMode::kRate) run["schedule_lag_us"] = Summary(r.schedule_lag(), percentiles);
  run["stable"] = p.stable;
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : p.windows) {
    windows.push_back({{"duration_s", w.duration_s}, {"requests", w.successes + w.errors}, {"errors", w.errors},
                       {"throughput_rps", w.throughput_rps},
                       // A window that measured no request has no p50: null, never 0.
                       {"e2e_p50_us", w.successes + w.errors > 0 ? nlohmann::json(Us(w.p50_ns)) : nlohmann::json()},
                       {"client_cpu_busiest", w.client_cpu_busiest}});
  }
  run["windows"] = windows;
  run["reported_windows"] = p.reported_windows;
  run["traced_requests"] = p.traced;
  run["unanswered_at_end"] = p.unanswered_at_end;  // in flight when the point ended: in no window
  run["unsent_at_end"] = p.unsent_at_end;  // open loop: due by the schedule, never sent: in no window
  run["sent_total"] = p.sent_total;  // every request sent, warm-up included: what the server counted
  run["responses_without_timing"] = r.without_timing();
  run["timing_violations"] = r.timing_violations();
  run["cold_batches"] = r.cold_batches();
  run["launch_bound_responses"] = r.launch_bound();  // of the device-timed ones (common/launch_bound.h)
  run["device_timed_responses"] = r.device_timed();
  // Values outside a histogram's range, clamped (common/histogram.h): reported, never hidden.
  run["clamped_values"] = {{"saturated", r.saturated_values()}, {"negative", r.negative_values()}};
  run["warnings"] = p.warnings;
  nlohmann::json cdf = nlohmann::json::array();
  for (const auto& [ns, frac] : r.metric(Metric::kE2e).Cdf(200)) cdf.push_back({Us(ns), frac});
  run["e2e_cdf"] = cdf;  // [[us, cumulative fraction], ...]
  return run;
}

std::string Num(double v) { return absl::StrFormat("%.3f", v); }

// One CSV field as RFC 4180 writes it: quoted when it holds a comma, a quote or a line break, its
// quotes doubled; as it is otherwise (every number and name the rows hold).
std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// The CSV's first columns, which say what the point is: mode, concurrency, rate, idle_gap_ms,
// batch_size (the load's own column only, the others empty).
std::vector<std::string> PointColumns(const PointSpec& spec) {
  return {LoadModeName(spec.mode), spec.mode == LoadMode::kConcurrency ? absl::StrCat(spec.concurrency) : "",
          spec.mode == LoadMode::kRate ? ExactNumber(spec.rate) : "",
          spec.mode == LoadMode::kIdleGap ? ExactNumber(spec.idle_gap_ms) : "", absl::StrCat(spec.batch_size)};
}

// One record, ending with LF (RFC 4180 says CRLF; CSV readers take either).
std::string CsvRow(const std::vector<std::string>& fields) {
  std::string row;
  for (size_t i = 0; i < fields.size(); ++i) absl::StrAppend(&row, i == 0 ? "" : ",", CsvField(fields[i]));
  return row + "\n";
}

}  // namespace

std::vector<double> ReportedPercentiles(const std::vector<double>& requested) {
  std::vector<double> out = requested;
  out.push_back(50);
  out.push_back(99);
  std::sort(out.begin(), out.end());
  // One per key: values that differ only past the key's 15 digits would write the same field twice.
  out.erase(std::unique(out.begin(), out.end(),
                        [](double a, double b) { return PercentileKey(a) == PercentileKey(b); }),
            out.end());
  return out;
}

std::string DumpJson(const nlohmann::json& json, int indent) {
  return json.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ReportToJson(const BenchReport& report) {
  const std::vector<double> percentiles = ReportedPercentiles(report.percentiles);
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& p : report.points) runs.push_back(RunToJson(p, report, percentiles));
  out["runs"] = runs;
  out["server"] = report.server;
  out["model"] = report.model_info;
  out["sweep"] = {{"mode", LoadModeName(report.mode)}, {"batch_sweep", report.batch_sweep},
                  {"percentiles", percentiles}};
  if (report.batch_sweep) {
    out["saturation"] = report.saturation_index.has_value()
                            ? nlohmann::json{{"batch_size", report.points[*report.saturation_index].spec.batch_size},
                                             {"throughput_items_per_s", report.points[*report.saturation_index].items_per_s}}
                            : nlohmann::json(nullptr);
  }
  if (report.failed_point.has_value()) {  // the sweep stopped there: `runs` are the points before it
    out["failed_point"] = {{"label", report.failed_point->label}, {"message", report.failed_point->message}};
    if (!report.failed_point->code.empty()) out["failed_point"]["code"] = report.failed_point->code;
    if (report.failed_point->unanswered_at_end.has_value()) {
      out["failed_point"]["unanswered_at_end"] = *report.failed_point->unanswered_at_end;
    }
    if (report.failed_point->unsent_at_end.has_value()) {
      out["failed_point"]["unsent_at_end"] = *report.failed_point->unsent_at_end;
    }
  }
  out["started_unix_ms"] = report.started_unix_ms;
  out["tool"] = "chronobench";
  return out;
}

std::string ReportToCsv(const BenchReport& report) {
  const std::vector<double> percentiles = ReportedPercentiles(report.percentiles);
  std::vector<std::string> header = {"mode", "concurrency", "rate", "idle_gap_ms", "batch_size", "requests",
                                     "errors", "throughput_rps", "throughput_items_per_s", "stable",
                                     "batch_size_executed_mean", "unanswered_at_end"};
  for (int m = 0; m < kMetricCount; ++m) {
    for (double p : percentiles) header.push_back(absl::StrCat(MetricName(static_cast<Metric>(m)), "_", PercentileKey(p), "_us"));
    header.push_back(absl::StrCat(MetricName(static_cast<Metric>(m)), "_mean_us"));
  }
  header.push_back("batch_size_executed_per_batch_mean");  // after the metrics, so theirs keep their places
  header.push_back("unsent_at_end");                       // added later still, after it
  // Last, so every column before them keeps its place: which point, and whether it was measured.
  for (const char* column : {"point", "status", "message"}) header.push_back(column);
  std::string csv = CsvRow(header);
  for (const auto& p : report.points) {
    const LatencyRecorder& r = p.recorder;
    std::vector<std::string> row = PointColumns(p.spec);
    row.insert(row.end(), {absl::StrCat(r.successes() + r.errors()), absl::StrCat(r.errors()), Num(p.throughput_rps),
                           Num(p.items_per_s), p.stable ? "true" : "false",
                           r.batch_size().count() > 0 ? Num(r.batch_size().mean()) : "",
                           absl::StrCat(p.unanswered_at_end)});
    for (int m = 0; m < kMetricCount; ++m) {
      const Histogram& h = r.metric(static_cast<Metric>(m));
      // As the JSON: e2e_actual_send only in open loop (elsewhere it is e2e itself).
      const bool present = h.count() > 0 && (static_cast<Metric>(m) != Metric::kE2eActualSend || p.spec.mode == LoadMode::kRate);
      for (double pc : percentiles) row.push_back(present ? Num(Us(h.ValueAtPercentile(pc))) : "");
      row.push_back(present ? Num(Us(h.mean())) : "");
    }
    row.push_back(r.batch_size_responses() > 0 ? Num(r.items_per_batch()) : "");
    row.push_back(absl::StrCat(p.unsent_at_end));
    row.insert(row.end(), {p.spec.Label(), "ok", ""});
    absl::StrAppend(&csv, CsvRow(row));
  }
  if (report.failed_point.has_value()) {  // the sweep stopped there: nothing measured, so no figures
    std::vector<std::string> row(header.size());
    if (report.failed_point->spec.has_value()) {  // what the point was: its load and batch size
      const std::vector<std::string> point = PointColumns(*report.failed_point->spec);
      std::copy(point.begin(), point.end(), row.begin());
    } else {
      row[0] = LoadModeName(report.mode);  // every point of a sweep has its mode
    }
    // The two counts are no figure of the point's latency: what it left unanswered and unsent.
    const auto column = [&](absl::string_view name) {
      return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    };
    if (report.failed_point->unanswered_at_end.has_value()) {
      row[column("unanswered_at_end")] = absl::StrCat(*report.failed_point->unanswered_at_end);
    }
    if (report.failed_point->unsent_at_end.has_value()) {
      row[column("unsent_at_end")] = absl::StrCat(*report.failed_point->unsent_at_end);
    }
    row[header.size() - 3] = report.failed_point->label;
    row[header.size() - 2] = "failed";
    row[header.size() - 1] = report.failed_point->message;
    absl::StrAppend(&csv, CsvRow(row));
  }
  return csv;
}

}  // namespace chronoserve::client::bench
