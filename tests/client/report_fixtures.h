// Synthetic chronobench measurements for the report and recorder unit tests (report_test.cc,
// latency_recorder_test.cc; no server): an OK request with every span, a point of 1,000 of them
// and one UNAVAILABLE, and a batch sweep of three such points.
#ifndef CHRONOSERVE_TESTS_CLIENT_REPORT_FIXTURES_H_
#define CHRONOSERVE_TESTS_CLIENT_REPORT_FIXTURES_H_

#include <cstdint>
#include <random>

#include "client/chronobench/bench_report.h"
#include "client/chronobench/latency_recorder.h"
#include "client/chronobench/trial_runner.h"

namespace chronoserve::client::bench::testing {

// An OK request whose send came `lag_ns` after its intended time, with jittered queue and compute.
inline RequestRecord OkRecord(std::mt19937_64& rng, int64_t lag_ns = 0) {
  std::uniform_int_distribution<int64_t> jitter(0, 50'000);
  RequestRecord r;
  r.intended_ns = 1'000'000'000;
  r.sent_ns = r.intended_ns + lag_ns;
  RequestTiming t;
  t.queue_ns = 10'000 + jitter(rng);
  t.input_stage_ns = 2'000;
  t.h2d_ns = 5'000;
  t.compute_ns = 80'000 + jitter(rng);
  t.launch_ns = 3'000;
  t.d2h_ns = 1'000;
  t.output_stage_ns = 1'500;
  t.server_total_ns = t.queue_ns + t.input_stage_ns + t.h2d_ns + t.compute_ns + t.d2h_ns + t.output_stage_ns + 4'000;
  t.admit_ns = 2'500;  // of the 4 us the stages leave: admit, handback and a 1 us device gap
  t.handback_ns = 500;
  t.batch_size = 2;
  r.timing = t;
  r.done_ns = r.sent_ns + t.server_total_ns + 60'000 + jitter(rng);
  return r;
}

// 1,000 OK requests (20 µs schedule lag in open loop) and one UNAVAILABLE, one stable window.
inline PointResult MakePoint(LoadMode mode, int64_t batch, double items_per_s) {
  PointResult p;
  p.spec.mode = mode;
  p.spec.concurrency = 4;
  p.spec.rate = 500;
  p.spec.idle_gap_ms = 200;
  p.spec.batch_size = batch;
  std::mt19937_64 rng(batch);
  for (int i = 0; i < 1000; ++i) p.recorder.Record(OkRecord(rng, mode == LoadMode::kRate ? 20'000 : 0));
  RequestRecord failed;
  failed.intended_ns = failed.sent_ns = 0;
  failed.done_ns = 5'000'000;
  failed.grpc_code = 14;  // UNAVAILABLE
  p.recorder.Record(failed);
  p.stable = true;
  p.duration_s = 1;
  p.throughput_rps = items_per_s / batch;
  p.items_per_s = items_per_s;
  p.windows.push_back({1.0, 1000, 1, 1000, 150'000, 0.2});
  return p;
}

// Batch sizes 1, 2 and 4 in `mode`, saturated at batch 2.
inline BenchReport MakeReport(LoadMode mode) {
  BenchReport report;
  report.url = "127.0.0.1:1";
  report.model = "mlp";
  report.server = {{"name", "chronoserve"}, {"version", "0.1.0"}};
  report.model_info = {{"name", "mlp"}};
  report.percentiles = {50, 90, 95, 99, 99.9};
  report.mode = mode;
  report.batch_sweep = true;
  report.points = {MakePoint(mode, 1, 1000), MakePoint(mode, 2, 1900), MakePoint(mode, 4, 1950)};
  report.saturation_index = SaturationIndex({1000, 1900, 1950});
  return report;
}

}  // namespace chronoserve::client::bench::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_REPORT_FIXTURES_H_
