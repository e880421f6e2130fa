// bench_request_accounting: what the server's per-request bookkeeping costs when many threads
// finish requests of one model at once, as the completion threads and gRPC's threads do at high
// concurrency. Each thread finishes batches of `--batch` requests as one worker would: Triton's
// statistics (ModelStats::RecordSuccess) and the Prometheus metrics (ServerMetrics::OnRequestDone)
// per request, ModelStats::RecordExecution per batch. No gRPC, no model. Prints ns per request
// (median of rounds) per thread count, and the metrics' totals as a check that nothing was lost.
//
//   bench_request_accounting --threads 1,2,4,8,16 --requests 200000 --rounds 5 --json accounting.json
#include <CLI/CLI.hpp>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/synchronization/barrier.h"
#include "common/cli_integer.h"
#include "common/clock.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "server/core/model_stats.h"
#include "server/telemetry/server_metrics.h"

namespace {
using chronoserve::server::BatchTiming;
using chronoserve::server::InferRequest;
using chronoserve::server::ModelSpec;
using chronoserve::server::ModelStats;
using chronoserve::server::telemetry::ServerMetrics;

// One thread's share: `requests` requests in batches of `batch`, as worker `worker` ran them.
void Finish(int worker, int64_t requests, int batch, const ModelSpec& spec, ModelStats* stats,
            ServerMetrics* metrics) {
  InferRequest r;
  const chronoserve::SteadyClock clock;
  const int64_t start = clock.NowNs();
  for (int64_t i = 0; i < requests; ++i) {
    const int64_t now = clock.NowNs();
    const bool first = i % batch == 0;
    BatchTiming b;
    b.dequeued_ns = start + (i / batch) * 50'000;  // one stamp per batch, as a worker's
    b.staged_ns = b.dequeued_ns + 2'000;
    b.gpu_done_ns = b.dequeued_ns + 30'000;
    b.h2d_ns = 3'000 + i % 977;
    b.compute_ns = 20'000 + i % 1931;
    b.launch_ns = 9'000 + i % 313;
    b.d2h_ns = 2'000 + i % 211;
    b.batch_size = batch;
    b.worker = worker;
    b.device_timed = true;
    r.timeline = {};
    r.timeline.received_ns = b.dequeued_ns - 15'000 - i % 4099;
    r.timeline.enqueued_ns = b.dequeued_ns - 10'000;
    r.timeline.SetBatch(b, first);
    r.timeline.output_done_ns = b.gpu_done_ns + 1'000;
    if (first) stats->RecordExecution(batch, b.staged_ns - b.dequeued_ns + b.h2d_ns, b.compute_ns, b.d2h_ns);
    const chronoserve::RequestTiming& t = r.timeline.Finalize(std::max(now, b.gpu_done_ns + 2'000));
    stats->RecordSuccess(t, 1, true);
    metrics->OnRequestDone(spec, &r, t, absl::OkStatus());
  }
}

// The value of `name`'s line (exact label set) in Prometheus text, or -1.
double Value(const std::string& text, const std::string& name) {
  const size_t at = text.find(name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 1));
}

}  // namespace

int main(int argc, char** argv) {
  std::string thread_list = "1,2,4,8,16";
  int64_t requests = 200000;
  int batch = 8;
  int rounds = 5;
  std::string json_path;
  CLI::App app{"bench_request_accounting: per-request statistics and metrics under concurrent completion"};
  app.add_option("--threads", thread_list, "Thread counts, comma separated")->capture_default_str();
  app.add_option("--requests", requests, "Requests per thread and round")->capture_default_str()->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--batch", batch, "Requests per batch")->capture_default_str()->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--rounds", rounds, "Rounds per thread count; the median is reported")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--json", json_path, "Write the results as JSON");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;

  std::vector<int> counts;
  std::stringstream list(thread_list);
  for (std::string item; std::getline(list, item, ',');) counts.push_back(std::stoi(item));

  ModelSpec spec;
  spec.name = "policy_net";
  spec.version = 1;
  nlohmann::json out = {{"requests_per_thread", requests}, {"batch", batch}, {"rounds", rounds},
                        {"points", nlohmann::json::array()}};
  std::printf("%8s %16s %18s %12s\n", "threads", "ns per request", "requests/s (all)", "check");
  int status = 0;
  for (int threads : counts) {
    std::vector<double> ns_per_request;
    bool counted = true;
    for (int round = 0; round < rounds; ++round) {
      prometheus::Registry registry;
      ServerMetrics metrics(&registry);
      ModelStats stats;
      absl::Barrier* start = new absl::Barrier(threads + 1);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          if (start->Block()) delete start;
          Finish(t, requests, batch, spec, &stats, &metrics);
        });
      }
      const chronoserve::SteadyClock clock;
      const int64_t begin = clock.NowNs();
      if (start->Block()) delete start;
      for (auto& th : pool) th.join();
      const int64_t elapsed = clock.NowNs() - begin;
      // Wall time per request of one thread: what each completing thread pays.
      ns_per_request.push_back(static_cast<double>(elapsed) / static_cast<double>(requests));
      std::vector<prometheus::MetricFamily> families = registry.Collect();
      for (auto& family : metrics.Collect()) families.push_back(std::move(family));
      const std::string text = prometheus::TextSerializer().Serialize(families);
      const double total = static_cast<double>(requests) * threads;
      const double batches = static_cast<double>((requests + batch - 1) / batch) * threads;
      counted = counted &&
                Value(text, R"(chronoserve_request_duration_seconds_count{model="policy_net",version="1"})") == total &&
                Value(text, R"(chronoserve_batches_total{model="policy_net",version="1"})") == batches &&
                stats.Snapshot().success.count == static_cast<uint64_t>(total) &&
                stats.Snapshot().execution_count == static_cast<uint64_t>(batches);
    }
    std::sort(ns_per_request.begin(), ns_per_request.end());
    const double median = ns_per_request[ns_per_request.size() / 2];
    std::printf("%8d %16.1f %18.0f %12s\n", threads, median, 1e9 / median * threads, counted ? "ok" : "LOST");
    if (!counted) status = 1;
    out["points"].push_back({{"threads", threads}, {"ns_per_request", median}, {"rounds_ns", ns_per_request},
                             {"counts_ok", counted}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return status;
}
