// The JSON / CSV schema, the console rows and summary, the stability rule and the saturation rule,
// on synthetic measurements (no server).
#include <algorithm>
#include <cmath>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/chronobench/bench_report.h"
#include "client/chronobench/console_report.h"
#include "client/chronobench/html_report.h"
#include "client/chronobench/json_report.h"
#include "client/chronobench/latency_recorder.h"
#include "client/chronobench/trial_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/csv_parse.h"
#include "tests/client/report_fixtures.h"
#include "tests/client/report_schema.h"

namespace chronoserve::client::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Column;
using testing::MakePoint;
using testing::MakeReport;
using testing::ParseCsv;

TEST(ReportTest, JsonFollowsTheSchema) {
  for (LoadMode mode : {LoadMode::kConcurrency, LoadMode::kRate, LoadMode::kIdleGap}) {
    const nlohmann::json json = ReportToJson(MakeReport(mode));
    testing::ExpectReportSchema(json, /*with_server_spans=*/true);
    const auto& run = json["runs"][0];
    EXPECT_EQ(run["requests"], 1001);
    EXPECT_EQ(run["errors"], 1);
    // "requests" means the same in a window as in the run: finished, OK or not.
    EXPECT_EQ(run["windows"][0]["requests"], 1001);
    EXPECT_EQ(run["windows"][0]["errors"], 1);
    EXPECT_EQ(run["errors_by_code"]["UNAVAILABLE"], 1);
    EXPECT_EQ(json["saturation"]["batch_size"], 2);
    // Open loop also reports latency from the actual send and the schedule lag.
    EXPECT_EQ(run["latency_us"].contains("e2e_actual_send"), mode == LoadMode::kRate);
    // The CSV says the same: its e2e_actual_send columns are empty outside open loop.
    const auto rows = ParseCsv(ReportToCsv(MakeReport(mode)));
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ((*rows)[1][Column((*rows)[0], "e2e_actual_send_p50_us")].empty(), mode != LoadMode::kRate);
    EXPECT_FALSE((*rows)[1][Column((*rows)[0], "e2e_p50_us")].empty());
    if (mode == LoadMode::kRate) {
      EXPECT_NEAR(run["schedule_lag_us"]["p50"].get<double>(), 20.0, 0.02);
      EXPECT_GT(run["latency_us"]["e2e"]["p50"].get<double>(), run["latency_us"]["e2e_actual_send"]["p50"].get<double>());
    }
  }
}

// --percentiles 90,99.9: the console and HTML tables still show p50/p99, so the files carry them too.
TEST(ReportTest, TablePercentilesAreReportedBesideTheRequestedOnes) {
  EXPECT_EQ(ReportedPercentiles({99.9, 90}), (std::vector<double>{50, 90, 99, 99.9}));
  EXPECT_EQ(ReportedPercentiles({50, 90, 95, 99, 99.9}), (std::vector<double>{50, 90, 95, 99, 99.9}));
  BenchReport report = MakeReport(LoadMode::kRate);
  report.percentiles = {90, 99.9};
  const nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["sweep"]["percentiles"], nlohmann::json({50, 90, 99, 99.9}));
  for (const char* metric : {"e2e", "compute", "transport"}) {
    testing::ExpectLatencySummary(json["runs"][0]["latency_us"][metric], metric, {"p50", "p90", "p99", "p99_9"});
    EXPECT_FALSE(json["runs"][0]["latency_us"][metric].contains("p95")) << "not asked for";
  }
  testing::ExpectLatencySummary(json["runs"][0]["schedule_lag_us"], "schedule_lag", {"p50", "p90", "p99", "p99_9"});
  const std::string csv = ReportToCsv(report);
  const std::vector<std::string> header = absl::StrSplit(csv.substr(0, csv.find('\n')), ',');
  for (const char* column : {"e2e_p50_us", "e2e_p90_us", "e2e_p99_us", "e2e_p99_9_us"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), column), header.end()) << column;
  }
}

// Percentiles close to others keep their own field, and values sharing a key are reported once.
TEST(ReportTest, NearbyPercentilesGetDistinctKeysAndSharedKeysOneField) {
  const std::vector<double> reported = ReportedPercentiles({std::nextafter(50.0, 100.0), 50.0000001, 99.99999});
  std::vector<std::string> keys;
  for (double p : reported) keys.push_back(PercentileKey(p));
  EXPECT_EQ(keys, (std::vector<std::string>{"p50", "p50_0000001", "p99", "p99_99999"}));
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  report.percentiles = {50.0000001, 99.99999};
  const nlohmann::json json = ReportToJson(report);
  testing::ExpectLatencySummary(json["runs"][0]["latency_us"]["e2e"], "e2e", keys);
  EXPECT_FALSE(json["runs"][0]["latency_us"]["e2e"].contains("p100")) << "99.99999 is not p100";
  const std::string csv = ReportToCsv(report);
  const std::vector<std::string> header = absl::StrSplit(csv.substr(0, csv.find('\n')), ',');
  EXPECT_EQ(std::set<std::string>(header.begin(), header.end()).size(), header.size()) << "a column twice";
}

TEST(ReportTest, AbsentSpansAreNullNotZero) {
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  PointResult p;
  p.spec.mode = LoadMode::kConcurrency;
  RequestRecord r;
  r.done_ns = 100'000;  // OK, but a server without timing.* parameters
  p.recorder.Record(r);
  report.points = {p};
  const nlohmann::json json = ReportToJson(report);
  EXPECT_TRUE(json["runs"][0]["latency_us"]["compute"].is_null());
  EXPECT_TRUE(json["runs"][0]["latency_us"]["transport"].is_null());
  EXPECT_EQ(json["runs"][0]["responses_without_timing"], 1);
  testing::ExpectLatencySummary(json["runs"][0]["latency_us"]["e2e"], "e2e");
}

TEST(ReportTest, CsvHasOneRowPerPointAndAColumnPerHeader) {
  const std::string csv = ReportToCsv(MakeReport(LoadMode::kConcurrency));
  const auto rows = ParseCsv(csv);
  ASSERT_TRUE(rows.ok()) << rows.status() << "\n" << csv;
  ASSERT_EQ(rows->size(), 4u) << "no failed point: no row for one";
  const std::vector<std::string>& header = (*rows)[0];
  EXPECT_EQ(header[0], "mode");
  EXPECT_NE(std::find(header.begin(), header.end(), "e2e_p99_9_us"), header.end());
  EXPECT_NE(std::find(header.begin(), header.end(), "compute_p50_us"), header.end());
  EXPECT_NE(std::find(header.begin(), header.end(), "throughput_rps"), header.end());
  const std::vector<std::string> last = {"point", "status", "message"};
  ASSERT_GE(header.size(), last.size());
  EXPECT_EQ(std::vector<std::string>(header.end() - 3, header.end()), last);
  for (size_t i = 1; i < rows->size(); ++i) {
    const std::vector<std::string>& row = (*rows)[i];
    ASSERT_EQ(row.size(), header.size()) << i;
    EXPECT_EQ(row[Column(header, "point")], absl::StrCat("concurrency 4, batch ", i == 3 ? 4 : i));
    EXPECT_EQ(row[Column(header, "status")], "ok");
    EXPECT_EQ(row[Column(header, "message")], "");
  }
}

// A sweep stopped by a failed point: the CSV ends with a row for it that no reader can take for a
// measurement (status "failed", its label and message, the columns that say what the point was
// filled, every figure empty), quoted as RFC 4180 wants; the columns before the new ones keep
// their places, so the measured rows read as before.
TEST(ReportTest, CsvEndsWithTheFailedPointsRow) {
  BenchReport report = MakeReport(LoadMode::kRate);
  PointSpec spec;
  spec.mode = LoadMode::kRate;
  spec.rate = 750;
  spec.batch_size = 8;
  report.failed_point =
      FailedPoint{spec.Label(), "no response for 2.5 s (\"stuck\", 3 of 9 completed)\nretry", spec, "DEADLINE_EXCEEDED"};
  EXPECT_EQ(ReportToJson(report)["failed_point"]["code"], "DEADLINE_EXCEEDED");
  const std::string csv = ReportToCsv(report);
  const auto rows = ParseCsv(csv);
  ASSERT_TRUE(rows.ok()) << rows.status() << "\n" << csv;
  ASSERT_EQ(rows->size(), 5u) << "header, three points, the failed one";
  const std::vector<std::string>& header = (*rows)[0];
  const std::vector<std::string> first = {"mode", "concurrency", "rate", "idle_gap_ms", "batch_size", "requests",
                                          "errors", "throughput_rps", "throughput_items_per_s", "stable",
                                          "batch_size_executed_mean", "unanswered_at_end", "e2e_p50_us"};
  ASSERT_GT(header.size(), first.size());
  EXPECT_EQ(std::vector<std::string>(header.begin(), header.begin() + first.size()), first);
  for (const auto& row : *rows) ASSERT_EQ(row.size(), header.size());
  EXPECT_EQ(Column(header, "batch_size_executed_per_batch_mean") + 1, Column(header, "unsent_at_end"))
      << "added after the metrics";
  EXPECT_EQ(Column(header, "unsent_at_end") + 1, Column(header, "point")) << "added later, before the last three";

  const std::vector<std::string>& failed = rows->back();
  EXPECT_EQ(failed[Column(header, "status")], "failed");
  EXPECT_EQ(failed[Column(header, "point")], "rate 750/s, batch 8");
  EXPECT_EQ(failed[Column(header, "message")], report.failed_point->message) << "quotes, comma and line break kept";
  // What the point was, as a measured row of its mode gives it.
  EXPECT_EQ(std::vector<std::string>(failed.begin(), failed.begin() + 5),
            (std::vector<std::string>{"rate", "", "750", "", "8"}));
  for (size_t i = Column(header, "requests"); i + 3 < header.size(); ++i) {
    EXPECT_EQ(failed[i], "") << header[i] << ": nothing was measured";
  }

  for (size_t i = 1; i <= 3; ++i) {
    const std::vector<std::string>& row = (*rows)[i];
    EXPECT_EQ(row[Column(header, "status")], "ok");
    EXPECT_EQ(row[Column(header, "rate")], "500");
    EXPECT_EQ(row[Column(header, "requests")], "1001");
    EXPECT_NE(row[Column(header, "e2e_p50_us")], "");
  }
  // A reader that splits on commas still gets every column before the new ones right.
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  ASSERT_GT(lines.size(), 1u);
  const std::vector<std::string> naive = absl::StrSplit(lines[1], ',');
  const size_t point = Column(header, "point");
  ASSERT_GT(naive.size(), point);
  EXPECT_EQ(std::vector<std::string>(naive.begin(), naive.begin() + point),
            std::vector<std::string>((*rows)[1].begin(), (*rows)[1].begin() + point));
  // The JSON says the same.
  const nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["failed_point"]["label"], failed[Column(header, "point")]);
  EXPECT_EQ(json["failed_point"]["message"], failed[Column(header, "message")]);

  // A failed point that does not say what it was: its mode (the sweep's) and nothing else.
  report.failed_point->spec.reset();
  const auto bare = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(bare.ok()) << bare.status();
  ASSERT_EQ(bare->size(), 5u);
  EXPECT_EQ(bare->back()[0], "rate");
  for (size_t i = 1; i + 3 < header.size(); ++i) EXPECT_EQ(bare->back()[i], "") << header[i];
  EXPECT_EQ(bare->back()[Column(header, "status")], "failed");
}

// A failed point whose load ran says, in numbers a script can read, what it left: the requests its
// server never answered and, open loop, the sends it never made. In the JSON's failed_point and in
// the CSV's failed row, in the columns measured rows use for them; every figure stays empty.
TEST(ReportTest, FailedPointCarriesWhatItLeftUnansweredAndUnsent) {
  BenchReport report = MakeReport(LoadMode::kRate);
  PointSpec spec;
  spec.mode = LoadMode::kRate;
  spec.rate = 900;
  report.failed_point = FailedPoint{spec.Label(), "no response for 2 s", spec, "DEADLINE_EXCEEDED"};
  report.failed_point->unanswered_at_end = 37;
  report.failed_point->unsent_at_end = 5;
  const nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["failed_point"]["unanswered_at_end"], 37);
  EXPECT_EQ(json["failed_point"]["unsent_at_end"], 5);
  const auto rows = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<std::string>& header = rows->front();
  const std::vector<std::string>& failed = rows->back();
  EXPECT_EQ(failed[Column(header, "status")], "failed");
  EXPECT_EQ(failed[Column(header, "unanswered_at_end")], "37");
  EXPECT_EQ(failed[Column(header, "unsent_at_end")], "5");
  for (size_t i = Column(header, "requests"); i + 3 < header.size(); ++i) {
    if (header[i] == "unanswered_at_end" || header[i] == "unsent_at_end") continue;
    EXPECT_EQ(failed[i], "") << header[i] << ": nothing was measured";
  }

  // A point that failed before its load ran (no counts): the keys are absent, the cells empty.
  report.failed_point->unanswered_at_end.reset();
  report.failed_point->unsent_at_end.reset();
  EXPECT_FALSE(ReportToJson(report)["failed_point"].contains("unanswered_at_end"));
  EXPECT_FALSE(ReportToJson(report)["failed_point"].contains("unsent_at_end"));
  const auto bare = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->back()[Column(header, "unanswered_at_end")], "");
  EXPECT_EQ(bare->back()[Column(header, "unsent_at_end")], "");
}

// Rates and idle gaps keep every digit in the CSV and the labels: with %g's 6 significant digits
// 1000000 and 1000003 requests/s both read "1e+06", two points one could not tell apart.
TEST(ReportTest, CsvAndLabelsKeepEveryDigitOfRatesAndIdleGaps) {
  BenchReport report = MakeReport(LoadMode::kRate);
  report.batch_sweep = false;
  report.points[0].spec.rate = 1e6;
  report.points[1].spec.rate = 1e6 + 3;
  report.points[2].spec.rate = 0.125;
  const auto rows = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  const std::vector<std::string>& header = (*rows)[0];
  EXPECT_EQ((*rows)[1][Column(header, "rate")], "1000000");
  EXPECT_EQ((*rows)[2][Column(header, "rate")], "1000003");
  EXPECT_EQ((*rows)[3][Column(header, "rate")], "0.125");
  EXPECT_EQ((*rows)[2][Column(header, "point")], "rate 1000003/s, batch 2");

  PointSpec gap;
  gap.mode = LoadMode::kIdleGap;
  gap.idle_gap_ms = 86'399'999.5;
  EXPECT_EQ(gap.Label(), "idle gap 86399999.5 ms, batch 1");
  report.mode = LoadMode::kIdleGap;
  report.points.resize(1);
  report.points[0].spec = gap;
  const auto gap_rows = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(gap_rows.ok()) << gap_rows.status();
  EXPECT_EQ((*gap_rows)[1][Column(header, "idle_gap_ms")], "86399999.5");
}

// Strings from the server or the run (model name, warning, failure message) are inlined in the
// A -u socket path or a server's error text may hold bytes that are not UTF-8: the JSON and the
// HTML are still written (nlohmann's strict dump threw, and every report of the sweep was lost),
// the bad bytes as U+FFFD.
TEST(ReportTest, BytesThatAreNotUtf8BecomeReplacementCharactersNotAnException) {
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  report.server["url"] = "unix:/tmp/caf\xe9.sock";
  report.failed_point = FailedPoint{"concurrency 8, batch 1", "server said \xff\xfe"};
  const nlohmann::json json = ReportToJson(report);
  std::string text;
  ASSERT_NO_THROW(text = DumpJson(json));
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["server"]["url"], "unix:/tmp/caf\xef\xbf\xbd.sock");
  EXPECT_NE(text.find("server said \xef\xbf\xbd\xef\xbf\xbd"), std::string::npos) << text;
  std::string html;
  ASSERT_NO_THROW(html = RenderHtml(json, "/* chart.js stand-in */"));
  EXPECT_NE(html.find("caf\xef\xbf\xbd.sock"), std::string::npos);
}

// page's JSON <script>. "<!--" followed by "<script" there put the HTML parser in the
// double-escaped state, where the page's own </script> no longer ended the element and nothing
// rendered; so the inlined JSON holds no "<" or ">" at all, and still reads back as the report.
TEST(ReportTest, HtmlInlinesTheReportWithoutAngleBrackets) {
  BenchReport report = MakeReport(LoadMode::kConcurrency);
  const std::string hostile = "m<!--<script>x</script>";
  report.model_info["name"] = hostile;
  report.points[0].warnings.push_back("warning <!-- <script> -->");
  report.failed_point = FailedPoint{"concurrency 8, batch 1", "</script><!--<script>"};
  const nlohmann::json json = ReportToJson(report);
  const std::string html = RenderHtml(json, "/* chart.js stand-in */");

  EXPECT_EQ(html.find("<!--"), std::string::npos) << html;
  EXPECT_EQ(html.find(hostile), std::string::npos);
  EXPECT_NE(html.find("JSON.parse(document.getElementById('report').textContent)"), std::string::npos)
      << "the page's own script is missing";
  size_t scripts = 0;
  for (size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 3u) << "Chart.js, the report JSON and the page's script, and no other";

  const std::string open = "<script type=\"application/json\" id=\"report\">";
  const size_t begin = html.find(open);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = html.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string inlined = html.substr(begin + open.size(), end - begin - open.size());
  EXPECT_EQ(inlined.find_first_of("<>"), std::string::npos) << inlined;
  const nlohmann::json read_back = nlohmann::json::parse(inlined, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(read_back.is_discarded());
  EXPECT_EQ(read_back, json);
  EXPECT_EQ(read_back["model"]["name"], hostile);
}

TEST(ReportTest, CsvParserRefusesWhatIsNotCsv) {
  const auto parsed = ParseCsv("a,\"b,\"\"c\"\"\",\"d\ne\"\n1,2,3\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (std::vector<std::vector<std::string>>{{"a", "b,\"c\"", "d\ne"}, {"1", "2", "3"}}));
  for (const char* bad : {"a,\"b\"c\n", "a,b\"c\n", "a,\"b\n", "a,b", "a,\"b\""}) {
    EXPECT_FALSE(ParseCsv(bad).ok()) << bad;
  }
}

// The send-time alarms losing to gRPC's millisecond deadline in more than a third of the waits
// the two ended (at least 10) is the client's own shortage of CPU, and said so; fewer is not.
TEST(ReportTest, LateSendAlarmsAreWarnedAboutPastAThirdOfTheWaits) {
  PointResult p;
  p.send_waits_woken = 900;
  p.send_waits_past_deadline = 90;  // a loaded 2-core VM's working waker: 9 %
  EXPECT_FALSE(LateAlarmWarning(p).has_value());
  p.send_waits_woken = 20;
  p.send_waits_past_deadline = 10;  // exactly a third
  EXPECT_FALSE(LateAlarmWarning(p).has_value());
  p.send_waits_past_deadline = 11;
  const std::optional<std::string> warning = LateAlarmWarning(p);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("11 of 31 waits before a send ran to gRPC's deadline"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("short of CPU"), std::string::npos) << *warning;
  p.send_waits_woken = 0;
  p.send_waits_past_deadline = 9;  // too few to say anything
  EXPECT_FALSE(LateAlarmWarning(p).has_value());
  p.send_waits_past_deadline = 300;  // an alarm that never comes
  EXPECT_TRUE(LateAlarmWarning(p).has_value());
  EXPECT_FALSE(LateAlarmWarning(PointResult{}).has_value()) << "closed loop: no send times";
}

// A busy client thread is judged over the reported windows only, and --threads is advised only where
// it adds workers.
TEST(ReportTest, ABusyClientThreadIsWarnedAboutWithAdviceThatFitsTheMode) {
  PointResult p;
  p.spec.mode = LoadMode::kConcurrency;
  p.spec.concurrency = 16;
  p.windows = {WindowSummary{}, WindowSummary{}, WindowSummary{}};
  p.windows[0].client_cpu_busiest = 0.99;  // an early window, not reported
  p.windows[1].client_cpu_busiest = 0.5;
  p.windows[2].client_cpu_busiest = 0.6;
  p.reported_windows = 2;
  EXPECT_FALSE(BusyClientWarning(p, 4).has_value()) << "only an unreported window was busy";
  p.windows[2].client_cpu_busiest = 0.95;
  std::optional<std::string> warning = BusyClientWarning(p, 4);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("95% busy"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("raise --threads"), std::string::npos) << "16 in flight over 4 threads: " << *warning;
  warning = BusyClientWarning(p, 16);
  ASSERT_TRUE(warning.has_value());
  EXPECT_EQ(warning->find("raise --threads"), std::string::npos) << "a worker a request already: " << *warning;
  EXPECT_NE(warning->find("would add no worker"), std::string::npos) << *warning;
  p.spec.mode = LoadMode::kIdleGap;  // always one worker
  EXPECT_EQ(BusyClientWarning(p, 4)->find("raise --threads"), std::string::npos);
  p.spec.mode = LoadMode::kRate;  // one worker a thread
  EXPECT_NE(BusyClientWarning(p, 16)->find("raise --threads"), std::string::npos);
}

// Requests in flight when a point ends are in no window: counted in the JSON, the CSV and the
// console summary; a warning only when one of them had waited past everything the point reports.
TEST(ReportTest, UnansweredAtEndIsCountedAndWarnedAboutWhenPastTheTail) {
  BenchReport report = MakeReport(LoadMode::kRate);
  PointResult& p = report.points[1];
  p.unanswered_at_end = 7;
  const int64_t e2e_max = p.recorder.metric(Metric::kE2e).max();
  ASSERT_GT(e2e_max, 0);
  p.oldest_unanswered_ns = e2e_max / 2;  // merely in flight: no reason to warn
  EXPECT_FALSE(UnansweredWarning(p).has_value());
  p.oldest_unanswered_ns = e2e_max + 40'000'000;
  const std::optional<std::string> warning = UnansweredWarning(p);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("7 requests were still unanswered"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("tail is understated"), std::string::npos) << *warning;
  PointResult none = p;
  none.unanswered_at_end = 0;
  EXPECT_FALSE(UnansweredWarning(none).has_value());

  const nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["runs"][0]["unanswered_at_end"], 0);
  EXPECT_EQ(json["runs"][1]["unanswered_at_end"], 7);
  const auto rows = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  ASSERT_EQ((*rows)[2].size(), (*rows)[0].size());
  EXPECT_EQ((*rows)[2][Column((*rows)[0], "unanswered_at_end")], "7");
  EXPECT_NE(Summary(report).find("7 requests were still in flight when their points ended"), std::string::npos)
      << Summary(report);
  EXPECT_EQ(Summary(report).find("unsent_at_end"), std::string::npos) << "none was unsent: " << Summary(report);
  EXPECT_EQ(json["runs"][1]["unsent_at_end"], 0);
  EXPECT_EQ((*rows)[2][Column((*rows)[0], "unsent_at_end")], "0");
}

// A point whose windows measured nothing fails, saying so (and why it may be, by mode) with the
// unanswered requests, without an e2e max they could be compared with; a window that measured
// nothing in a point that did has a null p50 in the JSON.
TEST(ReportTest, APointThatMeasuredNothingFails) {
  BenchReport report = MakeReport(LoadMode::kRate);
  PointResult& p = report.points[0];
  p.recorder = LatencyRecorder();
  p.recorder.Allocate();
  p.windows = {{0.5, 0, 0, 0, 0, 0.4}};
  p.unsent_at_end = 171506;
  p.oldest_unanswered_ns = 4'285'297'000;
  p.oldest_unsent_ns = 4'285'297'000;
  p.finished_after_warmup = 12;  // behind its schedule decides, whatever was answered
  const std::optional<absl::Status> nothing = NothingMeasured(p);
  ASSERT_TRUE(nothing.has_value());
  EXPECT_EQ(nothing->code(), absl::StatusCode::kDeadlineExceeded) << "requests were left unanswered";
  const std::string message(nothing->message());
  EXPECT_THAT(message, HasSubstr("rate 500/s, batch 1: no request was measured in the reported windows"));
  EXPECT_THAT(message, HasSubstr("unsent_at_end")) << "open loop: the client behind its schedule";
  EXPECT_THAT(message, HasSubstr("171506 requests were still unanswered"));
  EXPECT_THAT(message, HasSubstr("the point has no figures, and the sweep stops here"));
  const std::optional<std::string> unanswered = UnansweredWarning(p);
  ASSERT_TRUE(unanswered.has_value());
  EXPECT_THAT(*unanswered, HasSubstr("171506 requests were still unanswered"));
  EXPECT_THAT(*unanswered, HasSubstr("the oldest had waited 4285.297 ms, and the point reports no e2e at all"));
  EXPECT_THAT(*unanswered, Not(HasSubstr("e2e max 0.000")));
  EXPECT_FALSE(EveryRequestFailed(p).has_value()) << "nothing failed either";
  // One send time that came in the stop's last microseconds is no client behind its schedule.
  p.unsent_at_end = 1;
  p.oldest_unsent_ns = 5'000;
  p.oldest_unanswered_ns = 5'000;
  EXPECT_FALSE(BehindSchedule(p));
  EXPECT_EQ(NothingMeasured(p)->code(), absl::StatusCode::kFailedPrecondition) << "answered after the warm-up";
  EXPECT_THAT(Summary(report), Not(HasSubstr("the client was behind it")));
  p.oldest_unsent_ns = 2 * kUnsentSlackNs;
  EXPECT_TRUE(BehindSchedule(p));
  EXPECT_THAT(Summary(report), HasSubstr("1 requests were due by the open loop's schedule"));
  p.spec.mode = LoadMode::kIdleGap;
  p.unsent_at_end = 0;
  p.oldest_unsent_ns = 0;
  const std::optional<absl::Status> gap = NothingMeasured(p);
  ASSERT_TRUE(gap.has_value());
  EXPECT_EQ(gap->code(), absl::StatusCode::kFailedPrecondition) << "nothing left unanswered: windows too short";
  EXPECT_THAT(std::string(gap->message()), HasSubstr("--measurement-interval"));
  EXPECT_FALSE(NothingMeasured(report.points[1]).has_value());
  // Closed loop always ends with its concurrency in flight: what decides is whether the server
  // answered anything after the warm-up (windows too short) or nothing (a server that stopped
  // answering); the warm-up's answers, which every point has, say nothing of that.
  p.spec.mode = LoadMode::kConcurrency;
  p.unanswered_at_end = 4;
  p.sent_total = 30;
  p.finished_after_warmup = 6;
  EXPECT_EQ(NothingMeasured(p)->code(), absl::StatusCode::kFailedPrecondition) << "six answered, outside the windows";
  p.finished_after_warmup = 0;
  EXPECT_EQ(NothingMeasured(p)->code(), absl::StatusCode::kDeadlineExceeded)
      << "the warm-up's 26 were answered, nothing after it";

  // A point that measured something may still have a window that did not.
  PointResult& partly = report.points[1];
  partly.windows.insert(partly.windows.begin(), {0.5, 0, 0, 0, 0, 0.4});
  const nlohmann::json json = ReportToJson(report);
  EXPECT_TRUE(json["runs"][1]["windows"][0]["e2e_p50_us"].is_null()) << json["runs"][1]["windows"];
  EXPECT_EQ(json["runs"][1]["windows"][1]["e2e_p50_us"], 150.0);
}

// Every request of a point failed (a server killed): the point fails with the most frequent code and
// the counts by code, and the busy-client warning, which failed calls would trip, says nothing.
TEST(ReportTest, APointWhoseEveryRequestFailedIsAFailure) {
  PointResult p = MakePoint(LoadMode::kConcurrency, 1, 1000);
  EXPECT_FALSE(EveryRequestFailed(p).has_value()) << "1000 OK beside one failure";
  p.recorder = LatencyRecorder();
  p.recorder.Allocate();
  for (int code : {14, 14, 14, 4}) {
    RequestRecord failed;
    failed.intended_ns = failed.sent_ns = 1'000;
    failed.done_ns = 8'000;
    failed.grpc_code = code;
    p.recorder.Record(failed);
  }
  const std::optional<absl::Status> status = EveryRequestFailed(p);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status->message()),
              HasSubstr("concurrency 4, batch 1: every one of the 4 requests measured failed ("));
  EXPECT_THAT(std::string(status->message()), HasSubstr("UNAVAILABLE 3"));
  EXPECT_THAT(std::string(status->message()), HasSubstr("DEADLINE_EXCEEDED 1"));
  p.reported_windows = 1;
  p.windows[0].client_cpu_busiest = 0.99;
  EXPECT_FALSE(BusyClientWarning(p, 4).has_value()) << "failed calls return at once: not the client's limit";
}

// An open loop behind its schedule at the end of a point: the send times that had come but were
// never sent are counted apart from those in flight (JSON, CSV, console), and the warning names
// both when the oldest of them had waited past the reported tail, even with none in flight.
TEST(ReportTest, UnsentAtEndIsCountedAndWarnedAboutWhenPastTheTail) {
  BenchReport report = MakeReport(LoadMode::kRate);
  PointResult& p = report.points[2];
  const int64_t e2e_max = p.recorder.metric(Metric::kE2e).max();
  ASSERT_GT(e2e_max, 0);
  p.unanswered_at_end = 0;
  p.unsent_at_end = 12;
  p.oldest_unanswered_ns = e2e_max / 3;
  EXPECT_FALSE(UnansweredWarning(p).has_value()) << "late, but within the reported tail";
  p.oldest_unanswered_ns = e2e_max + 25'000'000;
  p.oldest_unsent_ns = p.oldest_unanswered_ns;  // the unsent ones are the oldest
  std::optional<std::string> warning = UnansweredWarning(p);
  ASSERT_TRUE(warning.has_value()) << "unsent requests alone are past the tail";
  EXPECT_NE(warning->find("12 requests were still unanswered"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("12 due by the schedule but never sent"), std::string::npos) << *warning;
  p.unanswered_at_end = 3;
  warning = UnansweredWarning(p);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("15 requests were still unanswered when the point ended (3 in flight, cancelled; 12 due"), std::string::npos)
      << *warning;

  const nlohmann::json json = ReportToJson(report);
  EXPECT_EQ(json["runs"][2]["unsent_at_end"], 12);
  EXPECT_EQ(json["runs"][2]["unanswered_at_end"], 3);
  const auto rows = ParseCsv(ReportToCsv(report));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*rows)[3][Column((*rows)[0], "unsent_at_end")], "12");
  EXPECT_EQ((*rows)[3][Column((*rows)[0], "unanswered_at_end")], "3");
  EXPECT_NE(Summary(report).find("12 requests were due by the open loop's schedule when their points ended but "
                                 "never sent"),
            std::string::npos)
      << Summary(report);
}

// The saturation line says what the rule saw (the next step's gain), and names a later batch size
// that beat the point by more than 5 %, which the one-step rule does not look at.
TEST(ReportTest, TheSaturationLineNamesTheNextStepAndALaterRise) {
  BenchReport report;
  report.batch_sweep = true;
  for (auto [batch, items] : {std::pair{1, 100.0}, {2, 200.0}, {4, 205.0}, {8, 400.0}}) {
    report.points.push_back(MakePoint(LoadMode::kConcurrency, batch, items));
  }
  report.saturation_index = SaturationIndex({100, 200, 205, 400});
  ASSERT_EQ(report.saturation_index, 1u);
  std::string summary = Summary(report);
  EXPECT_NE(summary.find("saturation: batch 2 (200.0 items/s); the next batch size, 4, changed items/s by +2.5% (5% or less)"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("but batch 8 reached 400.0 items/s (+100.0%): throughput rose again"), std::string::npos)
      << summary;
  report.points.back().items_per_s = 209;  // within 5 % of the point: nothing more to say
  summary = Summary(report);
  EXPECT_EQ(summary.find("rose again"), std::string::npos) << summary;
}

// A batch sweep cut short by a failed point does not claim throughput still rose "at the largest
// batch": only at the largest one measured.
TEST(ReportTest, ASweepStoppedByAFailedPointSaysSoInsteadOfNoSaturation) {
  BenchReport report;
  report.batch_sweep = true;
  report.points.push_back(MakePoint(LoadMode::kConcurrency, 1, 1000));
  EXPECT_NE(Summary(report).find("saturation: one batch size measured, no step to judge it by"), std::string::npos)
      << "one point: no step was compared, so no claim that throughput rose";
  report.points.push_back(MakePoint(LoadMode::kConcurrency, 2, 2000));
  EXPECT_NE(Summary(report).find("throughput still rose by more than 5% at the largest batch"), std::string::npos);
  report.failed_point = FailedPoint{"batch 2", "DEADLINE_EXCEEDED"};
  EXPECT_FALSE(ReportToJson(report)["failed_point"].contains("code")) << "not known";
  const std::string summary = Summary(report);
  EXPECT_NE(summary.find("not reached before the sweep stopped at its failed point"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("at the largest batch"), std::string::npos) << summary;
}

TEST(ReportTest, ConsoleRowShowsErrorsAndWarnings) {
  PointResult p = MakePoint(LoadMode::kConcurrency, 1, 1000);
  p.warnings.push_back("1 requests failed (UNAVAILABLE 1)");
  const std::string row = TableRow(p);
  EXPECT_NE(row.find("concurrency 4"), std::string::npos);
  // The fixture's admit (2.5 us) has its own column, after transport.
  EXPECT_NE(TableHeader().find("transport           admit           queue"), std::string::npos) << TableHeader();
  const Histogram& admit = p.recorder.metric(Metric::kAdmit);
  ASSERT_GT(admit.count(), 0);
  const std::string cell = absl::StrFormat(" %15s", absl::StrFormat("%.0f/%.0f", admit.ValueAtPercentile(50) / 1e3,
                                                                     admit.ValueAtPercentile(99) / 1e3));
  EXPECT_NE(row.find(cell), std::string::npos) << row;
  EXPECT_NE(row.find("warning: 1 requests failed (UNAVAILABLE 1)"), std::string::npos);
}

TEST(StabilityTest, NeedsThreeAgreeingWindows) {
  WindowSummary w{1.0, 100, 0, 1000, 100'000, 0.1};
  EXPECT_FALSE(WindowsAreStable({w, w}, 10));
  EXPECT_TRUE(WindowsAreStable({w, w, w}, 10));
  WindowSummary slow = w;
  slow.throughput_rps = 700;
  EXPECT_FALSE(WindowsAreStable({w, w, slow}, 10));
  EXPECT_TRUE(WindowsAreStable({slow, w, w, w}, 10));  // only the last three count
  WindowSummary laggy = w;
  laggy.p50_ns = 130'000;
  EXPECT_FALSE(WindowsAreStable({w, w, laggy}, 10));
  WindowSummary empty = w;
  empty.successes = 0;
  EXPECT_FALSE(WindowsAreStable({w, w, empty}, 10));
}

TEST(SaturationTest, FirstPointWhereThroughputStopsRisingByFivePercent) {
  EXPECT_EQ(SaturationIndex({100, 190, 350, 360, 365}), 2u);
  EXPECT_EQ(SaturationIndex({100, 104}), 0u);
  EXPECT_EQ(SaturationIndex({100, 200, 400}), std::nullopt);
  EXPECT_EQ(SaturationIndex({100}), std::nullopt);
  EXPECT_EQ(SaturationIndex({100, 200, 150}), 1u);
  // "No more than 5 %": a gain of exactly the threshold already counts as saturated.
  EXPECT_EQ(SaturationIndex({200, 210}), 0u);
  EXPECT_EQ(SaturationIndex({100, 125}, 0.25), 0u);
  EXPECT_EQ(SaturationIndex({100, 126}, 0.25), std::nullopt);
}

}  // namespace
}  // namespace chronoserve::client::bench
