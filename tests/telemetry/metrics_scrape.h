// /metrics read the way Prometheus reads it: an HTTP GET on a socket and the text format parsed as
// text, with no Prometheus library. Shared by the telemetry suite and the GPU suite.
#ifndef CHRONOSERVE_TESTS_TELEMETRY_METRICS_SCRAPE_H_
#define CHRONOSERVE_TESTS_TELEMETRY_METRICS_SCRAPE_H_

#include <map>
#include <string>

namespace chronoserve::testing {

// GET http://127.0.0.1:port/metrics; the body, or "" on failure (10 s receive timeout).
std::string ScrapeMetrics(int port);
// The same from `host`, an IPv4 or IPv6 address ("::1").
std::string ScrapeMetricsAt(const std::string& host, int port);

// Prometheus text format -> "name{k="v",...}" -> value (labels as the exposer wrote them).
std::map<std::string, double> ParseMetrics(const std::string& text);

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_TELEMETRY_METRICS_SCRAPE_H_
