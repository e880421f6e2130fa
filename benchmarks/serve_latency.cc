// bench_serve_latency: closed loop, concurrency 1, against a running chronoserve. Sends warm-up
// requests, then N measured requests, and prints p50/p99 of the client's end-to-end time and of
// every server span the response carries (exact percentiles over all samples). Writes JSON. A
// server started with --request-timing off sends no spans: then only e2e is reported ("-" on the
// console, absent from the JSON's latency_us).
//
//   bench_serve_latency --url 127.0.0.1:8001 --model policy_net --batch-size 128 --requests 1000
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/inference_client.h"
#include "common/tensor_data.h"

namespace {
using chronoserve::RequestTiming;
using chronoserve::client::InferenceClient;
using chronoserve::client::Tensor;

double Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return static_cast<double>(v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)]) / 1000.0;
}

struct Series {
  const char* name;
  std::function<int64_t(const chronoserve::client::InferResult&)> get;
  bool needs_timing = true;  // a server span: only from responses that carry timing
};

}  // namespace

int main(int argc, char** argv) {
  std::string url = "127.0.0.1:8001", model = "policy_net", json_path, label;
  std::vector<std::string> outputs;
  int batch = 1, requests = 1000, warmup = 100, gap_ms = 0;
  CLI::App app{"Closed-loop (concurrency 1) latency of one model on a running chronoserve"};
  app.add_option("-u,--url", url, "Server HOST:PORT")->capture_default_str();
  app.add_option("-m,--model", model, "Model name")->capture_default_str();
  app.add_option("-b,--batch-size", batch, "Items per request")->capture_default_str();
  app.add_option("-n,--requests", requests, "Measured requests")->capture_default_str();
  app.add_option("--warmup-requests", warmup, "Unmeasured requests first")->capture_default_str();
  app.add_option("--idle-gap-ms", gap_ms, "Idle time before each measured request")->capture_default_str();
  app.add_option("--outputs", outputs, "Request only these outputs (default: all)");
  app.add_option("--json", json_path, "Write the figures as JSON here");
  app.add_option("--label", label, "Label for the JSON record");
  CLI11_PARSE(app, argc, argv);

  auto client = InferenceClient::Connect(url);
  auto meta = client->ModelMetadata(model);
  if (!meta.ok()) {
    std::fprintf(stderr, "bench_serve_latency: model '%s' at %s: %s\n", model.c_str(), url.c_str(),
                 std::string(meta.status().message()).c_str());
    return 1;
  }
  std::mt19937_64 rng(1234);
  std::vector<std::vector<Tensor>> variants(4);
  for (auto& inputs : variants) {
    for (const auto& in : meta->inputs()) {
      auto dtype = chronoserve::DataTypeFromName(in.datatype());
      if (!dtype.ok()) return 1;
      Tensor t{in.name(), *dtype, {}, {}};
      for (int i = 0; i < in.shape_size(); ++i) t.shape.push_back(in.shape(i) >= 0 ? in.shape(i) : (i == 0 ? batch : 1));
      t.data = chronoserve::RandomTensorBytes(*dtype, chronoserve::ElementCount(t.shape), rng);
      inputs.push_back(std::move(t));
    }
  }
  std::vector<chronoserve::client::InferResult> results;
  int errors = 0;
  for (int i = 0; i < warmup + requests; ++i) {
    if (i >= warmup && gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    chronoserve::client::InferOptions options;
    options.outputs = outputs;
    auto r = client->Infer(model, variants[i % variants.size()], options);
    if (!r.ok()) {
      if (++errors <= 3) std::fprintf(stderr, "error: %s\n", std::string(r.status().message()).c_str());
      continue;
    }
    r->outputs.clear();  // only the timing is kept
    if (i >= warmup) results.push_back(*std::move(r));
  }
  const Series series[] = {
      {"e2e", [](const auto& r) { return r.e2e_ns; }, false},
      {"transport", [](const auto& r) { return r.e2e_ns - r.timing->server_total_ns; }},
      {"server_total", [](const auto& r) { return r.timing->server_total_ns; }},
      {"queue", [](const auto& r) { return r.timing->queue_ns; }},
      {"input_stage", [](const auto& r) { return r.timing->input_stage_ns; }},
      {"h2d", [](const auto& r) { return r.timing->h2d_ns; }},
      {"compute", [](const auto& r) { return r.timing->compute_ns; }},
      {"launch", [](const auto& r) { return r.timing->launch_ns; }},
      {"d2h", [](const auto& r) { return r.timing->d2h_ns; }},
      {"output_stage", [](const auto& r) { return r.timing->output_stage_ns; }},
      {"outside_gpu_spans", [](const auto& r) { return r.e2e_ns - r.timing->h2d_ns - r.timing->compute_ns - r.timing->d2h_ns; }},
  };
  size_t timed = 0;
  bool device_timed = false;
  for (const auto& r : results) {
    timed += r.timing.has_value() ? 1 : 0;
    device_timed |= r.timing.has_value() && r.timing->device_timed;
  }
  std::printf("\n%s  batch %d  %zu requests (+%d warm-up, %d errors)  spans: %s\n", model.c_str(), batch,
              results.size(), warmup, errors,
              timed == 0 ? "none (server timing off)" : device_timed ? "CUDA events" : "host clock (CPU)");
  if (timed > 0 && timed < results.size()) {
    std::printf("%zu of %zu responses carried no timing: spans are over the others\n", results.size() - timed,
                results.size());
  }
  std::printf("%-18s %12s %12s\n", "stage", "p50 (us)", "p99 (us)");
  nlohmann::json record = {{"label", label}, {"model", model}, {"batch_size", batch},
                           {"requests", results.size()}, {"errors", errors}, {"idle_gap_ms", gap_ms},
                           {"device_timed", device_timed}, {"server_timing", timed > 0},
                           {"responses_without_timing", results.size() - timed}};
  record["latency_us"] = nlohmann::json::object();
  for (const auto& s : series) {
    std::vector<int64_t> values;
    for (const auto& r : results) {
      if (!s.needs_timing || r.timing.has_value()) values.push_back(s.get(r));
    }
    if (values.empty()) {
      std::printf("%-18s %12s %12s\n", s.name, "-", "-");
      continue;
    }
    const double p50 = Percentile(values, 50), p99 = Percentile(values, 99);
    std::printf("%-18s %12.1f %12.1f\n", s.name, p50, p99);
    record["latency_us"][s.name] = {{"p50", p50}, {"p99", p99}};
  }
  if (!json_path.empty()) std::ofstream(json_path) << record.dump(2) << "\n";
  return errors > 0 && results.empty() ? 1 : 0;
}
