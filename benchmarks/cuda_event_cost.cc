// bench_cuda_event_cost: what recording a batch's device spans costs the host thread that enqueues
// them (issue 6's timing on / off: with request timing on, a graph batch records three more CUDA
// events than with it off, BENCHMARKS §36-§37). Times, per call, on one non-blocking stream of GPU 0:
//   record          cudaEventRecord of a timing event
//   record_untimed  cudaEventRecord of an event created with cudaEventDisableTiming
//   launch          cudaGraphLaunch of a one-node graph (a 4 KiB memset: the stand-in for a model)
//   around          the way a timed graph batch runs now: record, launch, record
//   in_graph        the same graph with event-record nodes before and after the memset, each pointed
//                   at this launch's events first (cudaGraphExecEventRecordNodeSetEvent x2), then
//                   launched: the spans recorded by the graph itself
// Each figure is the median over blocks of `--calls-per-block` calls (the stream synchronised between
// blocks, untimed). Checks that the in-graph events give a span (cudaEventElapsedTime) like the
// recorded ones. Prints a table and writes JSON.
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

namespace {

bool Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
  return false;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Median ns per call of `call` (given the call's index) over `blocks` blocks of `per_block` calls.
double MedianNsPerCall(cudaStream_t stream, int blocks, int per_block, const std::function<bool(int)>& call) {
  std::vector<double> per_call;
  int index = 0;
  for (int b = 0; b < blocks; ++b) {
    const int64_t start = NowNs();
    for (int i = 0; i < per_block; ++i) {
      if (!call(index++)) return -1;
    }
    per_call.push_back(static_cast<double>(NowNs() - start) / per_block);
    if (!Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return -1;
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Host cost of recording a batch's CUDA events: around a graph launch vs inside the graph"};
  int blocks = 400;
  int per_block = 32;
  std::string json_path;
  app.add_option("--blocks", blocks, "Timed blocks per figure")->check(CLI::Range(3, 1000000))->capture_default_str();
  app.add_option("--calls-per-block", per_block, "Calls per block")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);

  cudaStream_t stream = nullptr;
  void* buffer = nullptr;
  constexpr size_t kBytes = 4096;
  if (!Check(cudaSetDevice(0), "cudaSetDevice") ||
      !Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !Check(cudaMalloc(&buffer, kBytes), "cudaMalloc")) {
    return 1;
  }
  // Events used in turn, as a worker's pipeline slots use theirs: a pair per call in flight.
  const int pairs = per_block;
  std::vector<std::array<cudaEvent_t, 2>> timed(pairs);
  for (auto& pair : timed) {
    for (auto& e : pair) {
      if (!Check(cudaEventCreate(&e), "cudaEventCreate")) return 1;
    }
  }
  cudaEvent_t untimed = nullptr;
  if (!Check(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return 1;

  cudaMemsetParams memset{};
  memset.dst = buffer;
  memset.value = 0x5a;
  memset.elementSize = 1;
  memset.width = kBytes;
  memset.height = 1;
  // The plain graph: one memset. The timed graph: record -> memset -> record.
  cudaGraph_t plain = nullptr;
  cudaGraph_t spanned = nullptr;
  cudaGraphNode_t plain_memset = nullptr;
  std::array<cudaGraphNode_t, 3> nodes{};
  if (!Check(cudaGraphCreate(&plain, 0), "cudaGraphCreate") ||
      !Check(cudaGraphAddMemsetNode(&plain_memset, plain, nullptr, 0, &memset), "cudaGraphAddMemsetNode") ||
      !Check(cudaGraphCreate(&spanned, 0), "cudaGraphCreate") ||
      !Check(cudaGraphAddEventRecordNode(&nodes[0], spanned, nullptr, 0, timed[0][0]), "cudaGraphAddEventRecordNode") ||
      !Check(cudaGraphAddMemsetNode(&nodes[1], spanned, &nodes[0], 1, &memset), "cudaGraphAddMemsetNode") ||
      !Check(cudaGraphAddEventRecordNode(&nodes[2], spanned, &nodes[1], 1, timed[0][1]), "cudaGraphAddEventRecordNode")) {
    return 1;
  }
  cudaGraphExec_t plain_exec = nullptr;
  cudaGraphExec_t spanned_exec = nullptr;
  if (!Check(cudaGraphInstantiate(&plain_exec, plain, 0), "cudaGraphInstantiate") ||
      !Check(cudaGraphInstantiate(&spanned_exec, spanned, 0), "cudaGraphInstantiate")) {
    return 1;
  }

  auto pair_of = [&](int i) -> std::array<cudaEvent_t, 2>& { return timed[i % pairs]; };
  const std::vector<std::pair<std::string, std::function<bool(int)>>> figures = {
      {"record", [&](int i) { return Check(cudaEventRecord(pair_of(i)[0], stream), "cudaEventRecord"); }},
      {"record_untimed", [&](int) { return Check(cudaEventRecord(untimed, stream), "cudaEventRecord"); }},
      {"launch", [&](int) { return Check(cudaGraphLaunch(plain_exec, stream), "cudaGraphLaunch"); }},
      {"around",
       [&](int i) {
         return Check(cudaEventRecord(pair_of(i)[0], stream), "cudaEventRecord") &&
                Check(cudaGraphLaunch(plain_exec, stream), "cudaGraphLaunch") &&
                Check(cudaEventRecord(pair_of(i)[1], stream), "cudaEventRecord");
       }},
      {"in_graph",
       [&](int i) {
         return Check(cudaGraphExecEventRecordNodeSetEvent(spanned_exec, nodes[0], pair_of(i)[0]),
                      "cudaGraphExecEventRecordNodeSetEvent") &&
                Check(cudaGraphExecEventRecordNodeSetEvent(spanned_exec, nodes[2], pair_of(i)[1]),
                      "cudaGraphExecEventRecordNodeSetEvent") &&
                Check(cudaGraphLaunch(spanned_exec, stream), "cudaGraphLaunch");
       }},
  };
  // Warm-up: every figure's calls once, a block each.
  for (const auto& [name, call] : figures) {
    if (MedianNsPerCall(stream, 3, per_block, call) < 0) return 1;
  }
  nlohmann::json out = {{"blocks", blocks}, {"calls_per_block", per_block}};
  std::printf("%-16s %12s\n", "call", "host ns");
  for (const auto& [name, call] : figures) {
    const double ns = MedianNsPerCall(stream, blocks, per_block, call);
    if (ns < 0) return 1;
    out["ns_per_call"][name] = ns;
    std::printf("%-16s %12.0f\n", name.c_str(), ns);
  }
  // The spans: the last in-graph launch's events against a recorded pair around the plain graph.
  float in_graph_ms = -1;
  float around_ms = -1;
  if (!Check(cudaGraphExecEventRecordNodeSetEvent(spanned_exec, nodes[0], timed[0][0]), "set") ||
      !Check(cudaGraphExecEventRecordNodeSetEvent(spanned_exec, nodes[2], timed[0][1]), "set") ||
      !Check(cudaGraphLaunch(spanned_exec, stream), "cudaGraphLaunch") ||
      !Check(cudaEventRecord(timed[1][0], stream), "cudaEventRecord") ||
      !Check(cudaGraphLaunch(plain_exec, stream), "cudaGraphLaunch") ||
      !Check(cudaEventRecord(timed[1][1], stream), "cudaEventRecord") ||
      !Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") ||
      !Check(cudaEventElapsedTime(&in_graph_ms, timed[0][0], timed[0][1]), "cudaEventElapsedTime(in graph)") ||
      !Check(cudaEventElapsedTime(&around_ms, timed[1][0], timed[1][1]), "cudaEventElapsedTime(around)")) {
    return 1;
  }
  out["span_us"] = {{"in_graph", in_graph_ms * 1000.0}, {"around", around_ms * 1000.0}};
  std::printf("span of one 4 KiB memset: in graph %.2f us, recorded around the launch %.2f us\n", in_graph_ms * 1000.0,
              around_ms * 1000.0);
  const double around = out["ns_per_call"]["around"];
  const double in_graph = out["ns_per_call"]["in_graph"];
  std::printf("a timed launch: %.0f ns around, %.0f ns in the graph (%.2fx)\n", around, in_graph, around / in_graph);
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  cudaGraphExecDestroy(spanned_exec);
  cudaGraphExecDestroy(plain_exec);
  cudaGraphDestroy(spanned);
  cudaGraphDestroy(plain);
  return 0;
}
