// JSON and CSV renderings of a BenchReport (schema in docs/CHRONOBENCH.md). Pure functions, any
// thread.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_JSON_REPORT_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_JSON_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/chronobench/bench_report.h"
#include "nlohmann/json.hpp"

namespace chronoserve::client::bench {

// The percentiles the JSON and CSV give: `requested` plus p50 and p99, which the console table and
// the HTML table always show, ascending, each once.
std::vector<double> ReportedPercentiles(const std::vector<double>& requested);

// {"runs": [...], "server": {...}, "model": {...}, ...}
nlohmann::json ReportToJson(const BenchReport& report);
// The JSON's text (`indent` < 0: one line), never throwing: a string that is not UTF-8 (a -u socket
// path, a server's error text) has its bad bytes replaced by U+FFFD instead of losing every report.
std::string DumpJson(const nlohmann::json& json, int indent = 2);
// One header line, then one row per sweep point (status "ok"), then, when a point failed, one row
// for it (status "failed", its label and message, no figures). RFC 4180 quoting.
std::string ReportToCsv(const BenchReport& report);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_JSON_REPORT_H_
