// bench_model_reload: what a reload costs the requests around it (--model-control-mode explicit).
// Starts chronoserve in this process on the repository with `-m MODEL` loaded, then `--concurrency`
// client threads send unary ModelInfer requests of `--batch-size` items (random inputs) through real
// gRPC on 127.0.0.1 without pause, while the main thread reloads the model `--reloads` times
// (RepositoryModelLoad), each after `--requests-between` more answers. Every request is classed by
// when it ran against the reloads' RPCs: `steady` (no reload near it), `during` (it overlapped a
// reload: the new version loading and warming up beside the old one serving, then the swap) or
// `after` (it began within 50 ms after a reload was answered: the new version's first requests).
// The first `--requests-between` answers warm the clients up and are not counted.
//
//   bench_model_reload --model-repository models -m mlp --concurrency 4 --reloads 20 --json reload.json
//
// Prints requests, failures and latency p50 / p99 / max (µs) per class and the reloads' own time,
// and writes the same as JSON. Any failed request is a lost request (the claim is none).
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmarks/percentile.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "common/dtype.h"
#include "common/tensor_data.h"
#include "server/server.h"

namespace {
using namespace chronoserve;  // NOLINT: a benchmark's main

struct Sample {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool ok = true;
};

struct Window {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// The model's inputs at `batch` items, random (never all zero): dims from ModelMetadata, the batch
// dim (-1 first, for a batching model) set to `batch`; another variable dim is refused.
absl::StatusOr<std::vector<client::Tensor>> Inputs(client::InferenceClient& c, const std::string& model, int batch,
                                                   uint64_t seed) {
  auto metadata = c.ModelMetadata(model);
  if (!metadata.ok()) return metadata.status();
  std::mt19937_64 rng(seed);
  std::vector<client::Tensor> inputs;
  for (const auto& input : metadata->inputs()) {
    auto dtype = DataTypeFromName(input.datatype());
    if (!dtype.ok()) return dtype.status();
    std::vector<int64_t> shape(input.shape().begin(), input.shape().end());
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] >= 0) continue;
      if (i > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", input.name(), "' has a variable dim past the batch dim: not supported here"));
      }
      shape[i] = batch;
    }
    inputs.push_back(client::Tensor{input.name(), *dtype, shape, RandomTensorBytes(*dtype, ElementCount(shape), rng)});
  }
  return inputs;
}

nlohmann::json ClassJson(const std::vector<int64_t>& ns, int failures) {
  return {{"requests", ns.size() + failures},
          {"failures", failures},
          {"p50_us", bench::PercentileUs(ns, 50)},
          {"p99_us", bench::PercentileUs(ns, 99)},
          {"max_us", bench::PercentileUs(ns, 100)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What a model reload costs the requests around it (chronoserve in process, real gRPC)"};
  std::string repository, model, json_path;
  int concurrency = 4, reloads = 20, between = 200, batch = 1;
  app.add_option("--model-repository", repository, "Model repository")->required();
  app.add_option("-m,--model", model, "Model to load and reload")->required();
  app.add_option("--concurrency", concurrency, "Client threads, one request in flight each")
      ->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--reloads", reloads, "Reloads")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--requests-between", between, "Answers between two reloads")
      ->capture_default_str()->check(CLI::Range(1, 100000000));
  app.add_option("-b,--batch-size", batch, "Items per request")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--json", json_path, "Write the report as JSON");
  CLI11_PARSE(app, argc, argv);

  server::ServerOptions options;
  options.model_repository = repository;
  options.grpc_port = 0;
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.load_models = {model};
  auto created = server::Server::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", std::string(created.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<server::Server> server = *std::move(created);
  if (absl::Status started = server->Start(); !started.ok()) {
    std::fprintf(stderr, "%s\n", std::string(started.message()).c_str());
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", server->port());
  auto channel = [&] {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), client::ClientChannelArguments());
  };
  client::InferenceClient control(channel());
  auto probe = Inputs(control, model, batch, 1);
  if (!probe.ok()) {
    std::fprintf(stderr, "%s\n", std::string(probe.status().message()).c_str());
    return 1;
  }

  const Clock* clock = SteadyClock::Get();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> answered{0};
  std::vector<std::vector<Sample>> samples(concurrency);
  std::vector<std::thread> clients;
  for (int t = 0; t < concurrency; ++t) {
    clients.emplace_back([&, t] {
      client::InferenceClient c(channel());
      auto inputs = Inputs(c, model, batch, 100 + t);
      if (!inputs.ok()) return;
      while (!stop.load(std::memory_order_relaxed)) {
        Sample s;
        s.start_ns = clock->NowNs();
        s.ok = c.Infer(model, *inputs).ok();
        s.end_ns = clock->NowNs();
        samples[t].push_back(s);
        answered.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::vector<Window> windows;
  std::vector<int64_t> reload_ns;
  int reload_failures = 0;
  // The first `between` answers warm the clients up: not measured.
  const int64_t warmed = answered.load() + between;
  while (answered.load() < warmed) std::this_thread::yield();
  const int64_t measured_from = clock->NowNs();
  for (int r = 0; r <= reloads; ++r) {
    const int64_t floor = answered.load() + between;
    while (answered.load() < floor) std::this_thread::yield();
    if (r == reloads) break;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(model);
    inference::RepositoryModelLoadResponse response;
    Window w;
    w.start_ns = clock->NowNs();
    const grpc::Status status = control.stub()->RepositoryModelLoad(&ctx, request, &response);
    w.end_ns = clock->NowNs();
    if (!status.ok()) {
      ++reload_failures;
      std::fprintf(stderr, "reload %d failed: %s\n", r, status.error_message().c_str());
    }
    windows.push_back(w);
    reload_ns.push_back(w.end_ns - w.start_ns);
  }
  stop = true;
  for (auto& thread : clients) thread.join();
  server->Shutdown();

  constexpr int64_t kAfterNs = 50'000'000;
  std::vector<int64_t> steady, during, after;
  int steady_failed = 0, during_failed = 0, after_failed = 0;
  for (const auto& per_thread : samples) {
    for (const Sample& s : per_thread) {
      if (s.start_ns < measured_from) continue;
      bool overlaps = false, follows = false;
      for (const Window& w : windows) {
        overlaps = overlaps || (s.start_ns <= w.end_ns && s.end_ns >= w.start_ns);
        follows = follows || (s.start_ns > w.end_ns && s.start_ns <= w.end_ns + kAfterNs);
      }
      std::vector<int64_t>& bucket = overlaps ? during : follows ? after : steady;
      int& failed = overlaps ? during_failed : follows ? after_failed : steady_failed;
      if (s.ok) {
        bucket.push_back(s.end_ns - s.start_ns);
      } else {
        ++failed;
      }
    }
  }
  std::printf("model %s, batch %d, concurrency %d, %d reloads, %d answers between\n", model.c_str(), batch,
              concurrency, reloads, between);
  std::printf("%-8s %9s %9s %10s %10s %10s\n", "class", "requests", "failures", "p50 us", "p99 us", "max us");
  auto row = [](const char* name, const std::vector<int64_t>& ns, int failures) {
    std::printf("%-8s %9zu %9d %10.1f %10.1f %10.1f\n", name, ns.size() + failures, failures,
                bench::PercentileUs(ns, 50), bench::PercentileUs(ns, 99), bench::PercentileUs(ns, 100));
  };
  row("steady", steady, steady_failed);
  row("during", during, during_failed);
  row("after", after, after_failed);
  std::printf("reload RPC: p50 %.1f ms, max %.1f ms, %d failed\n", bench::PercentileUs(reload_ns, 50) / 1000,
              bench::PercentileUs(reload_ns, 100) / 1000, reload_failures);
  if (!json_path.empty()) {
    nlohmann::json report = {{"model", model},
                             {"batch_size", batch},
                             {"concurrency", concurrency},
                             {"reloads", reloads},
                             {"requests_between", between},
                             {"steady", ClassJson(steady, steady_failed)},
                             {"during", ClassJson(during, during_failed)},
                             {"after", ClassJson(after, after_failed)},
                             {"reload_p50_ms", bench::PercentileUs(reload_ns, 50) / 1000},
                             {"reload_max_ms", bench::PercentileUs(reload_ns, 100) / 1000},
                             {"reload_failures", reload_failures}};
    std::ofstream(json_path) << report.dump(2) << "\n";
  }
  return steady_failed + during_failed + after_failed + reload_failures == 0 ? 0 : 2;
}
