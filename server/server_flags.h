// chronoserve's command-line flags and their translation into ServerOptions and TelemetryOptions.
// main registers them (AddServerFlags), parses argv, then resolves what is not a plain value
// (ResolveServerFlags: thread counts, MiB, host policies, the trace collector). Used by main's
// thread only.
//
//   RawServerFlags raw;
//   AddServerFlags(&app, &raw);
//   if (auto code = ParseFlags(app, argc, argv)) return *code;
//   absl::StatusOr<ServerFlags> flags = ResolveServerFlags(std::move(raw), otlp::ProcessEnv());
#ifndef CHRONOSERVE_SERVER_SERVER_FLAGS_H_
#define CHRONOSERVE_SERVER_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "common/log.h"
#include "common/otlp/tracing_config.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"

namespace chronoserve::server {

// The flags as typed: plain values land in `options` / `telemetry` directly, the rest as strings.
struct RawServerFlags {
  ServerOptions options;
  telemetry::TelemetryOptions telemetry;
  int log_verbose = 0;
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  std::string log_format = "default";
  std::string infer_threads = "auto";
  std::string request_timing = "on";
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  bool repository_poll_secs_given = false;  // on the command line (refused outside poll mode)
  std::vector<std::string> host_policies;
  std::string input_arena = "auto";
  std::string input_arena_store = "auto";
  uint64_t max_queue_mib = ServerOptions{}.max_queue_bytes >> 20;
  uint64_t max_stream_unsent_mib = ServerOptions{}.max_stream_unsent_bytes >> 20;
  std::string otlp_endpoint;
  std::string trace_file;
  int gpu_monitor_interval_ms = 100;
};

// What main needs to build the telemetry and the server. `options.telemetry` is left null: main
// sets it once the Telemetry exists.
struct ServerFlags {
  ServerOptions options;
  telemetry::TelemetryOptions telemetry;
  int log_verbose = 0;
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  LogFormat log_format = LogFormat::kDefault;
};

// Sets the process's logging (common/log.h) as `flags` say; main calls it before anything logs.
void ApplyLogFlags(const ServerFlags& flags);

// Registers every flag of the server (not `profile`'s) on `app`, writing into `raw`.
void AddServerFlags(CLI::App* app, RawServerFlags* raw);

// Turns the parsed strings into options, reading the trace collector's settings from `env` too.
// INVALID_ARGUMENT (the parser's message) for a bad --host-policy or --otlp-endpoint; problems in
// `env` only become the tracing config's warnings.
absl::StatusOr<ServerFlags> ResolveServerFlags(RawServerFlags raw, const otlp::EnvLookup& env);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SERVER_FLAGS_H_
