#include "client/chronobench/console_report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chronoserve::client::bench {
namespace {

// admit (read, validated, inputs copied into the arena) beside the device spans: at large batches
// it is the server's largest own part (docs/BENCHMARKS.md §45); "-" from servers without it.
constexpr Metric kColumns[] = {Metric::kE2e, Metric::kTransport, Metric::kAdmit, Metric::kQueue, Metric::kH2d,
                               Metric::kCompute, Metric::kD2h, Metric::kServerTotal};

std::string P50P99(const Histogram& h) {
  if (h.count() == 0) return "-";
  return absl::StrFormat("%.0f/%.0f", h.ValueAtPercentile(50) / 1e3, h.ValueAtPercentile(99) / 1e3);
}

}  // namespace

std::string TableHeader() {
  std::string line = absl::StrFormat("%-28s %10s %8s", "point", "req/s", "errors");
  for (Metric m : kColumns) absl::StrAppend(&line, absl::StrFormat(" %15s", MetricName(m)));
  absl::StrAppend(&line, absl::StrFormat(" %7s %6s\n", "batch", "stable"));
  absl::StrAppend(&line, absl::StrFormat("%-28s %10s %8s", "", "", ""));
  for (size_t i = 0; i < std::size(kColumns); ++i) absl::StrAppend(&line, absl::StrFormat(" %15s", "p50/p99 us"));
  absl::StrAppend(&line, absl::StrFormat(" %7s %6s\n", "items", ""));
  return line;
}

std::string TableRow(const PointResult& p) {
  const LatencyRecorder& r = p.recorder;
  std::string line = absl::StrFormat("%-28s %10.1f %8d", p.spec.Label(), p.throughput_rps, r.errors());
  for (Metric m : kColumns) absl::StrAppend(&line, absl::StrFormat(" %15s", P50P99(r.metric(m))));
  // Items per executed batch (not per response: a batch of 16 answers 16 requests).
  const std::string batch = r.batch_size_responses() > 0 ? absl::StrFormat("%.1f", r.items_per_batch()) : "-";
  absl::StrAppend(&line, absl::StrFormat(" %7s %6s\n", batch, p.stable ? "yes" : "NO"));
  if (p.spec.mode == LoadMode::kRate) {
    absl::StrAppend(&line, absl::StrFormat("    actual-send e2e p50/p99 us: %s  (e2e above counts from the intended send time)\n",
                                           P50P99(r.metric(Metric::kE2eActualSend))));
  }
  for (const auto& w : p.warnings) absl::StrAppend(&line, "    warning: ", w, "\n");
  return line;
}

std::string Summary(const BenchReport& report) {
  std::string out;
  if (report.batch_sweep) {
    if (report.saturation_index.has_value()) {
      // The rule looks one step ahead; a later batch size that beats the point by more than 5 % is
      // named, not hidden behind it.
      const size_t at = *report.saturation_index;
      const auto& p = report.points[at];
      const auto& next = report.points[at + 1];
      absl::StrAppend(&out, absl::StrFormat(
          "saturation: batch %d (%.1f items/s); the next batch size, %d, changed items/s by %+.1f%% (5%% or less)",
          p.spec.batch_size, p.items_per_s, next.spec.batch_size, 100 * (next.items_per_s / p.items_per_s - 1)));
      const auto best = std::max_element(report.points.begin() + at + 1, report.points.end(),
                                         [](const auto& a, const auto& b) { return a.items_per_s < b.items_per_s; });
      if (best->items_per_s - p.items_per_s > p.items_per_s * 0.05) {
        absl::StrAppend(&out, absl::StrFormat("; but batch %d reached %.1f items/s (%+.1f%%): throughput rose again",
                                              best->spec.batch_size, best->items_per_s,
                                              100 * (best->items_per_s / p.items_per_s - 1)));
      }
      absl::StrAppend(&out, "\n");
    } else if (report.failed_point.has_value()) {
      absl::StrAppend(&out, "saturation: not reached before the sweep stopped at its failed point\n");
    } else if (report.points.size() < 2) {
      absl::StrAppend(&out, "saturation: one batch size measured, no step to judge it by\n");
    } else {
      absl::StrAppend(&out, "saturation: not reached; throughput still rose by more than 5% at the largest batch\n");
    }
  }
  int64_t errors = 0, unstable = 0, unanswered = 0, unsent = 0;
  for (const auto& p : report.points) {
    errors += p.recorder.errors();
    unstable += p.stable ? 0 : 1;
    unanswered += p.unanswered_at_end;
    if (BehindSchedule(p)) unsent += p.unsent_at_end;  // not a send time that came just before the end
  }
  if (unanswered > 0) {
    absl::StrAppend(&out, unanswered, " requests were still in flight when their points ended: cancelled, in no "
                    "window (unanswered_at_end)\n");
  }
  if (unsent > 0) {
    absl::StrAppend(&out, unsent, " requests were due by the open loop's schedule when their points ended but never "
                    "sent: the client was behind it; in no window (unsent_at_end)\n");
  }
  if (errors > 0) absl::StrAppend(&out, errors, " requests failed in the reported windows (see errors_by_code)\n");
  if (unstable > 0) absl::StrAppend(&out, unstable, " point(s) did not stabilise; raise --max-trials or --measurement-interval\n");
  return out;
}

void ProgressLine::Update(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::Clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace chronoserve::client::bench
