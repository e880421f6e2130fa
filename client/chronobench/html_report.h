// HtmlReport: a single self-contained HTML file (Chart.js and the report JSON inlined; nothing is
// fetched at view time) with a table of points and four charts: the mean latency breakdown per
// sweep point (stacked), the end-to-end CDF, throughput and latency against the swept parameter,
// and latency against the idle gap. Once drawn, the page marks <body data-charts="N"
// data-painted="M"> (or data-error) so a headless browser can check it rendered. Any thread.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_HTML_REPORT_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_HTML_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace chronoserve::client::bench {

// Chart.js: embedded at build time from Debian's libjs-chart.js when it was installed, otherwise
// read at run time from $CHRONOBENCH_CHARTJS or /usr/share/javascript/chart.js/chart.min.js.
// NOT_FOUND tells the user to install libjs-chart.js.
absl::StatusOr<std::string> LoadChartJs();

// The page for `report_json` (ReportToJson's output), using `chart_js` inline.
std::string RenderHtml(const nlohmann::json& report_json, const std::string& chart_js);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_HTML_REPORT_H_
