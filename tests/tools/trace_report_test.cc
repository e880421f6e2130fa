// chronoserve-traces' library: a trace file as the server's exporter writes it (OtlpFileExporter)
// read back and summarised per model, phases by their parent server span, e2e and transport from a
// client span in another file; what other OTLP/JSON writers may do (numbers for 64-bit integers,
// blank lines); a line that is not OTLP/JSON named with its number.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/time/clock.h"
#include "common/otlp/otlp_file_exporter.h"
#include "tests/server/test_repository.h"
#include "tools/traces/trace_report.h"

namespace chronoserve::traces {
namespace {

using ::testing::HasSubstr;

TraceId Id16(uint8_t seed) {
  TraceId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed + i + 1);
  return id;
}
SpanId Id8(uint8_t seed) {
  SpanId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(seed * 16 + i + 1);
  return id;
}

otlp::SpanData Span(const TraceId& trace, const SpanId& id, const SpanId& parent, const char* name, otlp::SpanKind kind,
                    int64_t start_ns, int64_t end_ns, const std::string& model) {
  otlp::SpanData s;
  s.trace_id = trace;
  s.span_id = id;
  s.parent_span_id = parent;
  s.name = name;
  s.kind = kind;
  s.start_unix_ns = start_ns;
  s.end_unix_ns = end_ns;
  s.attributes = {{"chronoserve.model.name", model}};
  return s;
}

// Request `i` of `model`: a client span of 1000+i µs around a server span of 600+i µs whose queue
// takes 100+i µs and compute 300+i µs; every third request's client span is left out.
void AddRequest(int i, const std::string& model, std::vector<otlp::SpanData>* server,
                std::vector<otlp::SpanData>* client) {
  const TraceId trace = Id16(static_cast<uint8_t>(i));
  const SpanId client_id = Id8(static_cast<uint8_t>(3 * i)), server_id = Id8(static_cast<uint8_t>(3 * i + 1));
  const int64_t t0 = 1'796'000'000'000'000'000 + int64_t{i} * 10'000'000;
  const int64_t us = 1000;
  server->push_back(Span(trace, server_id, client_id, ("ModelInfer " + model).c_str(), otlp::SpanKind::kServer,
                         t0 + 200 * us, t0 + (800 + i) * us, model));
  server->push_back(Span(trace, Id8(static_cast<uint8_t>(3 * i + 2)), server_id, "queue", otlp::SpanKind::kInternal,
                         t0 + 210 * us, t0 + (310 + i) * us, model));
  // Id8 repeats every 16 seeds: 3i + 8 differs from the trace's other three ids (3i, 3i+1, 3i+2),
  // as span ids of one trace do (200 + i was request 4's client span id too).
  server->push_back(Span(trace, Id8(static_cast<uint8_t>(3 * i + 8)), server_id, "compute", otlp::SpanKind::kInternal,
                         t0 + 400 * us, t0 + (700 + i) * us, model));
  if (i % 3 != 0) {
    otlp::SpanData c = Span(trace, client_id, SpanId{}, ("ModelInfer " + model).c_str(), otlp::SpanKind::kClient, t0,
                            t0 + (1000 + 2 * i) * us, model);
    client->push_back(c);
  }
}

void Write(const std::string& path, const std::vector<otlp::SpanData>& spans) {
  auto exporter = otlp::OtlpFileExporter::Create(path, otlp::OtlpResource{});
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_TRUE((*exporter)->Export(spans, absl::Now() + absl::Seconds(10)).ok());
}

TEST(TraceReportTest, PhasesOfEachModelFromTheServersFileAndTransportFromTheClients) {
  testing::TempDir dir("cs_trace_report");
  std::vector<otlp::SpanData> server, client;
  for (int i = 1; i <= 9; ++i) AddRequest(i, "mlp", &server, &client);
  AddRequest(10, "other", &server, &client);
  server.back().status = otlp::SpanStatus::kError;  // its compute span: not a server span, no effect
  server[server.size() - 3].status = otlp::SpanStatus::kError;  // other's server span
  Write(dir.path() + "/server.jsonl", server);
  Write(dir.path() + "/client.jsonl", client);

  std::vector<TraceSpan> spans;
  for (const char* file : {"/server.jsonl", "/client.jsonl"}) {
    auto read = ReadTraceFile(dir.path() + file);
    ASSERT_TRUE(read.ok()) << read.status();
    spans.insert(spans.end(), read->begin(), read->end());
  }
  const TraceReport report = SummarizeTraces(spans);
  EXPECT_EQ(report.spans, static_cast<int64_t>(server.size() + client.size()));
  EXPECT_EQ(report.client_spans, static_cast<int64_t>(client.size()));
  ASSERT_EQ(report.models.size(), 2u);
  const ModelTraces& mlp = report.models[0];
  EXPECT_EQ(mlp.model, "mlp");
  EXPECT_EQ(mlp.requests, 9);
  EXPECT_EQ(mlp.errors, 0);
  EXPECT_EQ(mlp.with_client, 6) << "requests 3, 6, 9 have no client span";
  // Server spans 601..609 µs: nearest-rank p50 is the 5th, p99 the 9th.
  EXPECT_DOUBLE_EQ(mlp.phases.at("server").p50_us, 605);
  EXPECT_DOUBLE_EQ(mlp.phases.at("server").p99_us, 609);
  EXPECT_DOUBLE_EQ(mlp.phases.at("server").mean_us, 605);
  EXPECT_DOUBLE_EQ(mlp.phases.at("queue").p50_us, 105);
  EXPECT_DOUBLE_EQ(mlp.phases.at("compute").p50_us, 305);
  // e2e 1000+2i for i in 1,2,4,5,7,8 and transport e2e - server = 400+i.
  EXPECT_EQ(mlp.phases.at("e2e").count, 6);
  EXPECT_DOUBLE_EQ(mlp.phases.at("e2e").p50_us, 1008);
  EXPECT_DOUBLE_EQ(mlp.phases.at("transport").p50_us, 404);
  EXPECT_DOUBLE_EQ(mlp.phases.at("transport").p99_us, 408);
  EXPECT_EQ(mlp.phases.count("h2d"), 0u) << "no request had one";
  EXPECT_EQ(report.models[1].model, "other");
  EXPECT_EQ(report.models[1].errors, 1);

  const std::string table = FormatTraceReport(report);
  EXPECT_THAT(table, HasSubstr("model 'mlp': 9 request(s), 0 error(s), 6 with their client span"));
  EXPECT_THAT(table, HasSubstr("transport"));
  EXPECT_LT(table.find("e2e"), table.find("compute")) << "phases in the order a request meets them";
  const nlohmann::json json = TraceReportJson(report);
  EXPECT_EQ(json["models"][0]["phases"]["compute"]["p50_us"], 305.0);
  EXPECT_EQ(json["models"][0]["with_client"], 6);
}

// --group-by: a model's rows split by an attribute of its server spans, numbers in numeric order.
TEST(TraceReportTest, RowsSplitByAnAttributeOfTheServerSpans) {
  testing::TempDir dir("cs_trace_report");
  std::vector<otlp::SpanData> server, client;
  const int64_t sizes[] = {16, 2, 2, -1};  // -1: no attribute
  for (int i = 0; i < 4; ++i) {
    AddRequest(i + 1, "mlp", &server, &client);
    if (sizes[i] > 0) server[server.size() - 3].attributes.push_back({"chronoserve.batch.size", sizes[i]});
  }
  Write(dir.path() + "/server.jsonl", server);
  auto spans = ReadTraceFile(dir.path() + "/server.jsonl");
  ASSERT_TRUE(spans.ok()) << spans.status();
  const TraceReport report = SummarizeTraces(*spans, "chronoserve.batch.size");
  ASSERT_EQ(report.models.size(), 3u);
  EXPECT_EQ(report.models[0].group_value, "2");
  EXPECT_EQ(report.models[0].requests, 2);
  EXPECT_DOUBLE_EQ(report.models[0].phases.at("server").p99_us, 603) << "requests 2 and 3";
  EXPECT_EQ(report.models[1].group_value, "16");
  EXPECT_EQ(report.models[2].group_value, "(none)");
  EXPECT_THAT(FormatTraceReport(report), HasSubstr("model 'mlp', chronoserve.batch.size=16: 1 request(s)"));
  EXPECT_EQ(TraceReportJson(report)["models"][1]["group"]["chronoserve.batch.size"], "16");
  EXPECT_EQ(SummarizeTraces(*spans).models.size(), 1u) << "not grouped: one row set per model";
}

TEST(TraceReportTest, OtherWritersNumbersAndBlankLinesAreReadAndABadLineIsNamed) {
  testing::TempDir dir("cs_trace_report");
  const std::string path = dir.path() + "/other.jsonl";
  {
    std::ofstream out(path);
    out << "\n"
        << R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102","spanId":"aa","name":"ModelInfer m",)"
        << R"("kind":2,"startTimeUnixNano":1000,"endTimeUnixNano":251000,)"
        << R"("attributes":[{"key":"chronoserve.model.name","value":{"stringValue":"m"}},)"
        << R"({"key":"n","value":{"intValue":7}}]}]}]}]})"
        << "\n";
  }
  auto read = ReadTraceFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].attributes.at("n"), "7");
  const TraceReport report = SummarizeTraces(*read);
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_DOUBLE_EQ(report.models[0].phases.at("server").p50_us, 250);

  {
    std::ofstream out(path, std::ios::app);
    out << R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"bb","name":"x"}]}]}]})" << "\n";
  }
  auto bad = ReadTraceFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("other.jsonl' line 3: span 'x' has no startTimeUnixNano"));
  {
    std::ofstream out(path);
    out << "I1206 a log line\n";
  }
  auto log = ReadTraceFile(path);
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(std::string(log.status().message()), HasSubstr("line 1: not a JSON object (expected OTLP/JSON"));
  EXPECT_EQ(ReadTraceFile(dir.path() + "/missing.jsonl").status().code(), absl::StatusCode::kNotFound);
}


// A torn line (a write cut short, then more lines after it) is skipped and counted; the lines around
// it still count, and an intValue that is negative (chronoserve.gpu on a CPU instance) reads as such.
TEST(TraceReportTest, ATornLineIsSkippedAndCountedAndNegativeIntegersRead) {
  testing::TempDir dir("cs_trace_report");
  const std::string path = dir.path() + "/torn.jsonl";
  const std::string whole = R"({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102","spanId":"aa","name":"ModelInfer m",)"
                            R"("kind":2,"startTimeUnixNano":"1000","endTimeUnixNano":"251000",)"
                            R"("attributes":[{"key":"chronoserve.model.name","value":{"stringValue":"m"}},)"
                            R"({"key":"chronoserve.gpu","value":{"intValue":"-1"}}]}]}]}]})";
  {
    std::ofstream out(path);
    std::string other = whole;  // another span of the trace: a span read twice would count once
    other.replace(other.find(R"("spanId":"aa")"), 13, R"("spanId":"ab")");
    out << whole << "\n" << R"({"resourceSpans":[{"scopeSpans":[{"spa)" << "\n" << other << "\n";
  }
  TornLines torn;
  auto read = ReadTraceFile(path, &torn);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 2u);
  EXPECT_EQ(torn.count, 1);
  EXPECT_EQ(torn.first, 2);
  EXPECT_EQ((*read)[0].attributes.at("chronoserve.gpu"), "-1");
  const TraceReport report = SummarizeTraces(*read, "chronoserve.gpu");
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_EQ(report.models[0].group_value, "-1");
  EXPECT_EQ(report.models[0].requests, 2);
  EXPECT_TRUE(ReadTraceFile(path).ok()) << "counting torn lines is optional";
}

// A span of model "m" (server spans, kind 2, carry the model's name).
TraceSpan ModelSpan(const std::string& trace, const std::string& id, const std::string& parent, int kind,
                    const std::string& name, int64_t start, int64_t end, int status) {
  TraceSpan s;
  s.trace_id = trace;
  s.span_id = id;
  s.parent_span_id = parent;
  s.kind = kind;
  s.name = name;
  s.start_ns = start;
  s.end_ns = end;
  s.status = status;
  if (kind == 2) s.attributes["chronoserve.model.name"] = "m";
  return s;
}

// One file given twice: each span counts once (requests and phases agree), and the report says so.
// Ids join within their trace only. A cancelled call's client span (status error) and a client span
// over several server spans give no e2e or transport: neither times its server span.
TEST(TraceReportTest, DuplicatesCountOnceAndOnlyAnOkOneToOneClientSpanGivesE2e) {
  const auto span = ModelSpan;
  std::vector<TraceSpan> spans = {
      // Trace t1: an OK client call, its server span and a queue phase.
      span("t1", "c1", "", 3, "ModelInfer m", 0, 1000, 0),
      span("t1", "s1", "c1", 2, "ModelInfer m", 100, 900, 0),
      span("t1", "q1", "s1", 1, "queue", 100, 200, 0),
      // Trace t2: a cancelled call whose server span outlived its client span.
      span("t2", "c1", "", 3, "ModelInfer m", 0, 100, 2),
      span("t2", "s1", "c1", 2, "ModelInfer m", 50, 700, 0),
      // Trace t3: one client span over two server spans (a stream's metadata traceparent).
      span("t3", "c3", "", 3, "ModelStreamInfer m", 0, 5000, 0),
      span("t3", "s3", "c3", 2, "ModelStreamInfer m", 100, 600, 0),
      span("t3", "s4", "c3", 2, "ModelStreamInfer m", 700, 1200, 0),
  };
  const std::vector<TraceSpan> once = spans;
  spans.insert(spans.end(), once.begin(), once.end());  // the same file given twice
  const TraceReport report = SummarizeTraces(spans);
  EXPECT_EQ(report.spans, 16);
  EXPECT_EQ(report.duplicates, 8);
  EXPECT_EQ(report.client_spans, 3);
  ASSERT_EQ(report.models.size(), 1u);
  const ModelTraces& m = report.models[0];
  EXPECT_EQ(m.requests, 4);
  EXPECT_EQ(m.with_client, 1) << "only t1's client span times its server span";
  EXPECT_EQ(m.phases.at("server").count, 4);
  EXPECT_EQ(m.phases.at("queue").count, 1) << "t1's queue, once; no other trace's s1 takes it";
  EXPECT_EQ(m.phases.at("e2e").count, 1);
  EXPECT_EQ(m.phases.at("transport").count, 1);
  EXPECT_EQ(m.phases.at("transport").p50_us, 0.2) << "1000 - 800 ns, never negative";
  EXPECT_NE(FormatTraceReport(report).find("8 span(s) read twice"), std::string::npos);
  EXPECT_EQ(report.id_collisions, 0);
}

// Two runs that drew the same trace and span ids (appended to the same files): not a file given
// twice. Each server span joins the client span whose time holds it; where two client spans hold a
// server span, it joins none.
TEST(TraceReportTest, TwoRunsWithTheSameIdsJoinEachServerSpanToTheClientSpanThatHoldsIt) {
  auto span = [](const std::string& trace, const std::string& id, const std::string& parent, int kind, int64_t start,
                 int64_t end) { return ModelSpan(trace, id, parent, kind, "ModelInfer m", start, end, 0); };
  const std::vector<TraceSpan> spans = {
      span("t", "c", "", 3, 0, 1000),              // run 1
      span("t", "s1", "c", 2, 100, 900),
      span("t", "c", "", 3, 50000, 51200),         // run 2: the same ids
      span("t", "s2", "c", 2, 50100, 51000),
      span("u", "c", "", 3, 0, 1000),              // trace u: two client spans that both hold s3
      span("u", "c", "", 3, 10, 2000),
      span("u", "s3", "c", 2, 100, 900),
  };
  const TraceReport report = SummarizeTraces(spans);
  EXPECT_EQ(report.duplicates, 0);
  EXPECT_EQ(report.id_collisions, 2);
  EXPECT_EQ(report.client_spans, 4);
  ASSERT_EQ(report.models.size(), 1u);
  const ModelTraces& m = report.models[0];
  EXPECT_EQ(m.requests, 3);
  EXPECT_EQ(m.with_client, 2) << "s1 and s2, each by its own client span's time; not s3";
  ASSERT_EQ(m.phases.count("e2e"), 1u);
  EXPECT_EQ(m.phases.at("e2e").count, 2);
  EXPECT_EQ(m.phases.at("transport").p50_us, 0.2) << "1000 - 800 and 1200 - 900 ns";
  const std::string text = FormatTraceReport(report);
  EXPECT_EQ(text.find("read twice"), std::string::npos) << text;
  EXPECT_NE(text.find("2 span(s) carry the trace and span id of another, different span"), std::string::npos) << text;
  EXPECT_EQ(TraceReportJson(report)["id_collisions"], 2);

  // The same file given twice as well: every second copy is a duplicate of its own span, not a
  // collision with the first span of its ids, and the joins are as before.
  std::vector<TraceSpan> twice = spans;
  twice.insert(twice.end(), spans.begin(), spans.end());
  const TraceReport both = SummarizeTraces(twice);
  EXPECT_EQ(both.duplicates, 7);
  EXPECT_EQ(both.id_collisions, 2);
  EXPECT_EQ(both.client_spans, 4);
  ASSERT_EQ(both.models.size(), 1u);
  EXPECT_EQ(both.models[0].with_client, 2);
}

}  // namespace
}  // namespace chronoserve::traces
