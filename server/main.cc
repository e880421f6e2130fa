// chronoserve: flags only; everything else lives in Server.
#include <csignal>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "server/server.h"

int main(int argc, char** argv) {
  chronoserve::server::ServerOptions options;
  int log_verbose = 0;
  CLI::App app{"chronoserve: a KServe v2 gRPC inference server for TorchScript models that reports "
               "where every microsecond of a request went"};
  app.add_option("--model-repository", options.model_repository,
                 "Model repository in Triton's layout: DIR/<model>/config.pbtxt and DIR/<model>/<version>/model.pt")
      ->required();
  app.add_option("--grpc-port", options.grpc_port, "gRPC port (KServe v2, health, reflection); 0 picks a free one")
      ->capture_default_str();
  app.add_option("--host", options.host, "Address to listen on")->capture_default_str();
  app.add_option("--log-verbose", log_verbose, "Verbose logging level (0 = off)")->capture_default_str();
  app.add_option("--exit-timeout-secs", options.exit_timeout_secs,
                 "On SIGTERM/SIGINT, how long in-flight requests may take to finish")
      ->capture_default_str();
  app.add_option("--warmup-runs", options.warmup.runs_per_batch_size,
                 "Warm-up runs per worker and batch size before a model reports READY")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  chronoserve::SetLogVerbosity(log_verbose);

  // Block the shutdown signals in every thread; main waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = chronoserve::server::Server::Create(options);
  if (!server.ok()) {
    CS_LOG(ERROR) << server.status().message();
    return 2;
  }
  if (absl::Status s = (*server)->Start(); !s.ok()) {
    CS_LOG(ERROR) << s.message();
    return 1;
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  CS_LOG(INFO) << "received signal " << signal_number;
  (*server)->Shutdown();
  return 0;
}
