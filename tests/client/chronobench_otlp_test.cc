// chronobench --traceparent-rate 1 --otlp-endpoint against the real chronoserve binary exporting to
// the same OTLP receiver (tests/telemetry/otlp_receiver, written by others): every traced request
// yields a CLIENT span carrying the traceparent's ids, and the server's span is its child.
#include <signal.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "common/otlp/otlp_grpc_exporter.h"
#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/telemetry/otlp_test_receiver.h"
#include "tools/example_models.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::OtlpTestReceiver;
using chronoserve::testing::ReceivedSpan;
using chronoserve::testing::RunProgram;
using chronoserve::testing::Subprocess;

constexpr int kSpanKindServer = 2;
constexpr int kSpanKindClient = 3;

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "chronobench_otlp_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir != nullptr ? std::string(dir) : "";
}

std::string GrpcAddress(const std::string& log) {
  const std::string marker = "gRPC listening on ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  return log.substr(at + marker.size(), log.find(' ', at + marker.size()) - at - marker.size());
}

TEST(ChronobenchOtlpTest, ClientSpansParentTheServerSpans) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  ASSERT_TRUE(examples::WriteMlp(dir + "/models", "mlp", {}).ok());
  auto receiver = OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto server = Subprocess::Start({CHRONOSERVE_BIN, "--model-repository", dir + "/models", "--grpc-port", "0",
                                   "--warmup-runs", "1", "--otlp-endpoint", (*receiver)->endpoint()});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitForOutput("server READY", absl::Seconds(60)).ok()) << (*server)->output();
  const std::string url = GrpcAddress((*server)->output());
  ASSERT_FALSE(url.empty()) << (*server)->output();

  auto run = RunProgram({CHRONOBENCH_BIN, "-m", "mlp", "-u", url, "--request-rate-range", "100", "-p", "300",
                         "--warmup-requests", "2", "--max-trials", "1",
                         "--traceparent-rate", "1", "--otlp-endpoint", (*receiver)->endpoint()},
                        absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  EXPECT_NE(run->second.find(" 0 dropped (queue full), 0 failed"), std::string::npos) << run->second;
  // The server flushes its spans on a graceful stop; chronobench flushed its own before exiting.
  (*server)->Signal(SIGTERM);
  auto server_exit = (*server)->WaitForExit(absl::Seconds(60));
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
  std::vector<ReceivedSpan> server_spans;
  for (const ReceivedSpan& s : received) {
    if (s.kind == kSpanKindClient) client_spans[s.span_id] = s;
    if (s.kind == kSpanKindServer) server_spans.push_back(s);
  }
  ASSERT_FALSE(client_spans.empty());
  ASSERT_FALSE(server_spans.empty());
  for (const auto& [id, c] : client_spans) {
    EXPECT_EQ(c.name, "ModelInfer mlp");
    EXPECT_EQ(c.parent_span_id, "");
    EXPECT_EQ(c.trace_id.size(), 32u);
    EXPECT_EQ(c.span_id.size(), 16u);
    EXPECT_EQ(c.resource.at("service.name"), "chronobench");
    EXPECT_EQ(c.attributes.at("rpc.system"), "grpc");
    EXPECT_EQ(c.attributes.count("rpc.grpc.status_code"), 1u);  // CANCELLED for calls in flight at the end
    EXPECT_EQ(c.attributes.at("chronoserve.model.name"), "mlp");
    EXPECT_EQ(c.attributes.at("chronoserve.request.items"), "1");
    EXPECT_GT(c.end_ns, c.start_ns);
  }
  // Every server span of a traced request hangs under the client span of that request (same
  // trace, inside its times). chronobench's validation and warm-up requests carry no traceparent:
  // their server spans are roots.
  size_t matched = 0;
  for (const ReceivedSpan& s : server_spans) {
    if (s.parent_span_id.empty()) continue;
    auto it = client_spans.find(s.parent_span_id);
    ASSERT_NE(it, client_spans.end()) << "server span " << s.span_id << " has parent " << s.parent_span_id;
    EXPECT_EQ(s.trace_id, it->second.trace_id);
    EXPECT_GE(s.start_ns, it->second.start_ns);
    EXPECT_LE(s.end_ns, it->second.end_ns);
    ++matched;
  }
  // Client spans of calls cancelled at the end of the run may have no server span; the rest do.
  EXPECT_GE(matched, client_spans.size() / 2) << matched << " of " << client_spans.size();
  EXPECT_GT(matched, 10u);
}

}  // namespace
}  // namespace chronoserve::client::bench
