// TraceSetting's trace_file on a server started with no trace destination (no collector, no
// --trace-file) and --trace-file-dir: naming a file in the directory with trace_level TIMESTAMPS
// starts tracing into it, and naming another moves the spans there (Triton's
// update_trace_settings(settings={"trace_file": ...})). Every span of a request lies in the file
// current when the request finished. A path, a link or a pipe is refused. The files are read by
// decoders chronoserve did not write (tests/telemetry/otlp_json_file.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "client/inference_client.h"
#include "common/traceparent.h"
#include "server/server.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/telemetry/otlp_json_file.h"
#include "tests/telemetry/telemetry_server_fixture.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using server::telemetry::Telemetry;
using server::telemetry::TelemetryOptions;

class TraceFileAtRunTimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    examples::ModelOptions mlp;
    mlp.max_batch_size = 8;
    mlp.instance_kind = "KIND_CPU";
    ASSERT_TRUE(examples::WriteMlp(repo_.path(), "mlp", mlp).ok());
    TelemetryOptions options;  // tracing.enabled false: no collector, no file
    options.tracing.exporter.resource.service_name = "chronoserve-test";
    options.tracing.processor.schedule_delay = absl::Milliseconds(20);
    options.metrics.enabled = false;
    options.gpu.enabled = false;
    options.trace_file_dir = out_.path();
    auto telemetry = Telemetry::Create(options);
    ASSERT_TRUE(telemetry.ok()) << telemetry.status();
    telemetry_ = *std::move(telemetry);
    server::ServerOptions server_options;
    server_options.model_repository = repo_.path();
    server_options.grpc_port = 0;
    server_options.exit_timeout_secs = 10;
    server_options.warmup.runs_per_batch_size = 1;
    server_options.telemetry = telemetry_.get();
    auto server = server::Server::Create(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->Start().ok());
    server_ = *std::move(server);
    client_ = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));  // every call bounded
  }
  void TearDown() override {
    server_.reset();  // flushes telemetry last
    telemetry_.reset();
  }

  absl::StatusOr<inference::TraceSettingResponse> Setting(const std::string& model,
                                                          const server::TraceSettingsMap& changes) {
    return testing::CallTraceSetting(*client_, model, changes);
  }
  static std::string Value(const absl::StatusOr<inference::TraceSettingResponse>& r, const std::string& key) {
    return testing::SettingValue(r, key);
  }
  // A sampled request to mlp in a new trace; its trace id (hex).
  std::string Send() {
    const std::string trace_id = ToHex(server::telemetry::NewTraceId());
    const client::Tensor input = testing::RandomMlpInput(rng_);
    client::InferOptions options;
    options.metadata = {{"traceparent", "00-" + trace_id + "-00f067aa0ba902b7-01"}};
    auto result = client_->Infer("mlp", {input}, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return trace_id;
  }
  // Waits (30 s at most) until the span processor has taken `spans` spans in all: the requests
  // answered so far have handed theirs over (after their answers).
  bool WaitForSpansTaken(uint64_t spans) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (telemetry_->span_processor()->stats().accepted < spans) {
      if (absl::Now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  static std::map<std::string, size_t> SpansByTrace(const std::string& path) {
    auto requests = testing::ReadOtlpJsonFile(path);
    EXPECT_TRUE(requests.ok()) << requests.status();
    std::map<std::string, size_t> by_trace;
    if (!requests.ok()) return by_trace;
    for (const testing::ReceivedSpan& span : testing::SpansOf(*requests)) {
      EXPECT_EQ(span.resource.at("service.name"), "chronoserve-test");
      ++by_trace[span.trace_id];
    }
    return by_trace;
  }

  testing::TempDir repo_{"cs_trace_file_runtime"};
  testing::TempDir out_{"cs_trace_file_runtime_out"};
  std::unique_ptr<Telemetry> telemetry_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<client::InferenceClient> client_;
  std::mt19937 rng_{20261206};
};

TEST_F(TraceFileAtRunTimeTest, ANamedFileStartsTracingAndTheNextTakesOver) {
  const auto start = Setting("", {});
  EXPECT_EQ(Value(start, "trace_level"), "OFF");
  EXPECT_EQ(Value(start, "trace_file"), "");
  const std::string untraced = Send();
  const auto level_alone = Setting("", {{"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(level_alone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(level_alone.status().message()), HasSubstr("until a request names a trace_file"));
  // A path, a link in the directory and a pipe there are refused (opening a pipe would block); so
  // is a name that cannot be opened. Nothing is applied.
  const auto path = Setting("", {{"trace_file", {"/etc/chronoserve-spans.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument) << path.status();
  EXPECT_THAT(std::string(path.status().message()),
              HasSubstr("it takes a file name, created in --trace-file-dir '" + out_.path() + "', not a path"));
  const std::string elsewhere = out_.path() + "/../cs_trace_elsewhere.jsonl";
  ASSERT_EQ(::symlink(elsewhere.c_str(), (out_.path() + "/link.jsonl").c_str()), 0);
  const auto link = Setting("", {{"trace_file", {"link.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(link.status().code(), absl::StatusCode::kInvalidArgument) << link.status();
  EXPECT_THAT(std::string(link.status().message()), HasSubstr("it is a symbolic link"));
  EXPECT_FALSE(std::filesystem::exists(elsewhere)) << "the link's target must not be created";
  ASSERT_EQ(::mkfifo((out_.path() + "/pipe.jsonl").c_str(), 0600), 0);
  const auto pipe = Setting("", {{"trace_file", {"pipe.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(pipe.status().code(), absl::StatusCode::kInvalidArgument) << pipe.status();
  EXPECT_THAT(std::string(pipe.status().message()), HasSubstr("is not a regular file"));
  // A hard link in the directory to a file elsewhere: O_NOFOLLOW does not see it, the link count does.
  const std::string outside = out_.path() + "/../cs_trace_hardlinked.jsonl";
  std::ofstream(outside) << "";
  ASSERT_EQ(::link(outside.c_str(), (out_.path() + "/hard.jsonl").c_str()), 0);
  const auto hard = Setting("", {{"trace_file", {"hard.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  std::filesystem::remove(outside);
  EXPECT_EQ(hard.status().code(), absl::StatusCode::kInvalidArgument) << hard.status();
  EXPECT_THAT(std::string(hard.status().message()), HasSubstr("has other hard links"));
  std::filesystem::create_directory(out_.path() + "/dir.jsonl");
  const auto unwritable = Setting("", {{"trace_file", {"dir.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(unwritable.status().code(), absl::StatusCode::kInvalidArgument) << unwritable.status();
  EXPECT_THAT(std::string(unwritable.status().message()),
              HasSubstr("trace setting 'trace_file': trace file '" + out_.path() + "/dir.jsonl' cannot be opened"));
  EXPECT_EQ(Value(Setting("", {}), "trace_level"), "OFF") << "nothing applied";
  EXPECT_EQ(Value(Setting("", {}), "trace_file"), "");

  const std::string first = out_.path() + "/first.jsonl";
  const auto on = Setting("", {{"trace_file", {"first.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(Value(on, "trace_file"), first);
  EXPECT_EQ(Value(on, "trace_level"), "TIMESTAMPS");
  const auto per_model = Setting("mlp", {{"trace_file", {"mlp.jsonl"}}});
  EXPECT_EQ(per_model.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string in_first = Send();
  ASSERT_TRUE(WaitForSpansTaken(testing::kSpansPerRequest)) << "the traced request's spans";

  const std::string second = out_.path() + "/second.jsonl";
  ASSERT_EQ(Value(Setting("", {{"trace_file", {"second.jsonl"}}}), "trace_file"), second);
  const std::string in_second = Send();
  ASSERT_TRUE(WaitForSpansTaken(2 * testing::kSpansPerRequest));
  server_.reset();  // exports what is queued: into `second`
  telemetry_.reset();

  EXPECT_EQ(SpansByTrace(first), (std::map<std::string, size_t>{{in_first, testing::kSpansPerRequest}}))
      << "the request before tracing started left none; the one after the move went to the second file";
  EXPECT_EQ(SpansByTrace(second), (std::map<std::string, size_t>{{in_second, testing::kSpansPerRequest}}));
  EXPECT_EQ(SpansByTrace(first).count(untraced), 0u) << "sent before any trace_file: not traced";
}

}  // namespace
}  // namespace chronoserve
