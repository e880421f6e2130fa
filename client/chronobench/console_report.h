// Console output: the per-point table (header once, a row as each point finishes, its warnings
// under it), the closing summary, and the terminal progress line. Called from main's thread.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_CONSOLE_REPORT_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_CONSOLE_REPORT_H_

#include <string>

#include "client/chronobench/bench_report.h"
#include "client/chronobench/trial_runner.h"

namespace chronoserve::client::bench {

std::string TableHeader();
// One row: point, throughput, and p50/p99 (µs) of e2e, transport, queue, h2d, compute, d2h,
// server_total, executed batch size; warnings follow on their own lines.
std::string TableRow(const PointResult& point);
// Saturation point of a batch sweep, errors overall.
std::string Summary(const BenchReport& report);

// Rewrites one terminal line (\r + clear); only used when stderr is a TTY.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  void Update(const std::string& text);
  void Clear();

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_CONSOLE_REPORT_H_
