// The chronobench binary against the real chronoserve binary on 127.0.0.1: its JSON/CSV/HTML
// outputs (the HTML rendered by headless Chromium, skipped when Chromium is not installed), shared
// memory and streaming from the command line, its exit codes, -u unix:PATH, a sweep cut short by a
// failed point, and a server without request timing. The load modes through the library:
// chronobench_e2e_test.cc.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/chronobench/json_report.h"
#include "client/cuda_shared_memory.h"
#include "gtest/gtest.h"
#include "tests/client/chronobench_e2e_fixture.h"
#include "tests/client/csv_parse.h"
#include "tests/client/report_schema.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::RunProgram;
using chronoserve::testing::StartTestServer;
using chronoserve::testing::Subprocess;
using testing::ChronobenchE2eTest;
using testing::RegisteredRegions;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The binary against the mlp through system shared memory, with `flags` added (batch size,
// concurrency, transport). Returns its JSON report once it exited 0 and the report has the full
// schema; null (with a failure recorded) otherwise.
nlohmann::json RunThroughSharedMemory(const std::string& url, const std::string& json,
                                      const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {CHRONOBENCH_BIN, "-m", "mlp", "-u", url, "-p", "300", "--max-trials", "3",
                                   "--warmup-requests", "5", "-s", "50", "--shared-memory", "system", "--json", json};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto run = RunProgram(argv, absl::Seconds(120));
  if (!run.ok() || run->first != 0) {
    ADD_FAILURE() << (run.ok() ? run->second : run.status().ToString());
    return nullptr;
  }
  nlohmann::json report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  if (report.is_discarded()) {
    ADD_FAILURE() << json << " is not JSON";
    return nullptr;
  }
  testing::ExpectReportSchema(report, /*with_server_spans=*/true);
  return report;
}

TEST_F(ChronobenchE2eTest, BinaryRunsThroughSharedMemory) {
  const nlohmann::json report =
      RunThroughSharedMemory(*url_, *dir_ + "/shm_report.json", {"-b", "4", "--concurrency-range", "2"});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["server"]["shared_memory"], "system");
  EXPECT_EQ(report["server"]["shared_memory_preload"], false);
  EXPECT_EQ(report["runs"][0]["errors"], 0);
  EXPECT_EQ(RegisteredRegions(*url_), 0) << "the binary unregistered its regions at exit";
}

TEST_F(ChronobenchE2eTest, BinaryPreloadsSharedMemory) {
  const nlohmann::json report = RunThroughSharedMemory(*url_, *dir_ + "/shm_preload_report.json",
                                                       {"-b", "2", "--concurrency-range", "2", "--shared-memory-preload"});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["server"]["shared_memory"], "system");
  EXPECT_EQ(report["server"]["shared_memory_preload"], true);
  EXPECT_EQ(report["runs"][0]["errors"], 0);
  EXPECT_EQ(RegisteredRegions(*url_), 0) << "the binary unregistered its regions at exit";
}

TEST_F(ChronobenchE2eTest, BinaryStreamsThroughSharedMemory) {
  const nlohmann::json report = RunThroughSharedMemory(*url_, *dir_ + "/stream_shm_report.json",
                                                       {"-b", "2", "--concurrency-range", "3", "--streaming"});
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["server"]["streaming"], true);
  EXPECT_EQ(report["server"]["shared_memory"], "system");
  EXPECT_EQ(report["runs"][0]["errors"], 0);
  EXPECT_EQ(report["runs"][0]["timing_violations"], 0);
  EXPECT_EQ(RegisteredRegions(*url_), 0) << "the binary unregistered its regions at exit";
}

const char* FindChromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(c, X_OK) == 0) return c;
  }
  return nullptr;
}

std::vector<std::string> ChromiumFlags(const char* chromium) {
  return {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--window-size=1100,2200"};
}

// Open loop: e2e counts from the intended send, so the breakdown chart stacks the schedule lag on
// top of the segments that make up e2e from the actual send; the heading says what transport is.
TEST_F(ChronobenchE2eTest, OpenLoopHtmlStacksTheScheduleLag) {
  const std::string html = *dir_ + "/open_loop.html";
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--request-rate-range", "200", "-p", "300",
                         "--max-trials", "3", "--warmup-requests", "5", "-s", "50", "--html", html},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  const std::string page = ReadAll(html);
  EXPECT_NE(page.find("transport = end-to-end from the actual send minus server_total"), std::string::npos);
  const char* chromium = FindChromium();
  if (chromium == nullptr) GTEST_SKIP() << "chromium not installed (apt-get install chromium)";
  std::vector<std::string> dump = ChromiumFlags(chromium);
  dump.push_back("--dump-dom");
  dump.push_back("file://" + html);
  auto dom = RunProgram(dump, absl::Seconds(90));
  ASSERT_TRUE(dom.ok()) << dom.status();
  EXPECT_EQ(dom->second.find("data-error"), std::string::npos) << dom->second.substr(0, 4000);
  EXPECT_NE(dom->second.find("data-breakdown=\"admit,queue,input_stage,h2d,compute,d2h,device_gap,output_stage,"
                             "handback,server other,"
                             "transport,schedule lag\""),
            std::string::npos)
      << dom->second.substr(0, 4000);
}

TEST_F(ChronobenchE2eTest, BinaryWritesJsonCsvAndHtmlThatRenders) {
  const std::string json = *dir_ + "/report.json", csv = *dir_ + "/report.csv", html = *dir_ + "/report.html";
  // Percentiles without p50 and p99: the tables show those anyway, so the files carry them too.
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--batch-range", "1:4:3", "--concurrency-range",
                         "2", "-p", "300", "--max-trials", "3", "--warmup-requests", "5", "-s", "50", "--percentiles",
                         "90,99.9", "--json", json, "--csv", csv, "--html", html},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  EXPECT_NE(run->second.find("concurrency 2, batch 4"), std::string::npos) << run->second;
  EXPECT_NE(run->second.find("saturation"), std::string::npos) << run->second;

  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  testing::ExpectReportSchema(report, /*with_server_spans=*/true);
  ASSERT_EQ(report["runs"].size(), 2u);
  EXPECT_EQ(report["runs"][1]["batch_size"], 4);
  EXPECT_TRUE(report.contains("saturation"));
  EXPECT_EQ(report["sweep"]["percentiles"], nlohmann::json({50, 90, 99, 99.9}));

  const auto rows = testing::ParseCsv(ReadAll(csv));
  ASSERT_TRUE(rows.ok()) << rows.status() << "\n" << ReadAll(csv);
  ASSERT_EQ(rows->size(), 3u) << "header and two points";
  const std::vector<std::string>& header = (*rows)[0];
  const std::vector<std::string> percentiles = {"e2e_p50_us", "e2e_p90_us", "e2e_p99_us", "e2e_p99_9_us"};
  const auto p50 = std::find(header.begin(), header.end(), "e2e_p50_us");
  ASSERT_LE(p50 + percentiles.size(), header.end()) << absl::StrJoin(header, ",");
  EXPECT_EQ(std::vector<std::string>(p50, p50 + percentiles.size()), percentiles);
  for (size_t i = 1; i < rows->size(); ++i) {
    ASSERT_EQ((*rows)[i].size(), header.size()) << i;
    EXPECT_EQ((*rows)[i][testing::Column(header, "batch_size")], i == 1 ? "1" : "4");
    EXPECT_EQ((*rows)[i][testing::Column(header, "status")], "ok");
  }

  const std::string page = ReadAll(html);
  EXPECT_EQ(page.find("<script src"), std::string::npos) << "the report must not fetch anything";
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_NE(page.find("Chart.js v3"), std::string::npos) << "Chart.js is inlined";

  const char* chromium = FindChromium();
  if (chromium == nullptr) GTEST_SKIP() << "chromium not installed (apt-get install chromium)";
  const std::vector<std::string> flags = ChromiumFlags(chromium);
  std::vector<std::string> dump = flags;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + html);
  auto dom = RunProgram(dump, absl::Seconds(90));
  ASSERT_TRUE(dom.ok()) << dom.status();
  EXPECT_NE(dom->second.find("data-charts=\"3\""), std::string::npos) << dom->second.substr(0, 4000);
  EXPECT_NE(dom->second.find("data-painted=\"3\""), std::string::npos) << "a chart canvas stayed blank";
  EXPECT_NE(dom->second.find("server other,transport\""), std::string::npos) << "closed loop: no schedule lag";
  EXPECT_EQ(dom->second.find("data-error"), std::string::npos);
  std::vector<std::string> shot = flags;
  const std::string png = *dir_ + "/report.png";
  shot.push_back("--screenshot=" + png);
  shot.push_back("file://" + html);
  auto screenshot = RunProgram(shot, absl::Seconds(90));
  ASSERT_TRUE(screenshot.ok()) << screenshot.status();
  EXPECT_GT(ReadAll(png).size(), 10'000u) << screenshot->second;
}

TEST_F(ChronobenchE2eTest, BinaryFailsFastOnUnknownModel) {
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "nope", "-u", *url_}, absl::Seconds(30));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->first, 1);
  EXPECT_NE(run->second.find("model 'nope'"), std::string::npos) << run->second;
}

// A flag chronobench cannot take exits 2 before any request, naming the flag and the range, as
// chronoserve's own flags do; --help exits 0.
TEST_F(ChronobenchE2eTest, BinaryExitsTwoOnABadFlagAndZeroOnHelp) {
  auto bad = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--connections", "0"}, absl::Seconds(30));
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->first, 2) << bad->second;
  EXPECT_NE(bad->second.find("--connections: '0' is not an integer from 1 to 1024"), std::string::npos) << bad->second;
  auto two_modes = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--concurrency-range", "2",
                               "--request-rate-range", "100"},
                              absl::Seconds(30));
  ASSERT_TRUE(two_modes.ok()) << two_modes.status();
  EXPECT_EQ(two_modes->first, 2) << two_modes->second;
  EXPECT_NE(two_modes->second.find("give one of --concurrency-range"), std::string::npos) << two_modes->second;
  // More elements than a request can carry (here past int64 too): a bad flag, not an abort.
  auto huge_shape = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--shape", "INPUT__0:3037000500,3037000500"},
                               absl::Seconds(30));
  ASSERT_TRUE(huge_shape.ok()) << huge_shape.status();
  EXPECT_EQ(huge_shape->first, 2) << huge_shape->second;
  EXPECT_NE(huge_shape->second.find("--shape INPUT__0:3037000500,3037000500"), std::string::npos) << huge_shape->second;
  // A build without CUDA cannot allocate GPU regions: said before any connection.
  if (!client::CudaSharedMemory::Available()) {
    auto cuda = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--shared-memory", "cuda"}, absl::Seconds(30));
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_EQ(cuda->first, 2) << cuda->second;
    EXPECT_NE(cuda->second.find("--shared-memory cuda: this chronobench was built without CUDA"), std::string::npos)
        << cuda->second;
  }
  // A report that could not be written is found before the run, not after it.
  auto no_dir = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--json", "/nonexistent-chronobench-dir/r.json"},
                           absl::Seconds(30));
  ASSERT_TRUE(no_dir.ok()) << no_dir.status();
  EXPECT_EQ(no_dir->first, 2) << no_dir->second;
  EXPECT_NE(no_dir->second.find("--json '/nonexistent-chronobench-dir/r.json': directory '/nonexistent-chronobench-dir' "
                                "does not exist"),
            std::string::npos)
      << no_dir->second;
  EXPECT_EQ(no_dir->second.find("p50"), std::string::npos) << "no point ran: " << no_dir->second;
  // Two reports into one file (here through `..`): only the last written would be left.
  const std::string same = *dir_ + "/same";
  auto one_file = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--json", same, "--csv",
                              *dir_ + "/../" + std::filesystem::path(*dir_).filename().string() + "/same"},
                             absl::Seconds(30));
  ASSERT_TRUE(one_file.ok()) << one_file.status();
  EXPECT_EQ(one_file->first, 2) << one_file->second;
  EXPECT_NE(one_file->second.find("--json and --csv name the same file"), std::string::npos) << one_file->second;
  EXPECT_FALSE(std::filesystem::exists(same)) << "refused before the run";
  // A report onto the client spans' file: the report would replace the spans.
  auto spans_file = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--traceparent-rate", "1", "--trace-file",
                                same, "--html", same},
                               absl::Seconds(30));
  ASSERT_TRUE(spans_file.ok()) << spans_file.status();
  EXPECT_EQ(spans_file->first, 2) << spans_file->second;
  EXPECT_NE(spans_file->second.find("--html and --trace-file name the same file"), std::string::npos)
      << spans_file->second;
  EXPECT_FALSE(std::filesystem::exists(same)) << "refused before the run";
  // An empty path would write nothing without a word.
  auto empty = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "--html", ""}, absl::Seconds(30));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->first, 2) << empty->second;
  EXPECT_NE(empty->second.find("a file path is needed"), std::string::npos) << empty->second;
  auto help = RunProgram({CHRONOBENCH_BIN, "--help"}, absl::Seconds(30));
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_EQ(help->first, 0) << help->second;
  EXPECT_NE(help->second.find("--measurement-interval"), std::string::npos) << help->second;
}

// A server started with --grpc-unix-socket PATH: chronobench takes -u unix:PATH, unary and
// streaming, and the breakdown holds as over TCP.
TEST_F(ChronobenchE2eTest, UnixSocketUrl) {
  const std::string socket_path = *dir_ + "/chronoserve.sock";
  auto started = StartTestServer(*dir_ + "/models", {"--grpc-unix-socket", socket_path});
  ASSERT_TRUE(started.ok()) << started.status();
  Subprocess& server = *started->process;
  EXPECT_NE(server.output().find("gRPC also listening on unix:" + socket_path), std::string::npos);
  for (const bool streaming : {false, true}) {
    const std::string json = *dir_ + (streaming ? "/unix_stream.json" : "/unix_unary.json");
    std::vector<std::string> argv = {CHRONOBENCH_BIN, "-m", "mlp", "-u", "unix:" + socket_path, "-b", "2",
                                     "--concurrency-range", "2", "-p", "300", "--max-trials", "3",
                                     "--warmup-requests", "5", "-s", "50", "--json", json};
    if (streaming) argv.push_back("--streaming");
    auto run = RunProgram(argv, absl::Seconds(120));
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->first, 0) << run->second;
    const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
    ASSERT_FALSE(report.is_discarded());
    testing::ExpectReportSchema(report, /*with_server_spans=*/true);
    const auto& r = report["runs"][0];
    EXPECT_GT(r["requests"].get<int64_t>(), 0) << streaming;
    EXPECT_EQ(r["errors"].get<int64_t>(), 0) << streaming;
    EXPECT_EQ(r["responses_without_timing"].get<int64_t>(), 0) << streaming;
    EXPECT_GT(r["latency_us"]["compute"]["p50"].get<double>(), 0) << streaming;
    // CPU spans are host-timed: never launch-bound, so no such warning.
    EXPECT_EQ(r["device_timed_responses"].get<int64_t>(), 0) << streaming;
    for (const auto& w : r["warnings"]) EXPECT_EQ(w.get<std::string>().find("launch-bound"), std::string::npos) << w;
  }
  server.Signal(SIGTERM);
  auto exited = server.WaitForExit(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_EQ(*exited, 0) << server.output();
  EXPECT_FALSE(std::filesystem::exists(socket_path)) << "socket left behind after SIGTERM";
}

// A point that fails (the server frozen with SIGSTOP during the second point, --timeout-ms 0 so no
// request fails by itself: the window's wait for a completion gives up) ends the sweep, but the
// reports are still written with the first point and a failed_point entry, and the exit code is 1.
TEST_F(ChronobenchE2eTest, FailedPointKeepsThePointsBeforeItInTheReports) {
  auto started = StartTestServer(*dir_ + "/models");
  ASSERT_TRUE(started.ok()) << started.status();
  Subprocess& server = *started->process;
  const std::string json = *dir_ + "/partial.json", csv = *dir_ + "/partial.csv", html = *dir_ + "/partial.html";
  // -s 0.001 never stabilises, so the second point runs 20 windows of 100 ms: long enough for the
  // freeze to come while it runs; each window waits for one completion, as the warm-up waits for
  // its requests: the wait that fails.
  auto bench = Subprocess::Start({CHRONOBENCH_BIN, "-m", "mlp", "-u", started->url, "--concurrency-range", "1:2",
                                  "-p", "100", "--max-trials", "20", "--warmup-requests", "5", "-s", "0.001",
                                  "--measurement-request-count", "1", "--timeout-ms", "0", "--json", json, "--csv",
                                  csv, "--html", html});
  ASSERT_TRUE(bench.ok()) << bench.status();
  const absl::Status first_point = (*bench)->WaitForOutput("concurrency 1, batch 1", absl::Seconds(120));
  server.Signal(SIGSTOP);
  auto exited = (*bench)->WaitForExit(absl::Seconds(120));
  server.Signal(SIGCONT);
  ASSERT_TRUE(first_point.ok()) << first_point;
  ASSERT_TRUE(exited.ok()) << exited.status();
  const std::string output = (*bench)->output();
  EXPECT_EQ(*exited, 1) << output;
  EXPECT_NE(output.find("concurrency 2, batch 1: no response"), std::string::npos) << output;
  EXPECT_NE(output.find("the reports hold the 1 point(s) measured before it"), std::string::npos) << output;

  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << ReadAll(json);
  testing::ExpectReportSchema(report, /*with_server_spans=*/true);
  ASSERT_EQ(report["runs"].size(), 1u);
  EXPECT_EQ(report["runs"][0]["concurrency"], 1);
  ASSERT_TRUE(report.contains("failed_point")) << report.dump().substr(0, 2000);
  EXPECT_EQ(report["failed_point"]["label"], "concurrency 2, batch 1");
  // Frozen in its warm-up or in a window, whichever the SIGSTOP met: the stall's message either way.
  EXPECT_NE(report["failed_point"]["message"].get<std::string>().find("no response for"), std::string::npos)
      << report["failed_point"];
  // The frozen server holds both requests of the closed loop: counted, none dropped in silence.
  EXPECT_EQ(report["failed_point"]["unanswered_at_end"], 2) << report["failed_point"];
  EXPECT_EQ(report["failed_point"]["unsent_at_end"], 0) << report["failed_point"];
  const auto rows = testing::ParseCsv(ReadAll(csv));
  ASSERT_TRUE(rows.ok()) << rows.status() << "\n" << ReadAll(csv);
  ASSERT_EQ(rows->size(), 3u) << "header, the first point and the failed one";
  const std::vector<std::string>& header = (*rows)[0];
  for (const auto& row : *rows) ASSERT_EQ(row.size(), header.size());
  const std::vector<std::string>& measured = (*rows)[1];
  EXPECT_EQ(measured[testing::Column(header, "point")], "concurrency 1, batch 1");
  EXPECT_EQ(measured[testing::Column(header, "status")], "ok");
  EXPECT_EQ(measured[testing::Column(header, "concurrency")], "1");
  const std::vector<std::string>& failed = (*rows)[2];
  EXPECT_EQ(failed[testing::Column(header, "mode")], "concurrency");
  EXPECT_EQ(failed[testing::Column(header, "concurrency")], "2") << "the failed point's own settings are filled";
  EXPECT_EQ(failed[testing::Column(header, "batch_size")], "1");
  EXPECT_EQ(failed[testing::Column(header, "point")], "concurrency 2, batch 1");
  EXPECT_EQ(failed[testing::Column(header, "status")], "failed");
  EXPECT_EQ(failed[testing::Column(header, "message")], report["failed_point"]["message"]);
  EXPECT_EQ(failed[testing::Column(header, "unanswered_at_end")], "2");
  for (const char* figure : {"requests", "throughput_rps", "e2e_p50_us"}) {
    EXPECT_EQ(failed[testing::Column(header, figure)], "") << figure << ": nothing was measured";
  }
  EXPECT_NE(ReadAll(html).find("\"failed_point\""), std::string::npos) << "the HTML inlines the partial report";
}

// A server killed after the first point: the second point's requests all fail at once. That is not a
// measurement: the point fails (its message counts the failures by code), the sweep stops, the
// reports keep the first point, and chronobench exits 1, not 0 with a row of errors.
TEST_F(ChronobenchE2eTest, AServerKilledBetweenPointsFailsTheNextPoint) {
  auto started = StartTestServer(*dir_ + "/models");
  ASSERT_TRUE(started.ok()) << started.status();
  Subprocess& server = *started->process;
  const std::string json = *dir_ + "/killed.json";
  // 20000 warm-up requests take the second point a second or more even on a fast host: the kill
  // lands in them, so that no request of its windows can have been answered.
  auto bench = Subprocess::Start({CHRONOBENCH_BIN, "-m", "mlp", "-u", started->url, "--concurrency-range", "1:2",
                                  "-p", "100", "--max-trials", "3", "--warmup-requests", "20000", "--json", json});
  ASSERT_TRUE(bench.ok()) << bench.status();
  const absl::Status first_point = (*bench)->WaitForOutput("concurrency 1, batch 1", absl::Seconds(120));
  server.Signal(SIGKILL);
  auto exited = (*bench)->WaitForExit(absl::Seconds(120));
  ASSERT_TRUE(first_point.ok()) << first_point;
  ASSERT_TRUE(exited.ok()) << exited.status();
  const std::string output = (*bench)->output();
  EXPECT_EQ(*exited, 1) << output;
  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << ReadAll(json);
  ASSERT_EQ(report["runs"].size(), 1u);
  ASSERT_TRUE(report.contains("failed_point")) << report.dump().substr(0, 2000);
  EXPECT_EQ(report["failed_point"]["label"], "concurrency 2, batch 1");
  const std::string message = report["failed_point"]["message"].get<std::string>();
  EXPECT_NE(message.find("concurrency 2, batch 1: every one of the"), std::string::npos) << message;
  EXPECT_NE(message.find("requests measured failed (UNAVAILABLE"), std::string::npos) << message;
}

// A server started with --request-timing off: e2e and throughput as usual, every server column
// empty (null in the JSON, "-" on the console), and a warning that says why.
TEST_F(ChronobenchE2eTest, ServerWithoutTimingLeavesServerColumnsEmpty) {
  auto server = StartTestServer(*dir_ + "/models", {"--request-timing", "off"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string url = server->url;
  const std::string json = *dir_ + "/untimed.json";
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", url, "-b", "2", "--concurrency-range", "2", "-p", "300",
                         "--max-trials", "3", "--warmup-requests", "5", "-s", "50", "--json", json},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  EXPECT_NE(run->second.find("carried no server timing"), std::string::npos) << run->second;
  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  testing::ExpectReportSchema(report, /*with_server_spans=*/false);
  const auto& r = report["runs"][0];
  EXPECT_GT(r["throughput_rps"].get<double>(), 0);
  EXPECT_EQ(r["responses_without_timing"], r["requests"]);
  EXPECT_TRUE(r["latency_us"]["e2e"].is_object());
  for (const char* span : {"transport", "server_total", "queue", "compute", "d2h"}) {
    EXPECT_TRUE(r["latency_us"][span].is_null()) << span;
  }
  EXPECT_TRUE(r["batch_size_executed"].is_null());
}

}  // namespace
}  // namespace chronoserve::client::bench
