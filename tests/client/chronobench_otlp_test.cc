// chronobench --traceparent-rate 1 --otlp-endpoint against the real chronoserve binary exporting to
// the same OTLP receiver (tests/telemetry/otlp_receiver, written by others): every traced request,
// unary or streamed, yields a CLIENT span carrying the traceparent's ids, and the server's span is
// its child; streamed requests cancelled at the end of a point say CANCELLED; no two requests, of
// one point or of two points of a sweep, share a trace or span id. With --trace-file on both
// processes, the two files join offline as the receiver's spans do.
#include <signal.h>

#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/otlp/otlp_grpc_exporter.h"
#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tests/fakes/wall_clock_jumps.h"
#include "tests/telemetry/otlp_json_file.h"
#include "tests/telemetry/otlp_test_receiver.h"
#include "tools/example_models.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::OtlpTestReceiver;
using chronoserve::testing::ReceivedSpan;
using chronoserve::testing::RunProgram;
using chronoserve::testing::StartTestServer;
using chronoserve::testing::TestDir;
using chronoserve::testing::WallClockJumps;

constexpr int kSpanKindServer = 2;
constexpr int kSpanKindClient = 3;

std::string Attribute(const ReceivedSpan& span, const std::string& key) {
  auto it = span.attributes.find(key);
  return it != span.attributes.end() ? it->second : "";
}

TEST(ChronobenchOtlpTest, ClientSpansParentTheServerSpans) {
  absl::StatusOr<TestDir> test_dir = TestDir::Create("chronobench_otlp");  // outlives the server below
  ASSERT_TRUE(test_dir.ok()) << test_dir.status();
  const std::string dir = test_dir->path();
  ASSERT_TRUE(examples::WriteMlp(dir + "/models", "mlp", {}).ok());
  auto receiver = OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto server = StartTestServer(dir + "/models", {"--otlp-endpoint", (*receiver)->endpoint()});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string url = server->url;
  WallClockJumps jumps;  // while both runs go on: the spans' Unix times are read then

  // Two points: their workers are built afresh, and must not draw the first point's ids again.
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", url, "--request-rate-range", "100:150:50", "-p", "300",
                         "--warmup-requests", "2", "--max-trials", "1",
                         "--traceparent-rate", "1", "--otlp-endpoint", (*receiver)->endpoint()},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  EXPECT_NE(run->second.find(" 0 dropped (queue full or at shutdown), 0 failed"), std::string::npos) << run->second;
  // Streamed, batch 2 (so its spans are told apart by chronoserve.request.items), 16 in flight on
  // one stream: when the point ends requests are still queued on the server and are cancelled.
  // The same seed as the first run (the default): its trace and span ids must still be its own, or
  // the two runs' spans would join to each other's.
  auto streamed = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", url, "--streaming", "-b", "2", "--threads", "1",
                              "--concurrency-range", "16", "-p", "100", "--warmup-requests", "2", "--max-trials", "1",
                              "--traceparent-rate", "1", "--otlp-endpoint", (*receiver)->endpoint()},
                             absl::Seconds(120));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_EQ(streamed->first, 0) << streamed->second;
  EXPECT_NE(streamed->second.find(" 0 dropped (queue full or at shutdown), 0 failed"), std::string::npos) << streamed->second;
  jumps.Stop();
  // The server flushes its spans on a graceful stop; chronobench flushed its own before exiting.
  server->process->Signal(SIGTERM);
  auto server_exit = server->process->WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(server_exit.ok()) << server_exit.status();

  // Both exporters were answered before their processes exited; a sentinel exported now is printed
  // after all their spans, so once it is read every span is.
  otlp::OtlpGrpcExporterOptions sentinel_options;
  sentinel_options.endpoint = (*receiver)->endpoint();
  auto sentinel_exporter = otlp::OtlpGrpcExporter::Create(sentinel_options);
  ASSERT_TRUE(sentinel_exporter.ok()) << sentinel_exporter.status();
  otlp::SpanData sentinel;
  sentinel.trace_id[0] = sentinel.span_id[0] = 1;
  sentinel.name = "sentinel";
  ASSERT_TRUE((*sentinel_exporter)->Export({sentinel}, absl::Now() + absl::Seconds(30)).ok());
  std::vector<ReceivedSpan> received;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (received.empty() || received.back().name != "sentinel") {
    ASSERT_TRUE((*receiver)->WaitForSpans(received.size() + 1, deadline - absl::Now())) << "no sentinel span";
    received = (*receiver)->spans();
  }

  std::map<std::string, ReceivedSpan> client_spans;  // by span id
  std::set<std::string> client_trace_ids;
  std::vector<ReceivedSpan> server_spans;
  for (const ReceivedSpan& s : received) {
    if (s.kind == kSpanKindClient) {
      // Every traced request has ids of its own, across both runs and both points of the first.
      EXPECT_TRUE(client_spans.emplace(s.span_id, s).second) << "CLIENT span id " << s.span_id << " twice";
      EXPECT_TRUE(client_trace_ids.insert(s.trace_id).second) << "CLIENT trace id " << s.trace_id << " twice";
    }
    if (s.kind == kSpanKindServer) server_spans.push_back(s);
  }
  ASSERT_FALSE(client_spans.empty());
  ASSERT_FALSE(server_spans.empty());
  // The streamed requests answered say OK; those in flight when the point ended, CANCELLED (not
  // the OK of a call that was never answered).
  std::map<std::string, int> streamed_by_code;
  for (const auto& [id, c] : client_spans) {
    if (Attribute(c, "chronoserve.request.items") == "2") ++streamed_by_code[Attribute(c, "rpc.grpc.status_code")];
  }
  EXPECT_GT(streamed_by_code["0"], 10);
  EXPECT_GT(streamed_by_code["1"], 0) << "no streamed request was cancelled at the end of the point";
  for (const auto& [code, n] : streamed_by_code) EXPECT_TRUE(code == "0" || code == "1") << n << " with code " << code;
  for (const auto& [id, c] : client_spans) {
    // The unary run sent batch 1, the streamed one batch 2: the span names the RPC that carried it.
    const bool streamed = Attribute(c, "chronoserve.request.items") == "2";
    EXPECT_EQ(c.name, streamed ? "ModelStreamInfer mlp" : "ModelInfer mlp");
    EXPECT_EQ(Attribute(c, "rpc.method"), streamed ? "ModelStreamInfer" : "ModelInfer");
    EXPECT_EQ(c.parent_span_id, "");
    EXPECT_EQ(c.trace_id.size(), 32u);
    EXPECT_EQ(c.span_id.size(), 16u);
    EXPECT_EQ(c.resource.at("service.name"), "chronobench");
    EXPECT_EQ(c.resource.count("service.version"), 1u) << "as the server's resource has";
    EXPECT_EQ(c.flags, 0x101u) << "sampled, and a root: its parent known not to be remote";
    EXPECT_EQ(c.attributes.at("rpc.system"), "grpc");
    EXPECT_EQ(c.attributes.count("rpc.grpc.status_code"), 1u);  // CANCELLED for calls in flight at the end
    EXPECT_EQ(c.attributes.at("chronoserve.model.name"), "mlp");
    EXPECT_TRUE(Attribute(c, "chronoserve.request.items") == "1" || Attribute(c, "chronoserve.request.items") == "2")
        << Attribute(c, "chronoserve.request.items");
    EXPECT_GT(c.end_ns, c.start_ns);
  }
  // Every server span of a traced request hangs under the client span of that request (same
  // trace, inside its times, give or take any jump of the wall clock near them: chronobench read the
  // wall clock at the send, chronoserve when the request was done). chronobench's validation and
  // warm-up requests carry no traceparent: their server spans are roots.
  std::map<std::string, size_t> matched;  // by chronoserve.request.items: unary "1", streamed "2"
  for (const ReceivedSpan& s : server_spans) {
    if (s.parent_span_id.empty()) continue;
    auto it = client_spans.find(s.parent_span_id);
    ASSERT_NE(it, client_spans.end()) << "server span " << s.span_id << " has parent " << s.parent_span_id;
    EXPECT_EQ(s.trace_id, it->second.trace_id);
    // A cancelled call's client span ends at the cancellation; the server may finish after it.
    if (Attribute(it->second, "rpc.grpc.status_code") != "0") continue;
    const int64_t jumped = jumps.Near(it->second.start_ns, it->second.end_ns);
    EXPECT_GE(s.start_ns, it->second.start_ns - jumped) << "the wall clock jumped " << jumped << " ns near it";
    EXPECT_LE(s.end_ns, it->second.end_ns + jumped) << "the wall clock jumped " << jumped << " ns near it";
    ++matched[Attribute(it->second, "chronoserve.request.items")];
  }
  // Client spans of calls cancelled at the end of the run may have no server span; the rest of the
  // unary run's do. The streamed burst outruns the server's span queue (it drops and counts), so of
  // its spans only some arrive.
  size_t unary = 0;
  for (const auto& [id, c] : client_spans) unary += Attribute(c, "chronoserve.request.items") == "1" ? 1 : 0;
  EXPECT_GE(matched["1"], unary / 2) << matched["1"] << " of " << unary;
  EXPECT_GT(matched["1"], 10u);
  EXPECT_GT(matched["2"], 0u);
}

// --trace-file on chronoserve and chronobench, no collector anywhere: once both have exited, each
// file decodes (tests/telemetry/otlp_json_file.h: nlohmann's and protobuf's JSON parsers), every
// CLIENT span of chronobench's file has its request's server span in chronoserve's, as its child,
// and that span's phases beside it in the same trace. 400 requests a second, 9 server spans each,
// into span queues of 65536 (OTEL_BSP_MAX_QUEUE_SIZE in both processes' environment): none is
// dropped and every request joins, even when a busy box starves an exporting thread for seconds.
TEST(ChronobenchOtlpTest, TraceFilesOfBothProcessesJoinOffline) {
  const std::vector<std::string> big_queues = {"OTEL_BSP_MAX_QUEUE_SIZE=65536"};
  absl::StatusOr<TestDir> test_dir = TestDir::Create("chronobench_trace_files");  // outlives the server
  ASSERT_TRUE(test_dir.ok()) << test_dir.status();
  const std::string dir = test_dir->path();
  ASSERT_TRUE(examples::WriteMlp(dir + "/models", "mlp", {}).ok());
  const std::string server_file = dir + "/server.jsonl";
  const std::string client_file = dir + "/client.jsonl";
  auto server = StartTestServer(dir + "/models", {"--trace-file", server_file}, absl::Seconds(60), big_queues);
  ASSERT_TRUE(server.ok()) << server.status();
  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", server->url, "--request-rate-range", "400", "-p", "1000",
                         "--warmup-requests", "2", "--max-trials", "1", "--traceparent-rate", "1", "--trace-file",
                         client_file},
                        absl::Seconds(120), big_queues);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  EXPECT_NE(run->second.find("client spans to file " + client_file + ": "), std::string::npos) << run->second;
  EXPECT_NE(run->second.find(" 0 dropped (queue full or at shutdown), 0 failed"), std::string::npos) << run->second;
  server->process->Signal(SIGTERM);  // the server writes what it holds as it stops
  auto server_exit = server->process->WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(server_exit.ok()) << server_exit.status();
  EXPECT_EQ(*server_exit, 0) << server->process->output();
  const std::string server_log = server->process->output();
  EXPECT_NE(server_log.find("tracing: OTLP/JSON lines appended to " + server_file), std::string::npos) << server_log;
  EXPECT_NE(server_log.find(" 0 dropped, 0 lost to failed exports"), std::string::npos) << server_log;

  auto client_requests = chronoserve::testing::ReadOtlpJsonFile(client_file);
  ASSERT_TRUE(client_requests.ok()) << client_requests.status();
  auto server_requests = chronoserve::testing::ReadOtlpJsonFile(server_file);
  ASSERT_TRUE(server_requests.ok()) << server_requests.status();
  std::map<std::string, ReceivedSpan> client_spans;  // by span id
  for (const ReceivedSpan& c : chronoserve::testing::SpansOf(*client_requests)) {
    EXPECT_EQ(c.kind, kSpanKindClient);
    EXPECT_EQ(c.resource.at("service.name"), "chronobench");
    EXPECT_EQ(c.name, "ModelInfer mlp");
    EXPECT_EQ(Attribute(c, "rpc.grpc.status_code"), "0");
    client_spans.emplace(c.span_id, c);
  }
  ASSERT_GE(client_spans.size(), 300u) << "every measured request carried a traceparent";
  std::map<std::string, ReceivedSpan> server_roots;          // by span id: the server spans of traced requests
  std::map<std::string, std::set<std::string>> phase_names;  // by trace id
  for (const ReceivedSpan& s : chronoserve::testing::SpansOf(*server_requests)) {
    EXPECT_EQ(s.resource.at("service.name"), "chronoserve");
    if (s.kind == kSpanKindServer && client_spans.count(s.parent_span_id) == 1) server_roots.emplace(s.span_id, s);
    if (s.kind != kSpanKindServer) phase_names[s.trace_id].insert(s.name);
  }
  size_t joined = 0;
  for (const auto& [id, root] : server_roots) {
    const ReceivedSpan& client = client_spans.at(root.parent_span_id);
    EXPECT_EQ(root.trace_id, client.trace_id);
    EXPECT_EQ(root.name, "ModelInfer mlp");
    for (const char* phase : {"queue", "compute", "handback"}) {
      EXPECT_EQ(phase_names[root.trace_id].count(phase), 1u) << phase << " missing in trace " << root.trace_id;
    }
    ++joined;
  }
  EXPECT_EQ(joined, client_spans.size()) << "a client span whose request's server span is not in the server's file";

  // chronoserve-traces reads both files back into where the time went, transport included.
  const std::string json_path = dir + "/report.json";
  auto report = RunProgram({CHRONOSERVE_TRACES_BIN, server_file, client_file, "--json", json_path}, absl::Seconds(60));
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->first, 0) << report->second;
  EXPECT_NE(report->second.find("model 'mlp': "), std::string::npos) << report->second;
  EXPECT_NE(report->second.find(absl::StrCat(joined, " with their client span")), std::string::npos) << report->second;
  std::ifstream json_file(json_path);
  const nlohmann::json json = nlohmann::json::parse(json_file, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(json.is_object()) << "no JSON report";
  ASSERT_EQ(json["models"].size(), 1u);
  const nlohmann::json& phases = json["models"][0]["phases"];
  EXPECT_EQ(phases["transport"]["count"], joined);
  EXPECT_GT(phases["transport"]["p50_us"].get<double>(), 0.0);
  EXPECT_GT(phases["e2e"]["p50_us"].get<double>(), phases["server"]["p50_us"].get<double>());
  EXPECT_GT(phases["compute"]["p50_us"].get<double>(), 0.0);

  // A --json that names a trace file read (here by another path to it) is refused before anything
  // is read or written: the data stays. So is one that cannot be written.
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string client_before = slurp(client_file);
  const std::string same_file = dir + "/./" + client_file.substr(client_file.rfind('/') + 1);
  auto onto_input = RunProgram({CHRONOSERVE_TRACES_BIN, server_file, client_file, "--json", same_file}, absl::Seconds(60));
  ASSERT_TRUE(onto_input.ok()) << onto_input.status();
  EXPECT_EQ(onto_input->first, 2) << onto_input->second;
  EXPECT_NE(onto_input->second.find(absl::StrCat("--json '", same_file, "' is the trace file '", client_file, "'")),
            std::string::npos)
      << onto_input->second;
  EXPECT_EQ(slurp(client_file), client_before) << "the trace file must be left as it was";
  auto nowhere = RunProgram({CHRONOSERVE_TRACES_BIN, server_file, "--json", dir + "/no/such/dir/r.json"}, absl::Seconds(60));
  ASSERT_TRUE(nowhere.ok()) << nowhere.status();
  EXPECT_EQ(nowhere->first, 2) << nowhere->second;
  EXPECT_NE(nowhere->second.find("does not exist"), std::string::npos) << nowhere->second;
}

}  // namespace
}  // namespace chronoserve::client::bench
