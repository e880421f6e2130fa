// bench_cuda_event_cost: what recording a batch's device spans costs the host thread that enqueues
// them (issue 6's timing on / off: with request timing on, a graph batch records three more CUDA
// events than with it off, BENCHMARKS §36-§37; two of them, compute's start and end, could live in
// the graph). Times, per call, on one non-blocking stream of GPU 0:
//   record          cudaEventRecord of a timing event
//   record_untimed  cudaEventRecord of an event created with cudaEventDisableTiming
//   launch          cudaGraphLaunch of a one-node graph (a 4 KiB memset: the stand-in for a model)
//   around          the way a timed graph batch runs now: record, launch, record
//   in_graph_set    the graph with event-record nodes before and after the memset, each pointed at
//                   this launch's events first (cudaGraphExecEventRecordNodeSetEvent x2), launched
//   in_graph_fixed  the same graph instantiated once per event pair, its events fixed in it (as one
//                   executable graph per pipeline slot would be), launched with no update
// Events (and the fixed graphs) are used in turn, `--calls-per-block` of them, so none is recorded
// again before the stream has passed it unless the block is longer than that. The figures' blocks
// are interleaved (block b runs every figure once, in an order rotated by b), so drift on the host
// falls on all alike; each figure is the median ns per call over its blocks, the stream synchronised
// between blocks (untimed). Also reports the median span (cudaEventElapsedTime) of the memset over
// `--span-samples` launches, as the in-graph events and as events recorded around the launch see it.
// Prints a table and writes JSON.
//
//   bench_cuda_event_cost --blocks 400 --calls-per-block 32 --json event_cost.json
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/cuda_ok.h"

namespace {

using chronoserve::bench::CudaOk;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

using Call = std::function<bool(int)>;

// Everything the figures use, released at exit on every path.
struct Resources {
  cudaStream_t stream = nullptr;
  void* buffer = nullptr;
  std::vector<std::array<cudaEvent_t, 2>> timed;
  std::vector<cudaEvent_t> untimed;
  cudaGraph_t plain = nullptr;
  cudaGraph_t spanned = nullptr;
  cudaGraphExec_t plain_exec = nullptr;
  cudaGraphExec_t spanned_exec = nullptr;
  std::vector<cudaGraphExec_t> fixed_execs;  // `spanned` with event pair i in its nodes
  std::array<cudaGraphNode_t, 3> nodes{};    // record -> memset -> record, in `spanned`

  ~Resources() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (cudaGraphExec_t e : fixed_execs) cudaGraphExecDestroy(e);
    if (spanned_exec != nullptr) cudaGraphExecDestroy(spanned_exec);
    if (plain_exec != nullptr) cudaGraphExecDestroy(plain_exec);
    if (spanned != nullptr) cudaGraphDestroy(spanned);
    if (plain != nullptr) cudaGraphDestroy(plain);
    for (auto& pair : timed) {
      for (cudaEvent_t e : pair) {
        if (e != nullptr) cudaEventDestroy(e);
      }
    }
    for (cudaEvent_t e : untimed) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (buffer != nullptr) cudaFree(buffer);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

bool Setup(int pairs, Resources* r) {
  constexpr size_t kBytes = 4096;
  if (!CudaOk(cudaSetDevice(0), "cudaSetDevice") ||
      !CudaOk(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !CudaOk(cudaMalloc(&r->buffer, kBytes), "cudaMalloc")) {
    return false;
  }
  r->timed.resize(pairs);
  r->untimed.resize(pairs);
  for (int i = 0; i < pairs; ++i) {
    for (auto& e : r->timed[i]) {
      if (!CudaOk(cudaEventCreate(&e), "cudaEventCreate")) return false;
    }
    if (!CudaOk(cudaEventCreateWithFlags(&r->untimed[i], cudaEventDisableTiming), "cudaEventCreateWithFlags")) {
      return false;
    }
  }
  cudaMemsetParams memset{};
  memset.dst = r->buffer;
  memset.value = 0x5a;
  memset.elementSize = 1;
  memset.width = kBytes;
  memset.height = 1;
  cudaGraphNode_t plain_memset = nullptr;
  auto& n = r->nodes;
  if (!CudaOk(cudaGraphCreate(&r->plain, 0), "cudaGraphCreate") ||
      !CudaOk(cudaGraphAddMemsetNode(&plain_memset, r->plain, nullptr, 0, &memset), "cudaGraphAddMemsetNode") ||
      !CudaOk(cudaGraphCreate(&r->spanned, 0), "cudaGraphCreate") ||
      !CudaOk(cudaGraphAddEventRecordNode(&n[0], r->spanned, nullptr, 0, r->timed[0][0]),
              "cudaGraphAddEventRecordNode") ||
      !CudaOk(cudaGraphAddMemsetNode(&n[1], r->spanned, &n[0], 1, &memset), "cudaGraphAddMemsetNode") ||
      !CudaOk(cudaGraphAddEventRecordNode(&n[2], r->spanned, &n[1], 1, r->timed[0][1]),
              "cudaGraphAddEventRecordNode") ||
      !CudaOk(cudaGraphInstantiate(&r->plain_exec, r->plain, 0), "cudaGraphInstantiate") ||
      !CudaOk(cudaGraphInstantiate(&r->spanned_exec, r->spanned, 0), "cudaGraphInstantiate")) {
    return false;
  }
  // One executable graph per event pair: the template's nodes pointed at the pair, then instantiated.
  for (int i = 0; i < pairs; ++i) {
    cudaGraphExec_t exec = nullptr;
    if (!CudaOk(cudaGraphEventRecordNodeSetEvent(n[0], r->timed[i][0]), "cudaGraphEventRecordNodeSetEvent") ||
        !CudaOk(cudaGraphEventRecordNodeSetEvent(n[2], r->timed[i][1]), "cudaGraphEventRecordNodeSetEvent") ||
        !CudaOk(cudaGraphInstantiate(&exec, r->spanned, 0), "cudaGraphInstantiate")) {
      return false;
    }
    r->fixed_execs.push_back(exec);
  }
  return true;
}

// Median span in µs over `samples` runs of `run(i)` (which records pair i's events), pairs in turn,
// the stream synchronised every `pairs` runs before their spans are read.
double MedianSpanUs(Resources& r, int samples, const Call& run) {
  const int pairs = static_cast<int>(r.timed.size());
  std::vector<double> spans;
  for (int done = 0; done < samples;) {
    const int n = std::min(pairs, samples - done);
    for (int i = 0; i < n; ++i) {
      if (!run(i)) return -1;
    }
    if (!CudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize")) return -1;
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      if (!CudaOk(cudaEventElapsedTime(&ms, r.timed[i][0], r.timed[i][1]), "cudaEventElapsedTime")) return -1;
      spans.push_back(ms * 1000.0);
    }
    done += n;
  }
  return Median(spans);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Host cost of recording a batch's CUDA events: around a graph launch vs inside the graph"};
  int blocks = 400;
  int per_block = 32;
  int span_samples = 1000;
  std::string json_path;
  app.add_option("--blocks", blocks, "Timed blocks per figure")->check(CLI::Range(3, 1000000))->capture_default_str();
  app.add_option("--calls-per-block", per_block, "Calls per block (and event pairs used in turn)")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--span-samples", span_samples, "Launches per span median")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);

  Resources r;
  if (!Setup(per_block, &r)) return 1;
  const int pairs = per_block;
  auto pair_of = [&](int i) -> std::array<cudaEvent_t, 2>& { return r.timed[i % pairs]; };
  const std::vector<std::pair<std::string, Call>> figures = {
      {"record", [&](int i) { return CudaOk(cudaEventRecord(pair_of(i)[0], r.stream), "cudaEventRecord"); }},
      {"record_untimed",
       [&](int i) { return CudaOk(cudaEventRecord(r.untimed[i % pairs], r.stream), "cudaEventRecord"); }},
      {"launch", [&](int) { return CudaOk(cudaGraphLaunch(r.plain_exec, r.stream), "cudaGraphLaunch"); }},
      {"around",
       [&](int i) {
         return CudaOk(cudaEventRecord(pair_of(i)[0], r.stream), "cudaEventRecord") &&
                CudaOk(cudaGraphLaunch(r.plain_exec, r.stream), "cudaGraphLaunch") &&
                CudaOk(cudaEventRecord(pair_of(i)[1], r.stream), "cudaEventRecord");
       }},
      {"in_graph_set",
       [&](int i) {
         return CudaOk(cudaGraphExecEventRecordNodeSetEvent(r.spanned_exec, r.nodes[0], pair_of(i)[0]),
                      "cudaGraphExecEventRecordNodeSetEvent") &&
                CudaOk(cudaGraphExecEventRecordNodeSetEvent(r.spanned_exec, r.nodes[2], pair_of(i)[1]),
                      "cudaGraphExecEventRecordNodeSetEvent") &&
                CudaOk(cudaGraphLaunch(r.spanned_exec, r.stream), "cudaGraphLaunch");
       }},
      {"in_graph_fixed",
       [&](int i) { return CudaOk(cudaGraphLaunch(r.fixed_execs[i % pairs], r.stream), "cudaGraphLaunch"); }},
  };
  const size_t count = figures.size();
  // Interleaved blocks (3 warm-up rounds first, not kept): block b runs figure (b + k) % count for
  // k = 0..count-1, each for `per_block` calls, timed, then the stream is synchronised.
  std::vector<std::vector<double>> ns(count);
  for (int b = -3; b < blocks; ++b) {
    for (size_t k = 0; k < count; ++k) {
      const size_t f = (static_cast<size_t>(b + 3) + k) % count;
      const int64_t start = NowNs();
      for (int i = 0; i < per_block; ++i) {
        if (!figures[f].second(i)) return 1;
      }
      const double per_call = static_cast<double>(NowNs() - start) / per_block;
      if (!CudaOk(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize")) return 1;
      if (b >= 0) ns[f].push_back(per_call);
    }
  }
  cudaDeviceProp props{};
  int driver = 0;
  int runtime = 0;
  if (!CudaOk(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties") ||
      !CudaOk(cudaDriverGetVersion(&driver), "cudaDriverGetVersion") ||
      !CudaOk(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion")) {
    return 1;
  }
  nlohmann::json out = {{"device", props.name}, {"cuda_driver", driver}, {"cuda_runtime", runtime},
                        {"blocks", blocks}, {"calls_per_block", per_block}};
  std::printf("%s, CUDA driver %d, runtime %d; %d blocks of %d calls, interleaved\n", props.name, driver, runtime,
              blocks, per_block);
  std::printf("%-16s %12s\n", "call", "host ns");
  for (size_t f = 0; f < count; ++f) {
    const double median = Median(ns[f]);
    out["ns_per_call"][figures[f].first] = median;
    std::printf("%-16s %12.0f\n", figures[f].first.c_str(), median);
  }
  // The in-graph layouts against the current one, block by block (the same block index ran all).
  auto index_of = [&](const std::string& name) {
    size_t f = 0;
    while (f < count && figures[f].first != name) ++f;
    return f;
  };
  const size_t around = index_of("around");
  for (const char* name : {"in_graph_set", "in_graph_fixed"}) {
    const size_t g = index_of(name);
    std::vector<double> diff;
    for (size_t b = 0; b < ns[around].size(); ++b) diff.push_back(ns[g][b] - ns[around][b]);
    const double d = Median(diff);
    out["paired_ns_vs_around"][name] = d;
    std::printf("%s - around, median of the per-block differences: %+.0f ns per timed launch\n", name, d);
  }
  const double in_graph_us = MedianSpanUs(r, span_samples, [&](int i) {
    return CudaOk(cudaGraphLaunch(r.fixed_execs[i], r.stream), "cudaGraphLaunch");
  });
  const double around_us = MedianSpanUs(r, span_samples, [&](int i) {
    return CudaOk(cudaEventRecord(r.timed[i][0], r.stream), "cudaEventRecord") &&
           CudaOk(cudaGraphLaunch(r.plain_exec, r.stream), "cudaGraphLaunch") &&
           CudaOk(cudaEventRecord(r.timed[i][1], r.stream), "cudaEventRecord");
  });
  if (in_graph_us < 0 || around_us < 0) return 1;
  out["span_us_median"] = {{"in_graph", in_graph_us}, {"around", around_us}, {"samples", span_samples}};
  std::printf("span of the 4 KiB memset, median of %d: in the graph %.2f us, recorded around the launch %.2f us\n",
              span_samples, in_graph_us, around_us);
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
