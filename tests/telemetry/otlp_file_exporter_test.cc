// OtlpFileExporter (--trace-file): what it writes is read back by decoders chronoserve did not write
// (nlohmann's and protobuf's JSON parsers, tests/telemetry/otlp_json_file.h) and equals the OTLP
// request the gRPC exporter sends; it appends across restarts; a path it cannot open is an error
// naming it, a write that fails is counted as lost, and one that fails part way leaves no torn line
// for the next to land on.
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "common/otlp/batch_span_processor.h"
#include "common/otlp/otlp_encoder.h"
#include "common/otlp/otlp_file_exporter.h"
#include "server/telemetry/request_tracer.h"
#include "tests/fakes/finishes_within.h"
#include "tests/server/test_repository.h"
#include "tests/telemetry/otlp_json_file.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::OtlpFileExporter;
using otlp::SpanData;

otlp::OtlpResource Resource() {
  otlp::OtlpResource r;
  r.service_name = "file-test";
  r.service_version = "9.9";
  r.attributes = {{"deployment.environment", "lab"}};
  return r;
}

// A span with every field the server sets: a parent, a tracestate, each attribute type, an error.
SpanData FullSpan(const TraceId& trace, const char* name) {
  SpanData s;
  s.trace_id = trace;
  s.span_id = NewSpanId();
  s.parent_span_id = NewSpanId();
  s.trace_state = "vendor=a1,other=b2";
  s.flags = kTraceFlagSampled | otlp::kSpanFlagsContextHasIsRemote | otlp::kSpanFlagsContextIsRemote;
  s.name = name;
  s.kind = otlp::SpanKind::kServer;
  s.start_unix_ns = 1'796'000'000'123'456'789;
  s.end_unix_ns = 1'796'000'000'124'000'001;
  s.attributes = {{"an.int", int64_t{-42}}, {"a.big.int", int64_t{9'007'199'254'740'993}}, {"a.bool", true},
                  {"a.string", std::string("ok \"quoted\" \xc3\xa9")}, {"a.double", 0.25}, {"a.precise.double", 0.1 + 0.2}, {"a.huge.double", -1.5e300}};
  s.status = otlp::SpanStatus::kError;
  s.status_message = "boom";
  return s;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(OtlpFileExporterTest, EachExportIsOneLineThatDecodesToTheOtlpRequest) {
  testing::TempDir dir("cs_trace_file");
  const std::string path = dir.path() + "/spans.jsonl";
  auto exporter = OtlpFileExporter::Create(path, Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const TraceId trace = NewTraceId();
  const std::vector<SpanData> first = {FullSpan(trace, "ModelInfer mlp"), FullSpan(trace, "compute")};
  const std::vector<SpanData> second = {FullSpan(NewTraceId(), "ModelInfer other")};
  ASSERT_TRUE((*exporter)->Export(first, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE((*exporter)->Export(second, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE((*exporter)->Export({}, absl::Now() + absl::Seconds(10)).ok()) << "nothing to write is no error";

  auto requests = testing::ReadOtlpJsonFile(path);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2u) << "one line per export, none for an empty one";
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*requests)[0], otlp::EncodeExportRequest(Resource(), first)));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*requests)[1], otlp::EncodeExportRequest(Resource(), second)));

  const std::vector<testing::ReceivedSpan> spans = testing::SpansOf(*requests);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].trace_id, ToHex(trace));
  EXPECT_EQ(spans[0].span_id, ToHex(first[0].span_id));
  EXPECT_EQ(spans[0].parent_span_id, ToHex(first[0].parent_span_id));
  EXPECT_EQ(spans[0].attributes.at("a.big.int"), "9007199254740993") << "64-bit integers keep every digit";
  EXPECT_EQ(spans[0].resource.at("service.name"), "file-test");
  EXPECT_EQ(spans[0].resource.at("deployment.environment"), "lab");

  // The text itself, as an OTLP/JSON reader sees it: hex ids, integer enums, nanoseconds as strings.
  const std::string text = ReadAll(path);
  const nlohmann::json line = nlohmann::json::parse(text.substr(0, text.find('\n')));
  const nlohmann::json& span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  EXPECT_EQ(span["traceId"], ToHex(trace));
  EXPECT_EQ(span["kind"], 2);
  EXPECT_EQ(span["status"]["code"], 2);
  EXPECT_EQ(span["startTimeUnixNano"], "1796000000123456789");
  EXPECT_EQ(span["traceState"], "vendor=a1,other=b2");
  EXPECT_EQ(span["flags"], 0x301);
}

TEST(OtlpFileExporterTest, ARestartAppendsToTheFile) {
  testing::TempDir dir("cs_trace_file");
  const std::string path = dir.path() + "/spans.jsonl";
  for (int run = 0; run < 2; ++run) {
    auto exporter = OtlpFileExporter::Create(path, Resource());
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    ASSERT_TRUE((*exporter)->Export({FullSpan(NewTraceId(), "run")}, absl::Now() + absl::Seconds(10)).ok());
  }
  auto requests = testing::ReadOtlpJsonFile(path);
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(requests->size(), 2u);
}

TEST(OtlpFileExporterTest, APathThatCannotBeOpenedIsAnErrorNamingIt) {
  testing::TempDir dir("cs_trace_file");
  for (const std::string& path : {dir.path() + "/no/such/dir/spans.jsonl", dir.path()}) {
    auto exporter = OtlpFileExporter::Create(path, Resource());
    ASSERT_FALSE(exporter.ok()) << path;
    EXPECT_EQ(exporter.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(exporter.status().message().find("'" + path + "' cannot be opened"), std::string::npos)
        << exporter.status();
  }
  EXPECT_FALSE(OtlpFileExporter::Create("", Resource()).ok());
}

TEST(OtlpFileExporterTest, AFailedWriteIsCountedAsLostAndAShutDownExporterRefuses) {
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  auto exporter = OtlpFileExporter::Create("/dev/full", Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::StatusOr<otlp::ExportResult> direct =
      (*exporter)->Export({FullSpan(NewTraceId(), "x")}, absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("'/dev/full': writing 1 spans failed"), std::string::npos) << direct.status();

  otlp::BatchSpanProcessorOptions options;
  options.schedule_delay = absl::Hours(1);
  otlp::BatchSpanProcessor processor(*std::move(exporter), options);
  processor.Start();
  ASSERT_TRUE(processor.OnEnd({FullSpan(NewTraceId(), "a"), FullSpan(NewTraceId(), "b")}));
  processor.ForceFlush(absl::Now() + absl::Seconds(30));
  processor.Shutdown(absl::Now() + absl::Seconds(10));
  const otlp::SpanProcessorStats s = processor.stats();
  EXPECT_EQ(s.export_failed, 2u);
  EXPECT_EQ(s.exported, 0u);

  testing::TempDir dir("cs_trace_file");
  auto closed = OtlpFileExporter::Create(dir.path() + "/spans.jsonl", Resource());
  ASSERT_TRUE(closed.ok()) << closed.status();
  (*closed)->Shutdown();
  EXPECT_EQ((*closed)->Export({FullSpan(NewTraceId(), "late")}, absl::Now() + absl::Seconds(10)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A pipe whose reader is gone fails the export (EPIPE) instead of ending the process with SIGPIPE,
// even where nothing ignores that signal (the server with --allow-metrics false).
TEST(OtlpFileExporterTest, APipeWhoseReaderIsGoneFailsTheExportNotTheProcess) {
  testing::TempDir dir("cs_trace_pipe_gone");
  const std::string fifo = dir.path() + "/spans.pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  auto exporter = OtlpFileExporter::Create(fifo, Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ::close(reader);
  struct sigaction dfl = {}, before = {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &before), 0);
  const auto failed = (*exporter)->Export({FullSpan(NewTraceId(), "after")}, absl::Now() + absl::Seconds(5));
  ::sigaction(SIGPIPE, &before, nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(failed.status().message().find(std::strerror(EPIPE)), std::string::npos) << failed.status();
  sigset_t pending;
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "no SIGPIPE left pending to strike later";
}

// A pipe whose reader stops reading (--trace-file /dev/stdout into a stalled consumer) holds no
// export past its deadline, and Shutdown ends a waiting one at once: before, the write blocked the
// export thread, and with it the server's exit, for as long as the reader stalled.
TEST(OtlpFileExporterTest, APipeThatTakesNoMoreFailsTheExportAtItsDeadlineOrAtShutdown) {
  testing::TempDir dir("cs_trace_pipe");
  const std::string fifo = dir.path() + "/spans.pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // opens, then never reads
  ASSERT_GE(reader, 0);
  auto exporter = OtlpFileExporter::Create(fifo, Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  std::vector<SpanData> spans;
  for (int i = 0; i < 400; ++i) spans.push_back(FullSpan(NewTraceId(), "fill"));  // ~200 KB a line: past the pipe's 64 KiB
  const absl::Time start = absl::Now();
  const auto stalled = (*exporter)->Export(spans, absl::Now() + absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(stalled.ok());
  EXPECT_EQ(stalled.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(stalled.status().message().find("its reader took no more before the export's deadline"), std::string::npos)
      << stalled.status();
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(10)) << "bounded by the deadline";

  // Empty the pipe, then see the next export's first bytes arrive: it is then waiting for room.
  char sink[65536];
  while (::read(reader, sink, sizeof(sink)) > 0) {
  }
  absl::StatusOr<otlp::ExportResult> waiting;
  std::atomic<bool> returned{false};
  std::thread exporting([&] {
    waiting = (*exporter)->Export(spans, absl::Now() + absl::Hours(1));
    returned.store(true);
  });
  struct pollfd readable = {reader, POLLIN, 0};
  EXPECT_EQ(::poll(&readable, 1, 10000), 1) << "the export never wrote into the pipe";
  int queued = 0;
  EXPECT_EQ(::ioctl(reader, FIONREAD, &queued), 0);
  EXPECT_GT(queued, 0) << "the export never wrote into the pipe";
  const absl::Time shut = absl::Now();
  (*exporter)->Shutdown();
  testing::FinishesWithin("an export waiting for the pipe, after Shutdown", absl::Seconds(10),
                          [&] { exporting.join(); });
  EXPECT_LT(absl::Now() - shut, absl::Seconds(5)) << "Shutdown must end a waiting export";
  ASSERT_TRUE(returned.load());
  ASSERT_FALSE(waiting.ok());
  EXPECT_NE(waiting.status().message().find("before the exporter was shut down"), std::string::npos) << waiting.status();
  ::close(reader);
}


// A write cut short (a size limit, as a full disk does: some bytes, then an error) is cut back off the
// file, so the line written after it, once there is room, is whole and readable.
TEST(OtlpFileExporterTest, AWriteThatFailsPartWayIsCutBackAndTheNextLineIsWhole) {
  testing::TempDir dir("cs_trace_file");
  const std::string path = dir.path() + "/spans.jsonl";
  auto exporter = OtlpFileExporter::Create(path, Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const std::vector<SpanData> first = {FullSpan(NewTraceId(), "first")};
  ASSERT_TRUE((*exporter)->Export(first, absl::Now() + absl::Seconds(10)).ok());
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);

  // This process may grow a file to 100 bytes past the first line; the next export needs more.
  // SIGXFSZ ignored: the write past the limit then fails with EFBIG instead of ending the process.
  rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct sigaction ignore = {}, old_action = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  rlimit limited = saved;
  limited.rlim_cur = static_cast<rlim_t>(before.st_size) + 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  const absl::StatusOr<otlp::ExportResult> cut =
      (*exporter)->Export({FullSpan(NewTraceId(), "cut"), FullSpan(NewTraceId(), "cut")}, absl::Now() + absl::Seconds(10));
  struct stat after_cut;
  const int stat_rc = ::stat(path.c_str(), &after_cut);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_EQ(::sigaction(SIGXFSZ, &old_action, nullptr), 0);

  ASSERT_FALSE(cut.ok()) << "the line does not fit under the limit";
  EXPECT_NE(cut.status().message().find("writing 2 spans failed"), std::string::npos) << cut.status();
  ASSERT_EQ(stat_rc, 0);
  EXPECT_EQ(after_cut.st_size, before.st_size) << "the 100 bytes that fitted were cut back off";

  const std::vector<SpanData> third = {FullSpan(NewTraceId(), "third")};
  ASSERT_TRUE((*exporter)->Export(third, absl::Now() + absl::Seconds(10)).ok());
  auto requests = testing::ReadOtlpJsonFile(path);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*requests)[0], otlp::EncodeExportRequest(Resource(), first)));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*requests)[1], otlp::EncodeExportRequest(Resource(), third)));
}

// A file that ends inside a line (a server killed while writing): a restart's first line starts on a
// line of its own instead of finishing the torn one.
TEST(OtlpFileExporterTest, AFileEndingInsideALineGetsTheNextLineOnALineOfItsOwn) {
  testing::TempDir dir("cs_trace_file");
  const std::string path = dir.path() + "/spans.jsonl";
  const std::string torn = R"({"resourceSpans":[{"resource":{"attr)";
  {
    std::ofstream out(path, std::ios::binary);
    out << torn;
  }
  auto exporter = OtlpFileExporter::Create(path, Resource());
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const std::vector<SpanData> spans = {FullSpan(NewTraceId(), "after restart")};
  ASSERT_TRUE((*exporter)->Export(spans, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_TRUE((*exporter)->Export(spans, absl::Now() + absl::Seconds(10)).ok());

  const std::string text = ReadAll(path);
  ASSERT_EQ(text.substr(0, torn.size() + 1), torn + "\n");
  std::istringstream lines(text.substr(torn.size() + 1));
  std::string line;
  int whole = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(request.is_discarded()) << line;
    EXPECT_EQ(request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"], "after restart");
    ++whole;
  }
  EXPECT_EQ(whole, 2) << "only the first export needed the fresh line";
}

}  // namespace
}  // namespace chronoserve::server::telemetry
