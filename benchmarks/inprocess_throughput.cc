// bench_inprocess_throughput: the in-process reference for the batching benchmark. Loads one model
// of a repository with the server's own backend (server::CreateTorchInstance: the same staging,
// copies and forward as a worker, on GPU 0 when there is one, else the CPU) and calls Execute()
// back to back on synthetic random batches, with no gRPC, queue or batcher in between. Prints
// items/s and the p50/p99 batch latency per batch size and writes JSON.
//
//   bench_inprocess_throughput --model-repository models --model policy_net \
//       --batch-sizes 1,8,32,64,128 --iterations 200 --json inprocess.json
//
// A batch is built as the batcher builds it: `batch size` requests of one item each (or, with
// --one-request, one request of `batch size` items). --batch-mix SIZE:BATCHES,... adds a point whose
// batches take a served point's mix of sizes in its proportions, spread evenly (benchmarks/batch_mix.h):
// the reference for exactly the batches a server formed. Every size is warmed up once before any
// point, the mixes' sizes too. Where the instance pipelines (a GPU worker,
// pipeline_depth 2) the loop does what a busy worker does: it launches batch i+1 before it
// finishes batch i (--pipeline off: Execute() one batch at a time).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "benchmarks/batch_mix.h"
#include "benchmarks/percentile.h"
#include "common/cli_integer.h"
#include "common/clock.h"
#include "server/backend/device_activity.h"
#include "server/backend/torch_backend.h"
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"

namespace {
using namespace chronoserve;           // NOLINT: a benchmark's main
using namespace chronoserve::server;  // NOLINT

// A reusable batch: the requests are rebuilt from the same inputs before every Execute.
struct SyntheticBatch {
  std::vector<std::vector<std::string>> outputs;
  Batch batch;
};

SyntheticBatch MakeBatch(const ModelSpec& spec, int64_t batch_size, bool one_request, std::mt19937_64& rng) {
  SyntheticBatch b;
  const int64_t requests = one_request ? 1 : batch_size;
  b.outputs.resize(static_cast<size_t>(requests));
  for (int64_t i = 0; i < requests; ++i) {
    b.batch.push_back(MakeSyntheticRequest(spec, one_request ? batch_size : 1, &b.outputs[i], rng));
  }
  return b;
}

using chronoserve::bench::PercentileUs;

// Runs one batch per entry of `sizes` (the first `warmup` unmeasured), launching each before
// finishing the one ahead of it when `pipelined`; returns the figures as JSON (the caller says
// which batch size or mix they are for).
absl::StatusOr<nlohmann::json> Measure(ModelInstance& instance, const ModelSpec& spec, const std::vector<int64_t>& sizes,
                                       bool one_request, int warmup, bool pipelined, int pause_us, bool fresh_inputs) {
  // Two batches of each size, used in turn: batch i may be rebuilt while batch i - 1 is in flight.
  std::map<int64_t, std::array<SyntheticBatch, 2>> pool;
  for (int64_t size : sizes) {
    if (pool.count(size)) continue;
    std::mt19937_64 rng(0x1e57 + size);
    SyntheticBatch first = MakeBatch(spec, size, one_request, rng);
    pool.emplace(size, std::array<SyntheticBatch, 2>{std::move(first), MakeBatch(spec, size, one_request, rng)});
  }
  auto batch_at = [&](int i) -> SyntheticBatch& { return pool.at(sizes[i])[i % 2]; };
  const int total = static_cast<int>(sizes.size());
  const int iterations = total - warmup;
  int64_t measured_items = 0;
  for (int i = warmup; i < total; ++i) measured_items += sizes[i];
  BatchTiming timings[2];
  std::vector<int64_t> latencies, compute;
  latencies.reserve(iterations);
  // Host time inside each Launch / Finish (or Execute) call, measured batches only: what the served
  // worker's launch / finish (execute) phases in chronoserve_worker_seconds_total are made of.
  int64_t launch_call_ns = 0, finish_call_ns = 0;
  int64_t gather_ns = 0;  // inside Launch (Execute): until the instance stamped staged_ns
  int64_t measured_start = 0;
  auto finish = [&](int i) -> absl::Status {  // batch i (launched) is waited for and recorded
    SyntheticBatch& b = batch_at(i);
    BatchTiming& t = timings[i % 2];
    const int64_t start = SteadyClock::Now();
    absl::Status status = pipelined ? instance.Finish(b.batch, &t, i % 2) : absl::OkStatus();
    const int64_t end = SteadyClock::Now();
    if (!status.ok()) return status;
    if (i >= warmup) {
      finish_call_ns += end - start;
      latencies.push_back(end - t.dequeued_ns);
      compute.push_back(t.compute_ns);
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < total; ++i) {
    if (i == warmup) measured_start = SteadyClock::Now();
    SyntheticBatch& b = batch_at(i);
    BatchTiming& t = timings[i % 2];
    t = BatchTiming{};
    // --fresh-inputs: every input moves to new memory written by another thread before the batch,
    // as a served batch gathers payloads that gRPC's threads have just parsed (not cache-hot ones).
    if (fresh_inputs) {
      std::thread writer([&b] {
        for (auto& r : b.batch) {
          for (InputTensor& in : r->inputs) {
            std::string fresh(in.owned_data->size(), '\0');
            std::memcpy(fresh.data(), in.owned_data->data(), fresh.size());
            in.Own(std::move(fresh));
          }
        }
      });
      writer.join();
    }
    // --pause-us: the thread sleeps before each batch, as a served worker that waited for requests.
    if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    t.dequeued_ns = SteadyClock::Now();
    if (!pipelined) {
      if (absl::Status status = instance.Execute(b.batch, &t); !status.ok()) return status;
      if (i >= warmup) {
        launch_call_ns += SteadyClock::Now() - t.dequeued_ns;
        gather_ns += t.staged_ns - t.dequeued_ns;
      }
      if (absl::Status status = finish(i); !status.ok()) return status;
      continue;
    }
    if (absl::Status status = instance.Launch(b.batch, &t, i % 2); !status.ok()) return status;
    if (i >= warmup) {
      launch_call_ns += SteadyClock::Now() - t.dequeued_ns;
      gather_ns += t.staged_ns - t.dequeued_ns;
    }
    if (i > 0) {
      if (absl::Status status = finish(i - 1); !status.ok()) return status;
    }
  }
  if (pipelined && total > 0) {
    if (absl::Status status = finish(total - 1); !status.ok()) return status;
  }
  const double seconds = static_cast<double>(SteadyClock::Now() - measured_start) / 1e9;
  nlohmann::json j;
  j["iterations"] = iterations;
  j["pipelined"] = pipelined;
  j["pause_us"] = pause_us;
  j["fresh_inputs"] = fresh_inputs;
  j["items_per_s"] = static_cast<double>(measured_items) / seconds;
  j["mean_batch_size"] = iterations > 0 ? static_cast<double>(measured_items) / iterations : 0.0;
  j["batches_per_s"] = iterations / seconds;
  j["batch_latency_p50_us"] = PercentileUs(latencies, 50);
  j["batch_latency_p99_us"] = PercentileUs(latencies, 99);
  j["compute_p50_us"] = PercentileUs(compute, 50);
  // Means (the served worker's phases are totals / batches): Launch, or Execute when not pipelined.
  j["launch_call_mean_us"] = iterations > 0 ? static_cast<double>(launch_call_ns) / iterations / 1e3 : 0.0;
  j["gather_mean_us"] = iterations > 0 ? static_cast<double>(gather_ns) / iterations / 1e3 : 0.0;
  j["finish_call_mean_us"] = iterations > 0 ? static_cast<double>(finish_call_ns) / iterations / 1e3 : 0.0;
  return j;
}

// One row of the table: a batch size or a mix, then the point's figures.
void PrintPoint(const std::string& label, const nlohmann::json& point) {
  std::printf("%10s %14.0f %14.1f %14.1f %14.1f %14.1f %14.1f %14.1f\n", label.c_str(), point["items_per_s"].get<double>(),
              point["batch_latency_p50_us"].get<double>(), point["batch_latency_p99_us"].get<double>(),
              point["compute_p50_us"].get<double>(), point["launch_call_mean_us"].get<double>(),
              point["gather_mean_us"].get<double>(), point["finish_call_mean_us"].get<double>());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string repository, model, json_path;
  std::vector<int64_t> batch_sizes = {1, 8, 32, 64, 128};
  int iterations = 200, warmup = 20, gpu_flag = -2;
  bool one_request = false;
  std::string request_timing = "on";
  std::string pipeline = "on";
  CLI::App app{"In-process throughput of a model with chronoserve's backend (no gRPC, no queue)"};
  app.add_option("--model-repository", repository, "Model repository (Triton layout)")->required();
  app.add_option("-m,--model", model, "Model name")->required();
  app.add_option("--batch-sizes", batch_sizes, "Batch sizes to measure")
      ->delimiter(',')
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 1 << 30));
  app.add_option("-n,--iterations", iterations, "Measured batches per size")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--warmup", warmup, "Unmeasured batches per size first")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 100000000));
  app.add_option("--gpu", gpu_flag, "CUDA device (-1 = CPU; default: GPU 0 when there is one)")
      ->transform(chronoserve::IntegerIn(-1, 1023));
  app.add_flag("--one-request", one_request, "One request of B items per batch (default: B requests of 1 item)");
  app.add_option("--request-timing", request_timing,
                 "on, or off: the worker's span events, launch timer and idle tracking off, as chronoserve "
                 "--request-timing off (compute_p50_us is then 0)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--pipeline", pipeline,
                 "on: launch each batch before finishing the previous one where the instance pipelines (as a "
                 "busy GPU worker does); off: one batch at a time")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  int pause_us = 0;
  app.add_option("--pause-us", pause_us,
                 "Sleep this long before each batch (as a served worker that waited for requests); items/s "
                 "then counts the pauses, the launch / finish call times do not")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 10000000));
  bool fresh_inputs = false;
  app.add_flag("--fresh-inputs", fresh_inputs,
               "Before each batch, move every input to new memory written by another thread (as gRPC's threads "
               "write the payloads a served batch gathers); items/s then counts that, the call times do not");
  std::vector<std::string> mix_flags;
  app.add_option("--batch-mix", mix_flags,
                 "SIZE:BATCHES,... (e.g. 8:120,9:45): after the batch sizes, one point per flag whose batches "
                 "take these sizes in these proportions, spread evenly (the mix a served point ran: "
                 "benchmarks/run_streaming.sh passes chronobench's responses_by_size); --warmup + -n batches, "
                 "the -n after the warm-up measured");
  app.add_option("--json", json_path, "Write the figures as JSON here");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;

  auto spec = LoadModelDirectory(repository + "/" + model);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  // The mixes are checked before the model loads: a bad flag costs no load.
  std::vector<std::map<int64_t, int64_t>> mixes;
  for (const std::string& flag : mix_flags) {
    absl::StatusOr<std::map<int64_t, int64_t>> mix = chronoserve::bench::ParseBatchMix(flag, spec->max_batch_size);
    if (!mix.ok()) {
      std::fprintf(stderr, "%s\n", std::string(mix.status().message()).c_str());
      return 2;
    }
    mixes.push_back(*std::move(mix));
  }
  DeviceActivityRegistry devices;
  InstanceOptions options;
  options.gpu = gpu_flag >= -1 ? gpu_flag : (CudaDeviceCount() > 0 ? 0 : -1);
  options.activity = devices.Get(options.gpu, SteadyClock::Now());
  options.request_timing = request_timing == "on";
  auto instance = CreateTorchInstance(*spec, options);
  if (!instance.ok()) {
    std::fprintf(stderr, "%s\n", std::string(instance.status().message()).c_str());
    return 1;
  }
  // As a worker does before it serves: run every batch size once, then PrepareForServing (captures
  // CUDA graphs when the config asks for them), so the reference takes the serving path.
  std::set<int64_t> warm_sizes(batch_sizes.begin(), batch_sizes.end());
  for (const auto& mix : mixes) {
    for (const auto& [size, batches] : mix) warm_sizes.insert(size);
  }
  for (int64_t bs : warm_sizes) {
    if (spec->max_batch_size > 0 && bs > spec->max_batch_size) continue;
    if (auto warm = Measure(**instance, *spec, {bs, bs}, one_request, 1, /*pipelined=*/false, /*pause_us=*/0,
                            /*fresh_inputs=*/false);
        !warm.ok()) {
      std::fprintf(stderr, "warm-up at batch %lld: %s\n", static_cast<long long>(bs),
                   std::string(warm.status().message()).c_str());
      return 1;
    }
  }
  if (absl::Status prepared = (*instance)->PrepareForServing(); !prepared.ok()) {
    std::fprintf(stderr, "%s\n", std::string(prepared.message()).c_str());
    return 1;
  }
  const bool pipelined = pipeline == "on" && (*instance)->pipeline_depth() > 1;
  nlohmann::json report;
  report["model"] = model;
  report["pipelined"] = pipelined;
  report["cuda_graphs"] = spec->cuda_graphs;
  report["request_timing"] = request_timing;
  report["device"] = (*instance)->device_name();
  report["backend"] = TorchBuildDescription();
  report["points"] = nlohmann::json::array();
  std::printf("%s on %s (%s)%s\n%10s %14s %14s %14s %14s %14s %14s %14s\n", model.c_str(),
              (*instance)->device_name().c_str(), TorchBuildDescription().c_str(), pipelined ? ", pipelined" : "", "batch",
              "items/s", "p50 batch us", "p99 batch us", "compute p50 us", "launch call us", "of it gather", "finish call us");
  std::fflush(stdout);  // the header says the model is loaded and warm (a profiler attaches then)
  for (int64_t bs : batch_sizes) {
    if (spec->max_batch_size > 0 && bs > spec->max_batch_size) {
      std::printf("%10lld skipped: above max_batch_size %d\n", static_cast<long long>(bs), spec->max_batch_size);
      continue;
    }
    auto point = Measure(**instance, *spec, std::vector<int64_t>(warmup + iterations, bs), one_request, warmup,
                         pipelined, pause_us, fresh_inputs);
    if (!point.ok()) {
      std::fprintf(stderr, "batch %lld: %s\n", static_cast<long long>(bs), std::string(point.status().message()).c_str());
      return 1;
    }
    (*point)["batch_size"] = bs;
    (*point)["requests_per_batch"] = one_request ? 1 : bs;
    PrintPoint(absl::StrCat(bs), *point);
    report["points"].push_back(*point);
  }
  for (size_t m = 0; m < mixes.size(); ++m) {
    auto point = Measure(**instance, *spec, chronoserve::bench::MixSchedule(mixes[m], warmup + iterations), one_request, warmup,
                         pipelined, pause_us, fresh_inputs);
    if (!point.ok()) {
      std::fprintf(stderr, "%s: %s\n", mix_flags[m].c_str(), std::string(point.status().message()).c_str());
      return 1;
    }
    (*point)["batch_size"] = nullptr;  // a mix: mean_batch_size says its mean
    nlohmann::json mix = nlohmann::json::object();
    for (const auto& [size, batches] : mixes[m]) mix[std::to_string(size)] = batches;
    (*point)["batch_mix"] = mix;
    PrintPoint(absl::StrFormat("mix %.1f", (*point)["mean_batch_size"].get<double>()), *point);
    report["points"].push_back(*point);
  }
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}
