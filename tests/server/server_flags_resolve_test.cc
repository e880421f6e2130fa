// AddServerFlags + ResolveServerFlags: what the server's flags become in ServerOptions and
// TelemetryOptions, parsed as the binary parses them (server_flags_test.cc runs the binary itself).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/server_flags.h"

namespace chronoserve::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

otlp::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The flags after the program name, parsed by CLI11 as main does, then resolved.
absl::StatusOr<ServerFlags> Parse(std::vector<std::string> args, const otlp::EnvLookup& env = Env({})) {
  CLI::App app{"chronoserve"};
  RawServerFlags raw;
  AddServerFlags(&app, &raw);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return ResolveServerFlags(std::move(raw), env);
}

TEST(ServerFlagsResolveTest, DefaultsAreTheDocumentedOnes) {
  auto flags = Parse({"--model-repository", "/models"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  const ServerOptions& options = flags->options;
  EXPECT_EQ(options.model_repository, "/models");
  EXPECT_EQ(options.host, "127.0.0.1");
  EXPECT_EQ(options.grpc_port, 8001);
  EXPECT_EQ(options.grpc_infer_threads, kAutoInferThreads);
  EXPECT_EQ(options.grpc_threads_per_queue, 2);
  EXPECT_FALSE(options.grpc_minimal_stack);
  EXPECT_EQ(options.grpc_max_request_bytes, 0) << "no limit";
  EXPECT_TRUE(options.request_timing);
  EXPECT_EQ(options.input_arena_bytes, -1) << "auto";
  EXPECT_FALSE(options.input_arena_store.has_value()) << "auto";
  EXPECT_EQ(options.max_queue_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(options.max_stream_unsent_bytes, uint64_t{256} << 20);
  EXPECT_EQ(options.serving_warmup_requests, 4);
  EXPECT_EQ(options.host_keep_warm_ms, 0);
  EXPECT_EQ(options.model_control_mode, ModelControlMode::kNone);
  EXPECT_TRUE(options.load_models.empty());
  EXPECT_EQ(options.repository_poll_interval, absl::Seconds(15));
  EXPECT_EQ(options.model_load_threads, 4);
  EXPECT_TRUE(options.host_policies.empty());
  EXPECT_EQ(options.telemetry, nullptr) << "main sets it once the Telemetry exists";
  EXPECT_EQ(flags->log_verbose, 0);
  EXPECT_TRUE(flags->log_info);
  EXPECT_TRUE(flags->log_warning);
  EXPECT_TRUE(flags->log_error);
  EXPECT_EQ(flags->log_format, LogFormat::kDefault);
  EXPECT_FALSE(flags->telemetry.tracing.enabled);
  EXPECT_TRUE(flags->telemetry.gpu.enabled);
  EXPECT_EQ(flags->telemetry.gpu.period, absl::Milliseconds(100));
  EXPECT_EQ(flags->telemetry.metrics.host, "127.0.0.1");
}

TEST(ServerFlagsResolveTest, ValuesBecomeOptionsInTheirUnits) {
  auto flags = Parse({"--model-repository", "/m", "--host", "0.0.0.0", "--grpc-infer-threads", "6",
                      "--grpc-threads-per-queue", "1", "--input-arena-mib", "24", "--input-arena-store", "streaming", "--max-queue-mib", "3", "--max-stream-unsent-mib", "5", "--request-timing", "off",
                      "--grpc-minimal-stack", "true", "--host-policy", "gpu_0,cpu-cores=2-3", "--host-policy",
                      "gpu_0,nice=5", "--gpu-monitor-interval-ms", "250", "--log-verbose", "2",
                      "--log-info", "false", "--log-warning", "false", "--log-format", "ISO8601",
                      "--otlp-endpoint", "collector:4317", "--metrics-port", "9102"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  const ServerOptions& options = flags->options;
  EXPECT_EQ(options.grpc_infer_threads, 6);
  EXPECT_EQ(options.grpc_threads_per_queue, 1);
  EXPECT_EQ(options.input_arena_bytes, int64_t{24} << 20);
  EXPECT_EQ(options.input_arena_store, ArenaStore::kStreaming);
  EXPECT_EQ(options.max_queue_bytes, uint64_t{3} << 20);
  EXPECT_EQ(options.max_stream_unsent_bytes, uint64_t{5} << 20);
  EXPECT_FALSE(options.request_timing);
  EXPECT_TRUE(options.grpc_minimal_stack);
  ASSERT_EQ(options.host_policies.count("gpu_0"), 1u);
  EXPECT_THAT(options.host_policies.at("gpu_0").cpu_cores, ElementsAre(2, 3));
  EXPECT_EQ(options.host_policies.at("gpu_0").nice, 5);
  EXPECT_EQ(flags->log_verbose, 2);
  EXPECT_FALSE(flags->log_info);
  EXPECT_FALSE(flags->log_warning);
  EXPECT_TRUE(flags->log_error);
  EXPECT_EQ(flags->log_format, LogFormat::kIso8601);
  EXPECT_TRUE(flags->telemetry.tracing.enabled);
  EXPECT_EQ(flags->telemetry.tracing.exporter.endpoint, "collector:4317");
  EXPECT_EQ(flags->telemetry.tracing.file, "");
  auto limited = Parse({"--model-repository", "/m", "--grpc-max-request-bytes", "1048576"});
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->options.grpc_max_request_bytes, 1 << 20);
  EXPECT_FALSE(Parse({"--model-repository", "/m", "--grpc-max-request-bytes", "-1"}).ok());
  EXPECT_FALSE(Parse({"--model-repository", "/m", "--grpc-max-request-bytes", "2147483648"}).ok()) << "past int32";
  auto file = Parse({"--model-repository", "/m", "--trace-file", "/var/tmp/spans.jsonl"});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->telemetry.tracing.enabled);
  EXPECT_EQ(file->telemetry.tracing.file, "/var/tmp/spans.jsonl");
  EXPECT_EQ(file->telemetry.trace_file_dir, "") << "no --trace-file-dir: clients name no trace file";
  auto dir = Parse({"--model-repository", "/m", "--trace-file-dir", "/tmp"});
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->telemetry.trace_file_dir, "/tmp");
  EXPECT_EQ(flags->telemetry.metrics.port, 9102);
  EXPECT_EQ(flags->telemetry.metrics.host, "0.0.0.0") << "metrics listen on --host";
  EXPECT_EQ(flags->telemetry.gpu.period, absl::Milliseconds(250));
}

TEST(ServerFlagsResolveTest, ModelControlModeAndTheModelsToLoad) {
  auto flags = Parse({"--model-repository", "/models", "--model-control-mode", "explicit", "--load-model", "a",
                      "--load-model", "b"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->options.model_control_mode, ModelControlMode::kExplicit);
  EXPECT_THAT(flags->options.load_models, ElementsAre("a", "b"));
  auto poll = Parse({"--model-repository", "/models", "--model-control-mode", "poll", "--repository-poll-secs", "3",
                     "--model-load-thread-count", "2"});
  ASSERT_TRUE(poll.ok()) << poll.status();
  EXPECT_EQ(poll->options.model_load_threads, 2);
  EXPECT_EQ(poll->options.model_control_mode, ModelControlMode::kPoll);
  EXPECT_EQ(poll->options.repository_poll_interval, absl::Seconds(3));
  auto ignored = Parse({"--model-repository", "/models", "--model-control-mode", "explicit", "--repository-poll-secs", "3"});
  ASSERT_FALSE(ignored.ok()) << "a flag that would do nothing";
  EXPECT_THAT(std::string(ignored.status().message()), HasSubstr("--repository-poll-secs needs --model-control-mode poll"));
  auto threads = Parse({"--model-repository", "/models", "--model-load-thread-count", "2"});
  ASSERT_TRUE(threads.ok()) << threads.status() << ": mode none loads its start's models that many at once";
  EXPECT_EQ(threads->options.model_load_threads, 2);
  EXPECT_FALSE(Parse({"--model-repository", "/models", "--model-load-thread-count", "0"}).ok());
  EXPECT_FALSE(Parse({"--model-repository", "/models", "--model-load-thread-count", "65"}).ok());
  auto bad = Parse({"--model-repository", "/models", "--model-control-mode", "watch"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--model-control-mode"));
}

TEST(ServerFlagsResolveTest, ZeroMeansOffWhereDocumented) {
  auto flags = Parse({"--model-repository", "/m", "--grpc-infer-threads", "0", "--input-arena-mib", "0",
                      "--max-queue-mib", "0", "--max-stream-unsent-mib", "0", "--gpu-monitor-interval-ms", "0"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->options.grpc_infer_threads, 0) << "the callback API";
  EXPECT_EQ(flags->options.input_arena_bytes, 0) << "no arena";
  EXPECT_EQ(flags->options.max_queue_bytes, 0u) << "unbounded";
  EXPECT_EQ(flags->options.max_stream_unsent_bytes, 0u) << "unbounded";
  EXPECT_FALSE(flags->telemetry.gpu.enabled);
}

TEST(ServerFlagsResolveTest, TraceCollectorFromTheEnvironmentWhenNoFlag) {
  auto flags = Parse({"--model-repository", "/m"}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_TRUE(flags->telemetry.tracing.enabled);
  EXPECT_EQ(flags->telemetry.tracing.exporter.endpoint, "otel:4317");
}

// --host as the listeners take it: IPv6 with or without brackets (stored without), IPv4 and names
// as given; the metrics endpoint listens on the same host.
TEST(ServerFlagsResolveTest, HostIsStoredWithoutBrackets) {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"[::1]", "::1"}, {"::1", "::1"}, {"[::]", "::"}, {"0.0.0.0", "0.0.0.0"},
      {"localhost", "localhost"}, {"fe80::1%2", "fe80::1%2"}};
  for (const auto& [given, stored] : rows) {
    SCOPED_TRACE(given);
    auto flags = Parse({"--model-repository", "/m", "--host", given});
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_EQ(flags->options.host, stored);
    EXPECT_EQ(flags->telemetry.metrics.host, stored);
  }
}

TEST(ServerFlagsResolveTest, InputArenaStoreNamesEachWayAndAutoLeavesItToTheRuntime) {
  for (const auto& [word, store] : {std::pair{"cached", ArenaStore::kCached},
                                    std::pair{"streaming", ArenaStore::kStreaming},
                                    std::pair{"evicted", ArenaStore::kEvicted},
                                    std::pair{"adaptive", ArenaStore::kAdaptive}}) {
    auto flags = Parse({"--model-repository", "/m", "--input-arena-store", word});
    ASSERT_TRUE(flags.ok()) << word << ": " << flags.status();
    EXPECT_EQ(flags->options.input_arena_store, store) << word;
  }
  auto flags = Parse({"--model-repository", "/m", "--input-arena-store", "auto"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_FALSE(flags->options.input_arena_store.has_value());
}

TEST(ServerFlagsResolveTest, BadValuesAreRefusedWithTheParsersMessage) {
  struct Row {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Row> rows = {
      {{"--grpc-infer-threads", "0x10"}, "expected auto or a decimal number of threads from 0 to 64, got '0x10'"},
      {{"--grpc-infer-threads", "65"}, "from 0 to 64"},
      {{"--grpc-threads-per-queue", "0"}, "--grpc-threads-per-queue: '0' is not an integer from 1 to 4"},
      {{"--grpc-threads-per-queue", "5"}, "from 1 to 4"},
      {{"--input-arena-mib", "65537"}, "must be auto or a whole number of MiB from 0 to 65536, got '65537'"},
      {{"--input-arena-mib", "4MiB"}, "must be auto or a whole number of MiB from 0 to 65536"},
      {{"--input-arena-store", "uncached"}, "--input-arena-store: uncached not in {auto,cached,streaming,evicted,adaptive}"},
      {{"--request-timing", "maybe"}, "--request-timing"},
      {{"--host-policy", "gpu_0,numa-node=1"}, "gpu_0,numa-node=1"},
      {{"--otlp-endpoint", "collector"}, "OTLP endpoint 'collector' is not HOST:PORT"},
      {{"--trace-file", "/tmp/s.jsonl", "--otlp-endpoint", "collector:4317"},
       "--trace-file '/tmp/s.jsonl' and --otlp-endpoint 'collector:4317' both name where spans go; give one"},
      {{"--trace-file", ""}, "a file path is needed"},
      {{"--trace-file-dir", "/no/such/dir"}, "--trace-file-dir: Directory does not exist: /no/such/dir"},
      {{"--trace-file-dir", "/etc/hostname"}, "--trace-file-dir: Directory is actually a file: /etc/hostname"},
      {{"--host", "127.0.0.1:9000"}, "got '127.0.0.1:9000'; the port is --grpc-port"},
      {{"--host", "[::1]:9000"}, "got '[::1]:9000'; the port is --grpc-port"},
      {{"--host", "[localhost]"}, "--host: expected an IPv4 address, a host name or an IPv6 address"},
      {{"--host", ""}, "got ''"},
      {{"--log-format", "json"}, "--log-format: json not in {default,ISO8601}"},
      {{"--log-verbose", "11"}, "--log-verbose"},
  };
  for (const Row& row : rows) {
    std::vector<std::string> args = {"--model-repository", "/m"};
    args.insert(args.end(), row.args.begin(), row.args.end());
    SCOPED_TRACE(row.args[0] + " " + row.args[1]);
    auto flags = Parse(args);
    ASSERT_FALSE(flags.ok());
    EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(flags.status().message()), HasSubstr(row.message));
  }
  EXPECT_FALSE(Parse({"--grpc-port", "1"}).ok()) << "--model-repository is required";
}

}  // namespace
}  // namespace chronoserve::server
