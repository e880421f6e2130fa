// chronoserve: the process around Server: signals, flags (server_flags.h), telemetry, start and stop.
#include <sys/resource.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "absl/synchronization/mutex.h"

#include "common/cli_integer.h"
#include "common/log.h"
#include "common/otlp/tracing_config.h"
#include "server/backend/torch_backend.h"
#include "server/grpc/grpc_log.h"
#include "server/server.h"
#include "server/server_flags.h"
#include "server/shutdown_signals.h"
#include "server/telemetry/telemetry.h"
#include "tools/profile/profile_command.h"

namespace {

// Each registered shared-memory region holds a descriptor, besides the connections and model files:
// the soft open-file limit (often 1024) is raised to the hard one, as servers commonly do, so
// clients run out of it late, and then with RESOURCE_EXHAUSTED.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    CS_LOG(INFO) << "open-file limit raised from " << was << " to " << limit.rlim_cur;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // `chronoserve profile MODEL_DIR ...`: the offline profiler (no gRPC), see docs/GPU_PERFORMANCE.md.
  if (argc > 1 && std::string(argv[1]) == "profile") {
    return chronoserve::profile::RunProfileCommand(argc - 1, argv + 1);
  }
  // Debian's abseil is built without NDEBUG, so every absl::Mutex::Lock also feeds the global
  // deadlock-cycle graph (GraphCycles: ~7% of the server's CPU at 8k requests/s in a perf
  // profile). A production server does not pay for a debugging aid; the tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the shutdown signals before any library starts a thread (tracing's gRPC channel does, in
  // Telemetry::Create): threads inherit the mask, so SIGTERM/SIGINT reach only the watcher's
  // sigwait, and one that arrives during model loading or the drain is never the default action on
  // another thread (an immediate exit with nothing drained).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // SIGHUP does nothing (the repository is re-read by model control, not by a signal): by default it
  // would end the process at once, nothing drained, e.g. when the terminal that started it closes.
  std::signal(SIGHUP, SIG_IGN);
  // A write to a pipe whose reader is gone (a --trace-file pipe, the log's stderr) fails with EPIPE
  // instead of ending the server with every request in flight (the metrics endpoint's library
  // ignored SIGPIPE too, but only with --allow-metrics).
  std::signal(SIGPIPE, SIG_IGN);
  chronoserve::server::RawServerFlags raw;
  CLI::App app{"chronoserve: a KServe v2 gRPC inference server for TorchScript models that reports "
               "where every microsecond of a request went. Offline profiling of one model: "
               "`chronoserve profile MODEL_DIR --help`"};
  app.set_version_flag("--version", std::string("chronoserve ") + chronoserve::server::kChronoserveVersion + " with " +
                                        chronoserve::server::TorchBuildDescription());
  chronoserve::server::AddServerFlags(&app, &raw);
  // --help and --version exit 0; a bad flag exits 2, as every other start-up error of a flag does.
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  auto flags = chronoserve::server::ResolveServerFlags(std::move(raw), chronoserve::otlp::ProcessEnv());
  if (!flags.ok()) {
    CS_LOG(ERROR) << flags.status().message();
    return 2;
  }
  chronoserve::server::ApplyLogFlags(*flags);
  chronoserve::server::RouteGrpcLogThroughOurs();
  RaiseOpenFileLimit();
  namespace telemetry = chronoserve::server::telemetry;
  auto telemetry_or = telemetry::Telemetry::Create(std::move(flags->telemetry));
  if (!telemetry_or.ok()) {
    CS_LOG(ERROR) << telemetry_or.status().message();
    return 2;
  }
  std::unique_ptr<telemetry::Telemetry> telemetry_owner = *std::move(telemetry_or);
  chronoserve::server::ServerOptions& options = flags->options;
  options.telemetry = telemetry_owner.get();

  auto* shutdown_signals = chronoserve::server::ShutdownSignals::Watch(signals);
  auto server = chronoserve::server::Server::Create(options);
  if (!server.ok()) {
    CS_LOG(ERROR) << server.status().message();
    return 2;
  }
  shutdown_signals->SetServer(server->get());
  if (absl::Status s = (*server)->Start(); !s.ok()) {
    shutdown_signals->SetServer(nullptr);
    CS_LOG(ERROR) << s.message();
    return 1;
  }
  shutdown_signals->WaitForFirst();
  (*server)->Shutdown();
  shutdown_signals->SetServer(nullptr);
  return 0;
}
