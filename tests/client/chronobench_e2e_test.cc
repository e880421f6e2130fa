// chronobench against the real chronoserve binary on 127.0.0.1: every load mode, the per-request
// breakdown invariants, distinct connections, the binary's JSON/CSV/HTML outputs, and the HTML
// rendered by headless Chromium (skipped when Chromium is not installed).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/chronobench/benchmark.h"
#include "client/chronobench/json_report.h"
#include "gtest/gtest.h"
#include "tests/client/csv_parse.h"
#include "tests/client/report_schema.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tools/example_models.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::TestDir;
using chronoserve::testing::RunProgram;
using chronoserve::testing::StartTestServer;
using chronoserve::testing::Subprocess;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class ChronobenchE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<TestDir> dir = TestDir::Create("chronobench");
    ASSERT_TRUE(dir.ok()) << dir.status();
    test_dir_ = new TestDir(*std::move(dir));
    dir_ = new std::string(test_dir_->path());
    const std::string repo = *dir_ + "/models";
    examples::ModelOptions mlp;
    mlp.max_batch_size = 64;
    ASSERT_TRUE(examples::WriteMlp(repo, "mlp", mlp).ok());
    auto server = StartTestServer(repo);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->process.release();
    url_ = new std::string(server->url);
  }
  static void TearDownTestSuite() {
    delete server_;  // before its repository goes
    server_ = nullptr;
    delete test_dir_;
    test_dir_ = nullptr;
  }

  BenchOptions Options() const {
    BenchOptions o;
    o.target.url = *url_;
    o.target.model = "mlp";
    o.target.timeout_ms = 10'000;
    o.measurement.interval_ms = 300;
    o.measurement.warmup_requests = 5;
    o.measurement.max_trials = 3;
    o.measurement.stability_percentage = 50;
    o.load.threads = 2;
    return o;
  }

  static BenchReport Run(const BenchOptions& options) {
    auto bench = Benchmark::Create(options, SteadyClock::Get());
    EXPECT_TRUE(bench.ok()) << bench.status();
    if (!bench.ok()) return {};
    auto report = (*bench)->Run(nullptr, nullptr);
    EXPECT_TRUE(report.ok()) << report.status();
    if (report.ok() && report->failed_point.has_value()) {
      ADD_FAILURE() << report->failed_point->label << ": " << report->failed_point->message;
    }
    return report.ok() ? *std::move(report) : BenchReport{};
  }

  // TIMING.md's invariants, on what the client measured.
  static void ExpectBreakdownConsistent(const PointResult& p) {
    const LatencyRecorder& r = p.recorder;
    EXPECT_GT(r.successes(), 0) << p.spec.Label();
    EXPECT_EQ(r.errors(), 0) << p.spec.Label();
    EXPECT_EQ(r.without_timing(), 0) << "chronoserve always returns timing.*";
    EXPECT_EQ(r.timing_violations(), 0) << p.spec.Label();
    EXPECT_EQ(r.metric(Metric::kCompute).count(), r.successes());
    EXPECT_EQ(r.metric(Metric::kTransport).negative(), 0);
    EXPECT_LE(r.metric(Metric::kServerTotal).max(), r.metric(Metric::kE2eActualSend).max());
    EXPECT_GE(r.batch_size().min(), p.spec.batch_size);
    EXPECT_EQ(r.metric(Metric::kE2e).count(), r.successes());
    EXPECT_GT(p.throughput_rps, 0);
  }

  static TestDir* test_dir_;  // removed with everything in it at the end of the suite
  static std::string* dir_;   // its path
  static std::string* url_;
  static Subprocess* server_;
};
TestDir* ChronobenchE2eTest::test_dir_ = nullptr;
std::string* ChronobenchE2eTest::dir_ = nullptr;
std::string* ChronobenchE2eTest::url_ = nullptr;
Subprocess* ChronobenchE2eTest::server_ = nullptr;

TEST_F(ChronobenchE2eTest, ClosedLoopSweep) {
  BenchOptions o = Options();
  o.load.concurrency = {1, 3};
  o.trace.traceparent_rate = 1.0;
  const BenchReport report = Run(o);
  ASSERT_EQ(report.points.size(), 2u);
  for (const auto& p : report.points) {
    ExpectBreakdownConsistent(p);
    // Every request carried a traceparent, and traced counts over the requests' own windows (not
    // the warm-up, the earlier windows or the calls cancelled at the end).
    EXPECT_EQ(p.traced, p.recorder.successes() + p.recorder.errors()) << p.spec.Label();
    EXPECT_EQ(p.reported_windows, std::min<int>(3, p.windows.size()));
    // Closed loop ends with at most its concurrency in flight, none stuck past the reported tail.
    EXPECT_GE(p.unanswered_at_end, 0);
    EXPECT_LE(p.unanswered_at_end, p.spec.concurrency) << p.spec.Label();
    EXPECT_FALSE(UnansweredWarning(p).has_value()) << p.spec.Label();
  }
  EXPECT_EQ(report.server["name"], "chronoserve");
}

TEST_F(ChronobenchE2eTest, OpenLoopPoissonKeepsItsRateAndTimesFromTheSchedule) {
  BenchOptions o = Options();
  o.load.mode = LoadMode::kRate;
  o.load.rates = {150};
  o.load.distribution = Distribution::kPoisson;
  o.measurement.interval_ms = 1000;
  const BenchReport report = Run(o);
  ASSERT_EQ(report.points.size(), 1u);
  const PointResult& p = report.points[0];
  ExpectBreakdownConsistent(p);
  EXPECT_NEAR(p.throughput_rps, 150, 150 * 0.35);
  const LatencyRecorder& r = p.recorder;
  EXPECT_EQ(r.schedule_lag().count(), r.successes());
  // Sends keep their schedule to well under a millisecond: the worker's SendWaker ends its wait on
  // the queue a lead before a send time and the worker polls the rest, instead of a timed wait
  // alone, which gRPC rounds up to a whole millisecond (that made the median send ~0.5 ms late,
  // every send up to ~1 ms). At 150/s over two threads the median lag is the cost of a clock read
  // and a send (a few µs); 300 µs leaves room for a loaded 2-core machine taking the CPU away now
  // and then, while the millisecond rounding would put the median near 500 µs. A median: p99 may
  // catch preemption. Run alone (RUN_SERIAL, run_serial.cmake).
  EXPECT_LT(r.schedule_lag().ValueAtPercentile(50), 300'000) << "sends late to the millisecond";
  // From the intended time is never shorter than from the actual send.
  for (double pc : {50.0, 99.0}) {
    EXPECT_GE(r.metric(Metric::kE2e).ValueAtPercentile(pc) * 1.002,
              r.metric(Metric::kE2eActualSend).ValueAtPercentile(pc));
  }
}

// Stability compares the last three windows: with -r 2 no point can be stable, and the warning
// says so instead of "did not stabilise".
TEST_F(ChronobenchE2eTest, FewerThanThreeTrialsSayWhyNoPointIsStable) {
  BenchOptions o = Options();
  o.load.concurrency = {1};
  o.measurement.max_trials = 2;
  const BenchReport report = Run(o);
  ASSERT_EQ(report.points.size(), 1u);
  const PointResult& p = report.points[0];
  EXPECT_FALSE(p.stable);
  EXPECT_EQ(p.windows.size(), 2u);
  bool said = false;
  for (const std::string& w : p.warnings) said |= w.find("--max-trials 2 is below 3") != std::string::npos;
  EXPECT_TRUE(said) << absl::StrJoin(p.warnings, " | ");
}

TEST_F(ChronobenchE2eTest, IdleGapSpacesRequests) {
  BenchOptions o = Options();
  o.load.mode = LoadMode::kIdleGap;
  o.load.idle_gaps_ms = {0, 40};
  o.measurement.warmup_requests = 2;
  const BenchReport report = Run(o);
  ASSERT_EQ(report.points.size(), 2u);
  for (const auto& p : report.points) ExpectBreakdownConsistent(p);
  EXPECT_LE(report.points[1].throughput_rps, 1000.0 / 40 * 1.05);  // at most one request per gap
  EXPECT_GT(report.points[0].throughput_rps, report.points[1].throughput_rps);
}

// The /dev/shm objects this process created (chronobench names them chronobench_<pid>_...).
std::vector<std::string> OwnShmObjects() {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat("chronobench_", getpid(), "_");
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
  }
  closedir(dir);
  return names;
}

int RegisteredRegions(const std::string& url) {
  auto status = InferenceClient::Connect(url, std::chrono::seconds(30))->SystemSharedMemoryStatus();
  return status.ok() ? status->regions_size() : -1;
}

TEST_F(ChronobenchE2eTest, SystemSharedMemoryClosedAndOpenLoop) {
  BenchOptions o = Options();
  o.shared_memory.kind = SharedMemoryKind::kSystem;
  o.load.concurrency = {1, 3};
  const BenchReport closed = Run(o);
  ASSERT_EQ(closed.points.size(), 2u);
  for (const auto& p : closed.points) ExpectBreakdownConsistent(p);
  EXPECT_EQ(closed.server["shared_memory"], "system");

  o.load.mode = LoadMode::kRate;
  o.load.rates = {200};
  const BenchReport open = Run(o);
  ASSERT_EQ(open.points.size(), 1u);
  ExpectBreakdownConsistent(open.points[0]);

  EXPECT_EQ(RegisteredRegions(*url_), 0) << "every worker unregistered its regions";
  EXPECT_TRUE(OwnShmObjects().empty()) << "and unlinked them: " << absl::StrJoin(OwnShmObjects(), ", ");
}

TEST_F(ChronobenchE2eTest, SharedMemoryOutputSizeTooSmallFailsFast) {
  BenchOptions o = Options();
  o.shared_memory.kind = SharedMemoryKind::kSystem;
  o.shared_memory.output_byte_size = 8;  // mlp's OUTPUT__0 needs 16 floats per item
  auto bench = Benchmark::Create(o, SteadyClock::Get());
  ASSERT_FALSE(bench.ok());
  EXPECT_EQ(bench.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bench.status().message().find("through system shared memory"), std::string::npos) << bench.status();
  EXPECT_NE(bench.status().message().find("64 bytes"), std::string::npos) << bench.status();
  EXPECT_EQ(RegisteredRegions(*url_), 0);
  EXPECT_TRUE(OwnShmObjects().empty());
}

TEST_F(ChronobenchE2eTest, BinaryRunsThroughSharedMemory) {
  const std::string json = *dir_ + "/shm_report.json";
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "-b", "4", "--concurrency-range", "2", "-p", "300",
                         "--max-trials", "3", "--warmup-requests", "5", "-s", "50", "--shared-memory", "system",
                         "--json", json},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  testing::ExpectReportSchema(report, /*with_server_spans=*/true);
  EXPECT_EQ(report["server"]["shared_memory"], "system");
  EXPECT_EQ(report["runs"][0]["errors"], 0);
  EXPECT_EQ(RegisteredRegions(*url_), 0) << "the binary unregistered its regions at exit";
}

TEST_F(ChronobenchE2eTest, StreamingEveryLoadMode) {
  BenchOptions o = Options();
  o.target.streaming = true;
  o.target.connections = 2;  // each worker keeps a stream on each connection
  o.load.concurrency = {1, 4};
  o.trace.traceparent_rate = 0.5;
  const BenchReport closed = Run(o);
  ASSERT_EQ(closed.points.size(), 2u);
  for (const auto& p : closed.points) ExpectBreakdownConsistent(p);
  EXPECT_EQ(closed.server["streaming"], true);
  EXPECT_GT(closed.points[1].traced, 0);
  EXPECT_LT(closed.points[1].traced, closed.points[1].recorder.successes()) << "about half are traced";
  o.load.mode = LoadMode::kRate;
  o.load.rates = {200};
  const BenchReport open = Run(o);
  ASSERT_EQ(open.points.size(), 1u);
  ExpectBreakdownConsistent(open.points[0]);
  o.load.mode = LoadMode::kIdleGap;
  o.load.idle_gaps_ms = {5};
  const BenchReport gaps = Run(o);
  ASSERT_EQ(gaps.points.size(), 1u);
  ExpectBreakdownConsistent(gaps.points[0]);
}

TEST_F(ChronobenchE2eTest, BinaryStreamsThroughSharedMemory) {
  const std::string json = *dir_ + "/stream_shm_report.json";
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", *url_, "-b", "2", "--concurrency-range", "3", "-p", "300",
                         "--max-trials", "3", "--warmup-requests", "5", "-s", "50", "--streaming", "--shared-memory",
                         "system", "--json", json},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  const auto report = nlohmann::json::parse(ReadAll(json), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  testing::ExpectReportSchema(report, /*with_server_spans=*/true);
  EXPECT_EQ(report["server"]["streaming"], true);
  EXPECT_EQ(report["server"]["shared_memory"], "system");
  EXPECT_EQ(report["runs"][0]["errors"], 0);
  EXPECT_EQ(report["runs"][0]["timing_violations"], 0);
  EXPECT_EQ(RegisteredRegions(*url_), 0) << "the binary unregistered its regions at exit";
}

TEST_F(ChronobenchE2eTest, UnknownModelAndBadShapeFailFast) {
  BenchOptions o = Options();
  o.target.model = "no_such_model";
  auto bench = Benchmark::Create(o, SteadyClock::Get());
  ASSERT_FALSE(bench.ok());
  EXPECT_EQ(bench.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(bench.status().message().find("no_such_model"), std::string::npos);
  o = Options();
  o.input.shapes["INPUT__0"] = {32};
  EXPECT_FALSE(Benchmark::Create(o, SteadyClock::Get()).ok());
  o = Options();
  o.load.batch_sizes = {65};  // above max_batch_size: the validation request carries the server's error
  auto too_big = Benchmark::Create(o, SteadyClock::Get());
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("validation request"), std::string::npos) << too_big.status();
  o = Options();
  o.target.model_version = "99";  // -x: the metadata asked for is that version's, which mlp lacks
  auto no_version = Benchmark::Create(o, SteadyClock::Get());
  ASSERT_FALSE(no_version.ok());
  EXPECT_EQ(no_version.status().code(), absl::StatusCode::kNotFound) << no_version.status();
  EXPECT_NE(no_version.status().message().find("model 'mlp' version '99' on "), std::string::npos) << no_version.status();
  EXPECT_NE(no_version.status().message().find("has no version '99'"), std::string::npos)
      << "the server's reason: " << no_version.status();
  o.target.model_version = "1";
  EXPECT_TRUE(Benchmark::Create(o, SteadyClock::Get()).ok());
}

int CountSocketFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    char target[256] = {};
    const std::string path = absl::StrCat("/proc/self/fd/", e->d_name);
    if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 && std::string(target).rfind("socket:", 0) == 0) ++n;
  }
  closedir(dir);
  return n;
}

TEST_F(ChronobenchE2eTest, ConnectionsAreDistinctTcpConnections) {
  const int before = CountSocketFds();
  ASSERT_GE(before, 0);
  auto channels = MakeDistinctChannels(*url_, 3);
  for (const auto& ch : channels) {
    ASSERT_TRUE(ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  }
  EXPECT_GE(CountSocketFds() - before, 3);
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
  EXPECT_NE(dom->second.find("data-breakdown=\"queue,input_stage,h2d,compute,d2h,output_stage,server other,"
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
  for (const char* figure : {"requests", "throughput_rps", "e2e_p50_us"}) {
    EXPECT_EQ(failed[testing::Column(header, figure)], "") << figure << ": nothing was measured";
  }
  EXPECT_NE(ReadAll(html).find("\"failed_point\""), std::string::npos) << "the HTML inlines the partial report";
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
