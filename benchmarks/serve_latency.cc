// bench_serve_latency: closed loop, concurrency 1, against a running chronoserve. Sends warm-up
// requests, then N measured requests, and prints p50/p99 of the client's end-to-end time and of
// every server span the response carries (exact percentiles over all samples). Writes JSON. A
// server started with --request-timing off sends no spans: then only e2e is reported ("-" on the
// console, absent from the JSON's latency_us).
// With --shared-memory system the tensors travel through POSIX shared memory registered with the
// server; e2e then also counts copying the inputs into the region and the outputs out of it, and
// two more rows split it: `call` (the gRPC call alone) and `client_copies` (e2e - call). Both stay
// inside `transport` (e2e - server_total), as they always have. With --shared-memory cuda (a build
// with CUDA) the regions are GPU memory of this process, shared through CUDA IPC handles: the client's
// copies are then cudaMemcpy host -> its GPU memory and back, and `call_outside_gpu_spans` (call
// less the GPU spans) is what a client whose tensors already live on the GPU would see.
//
//   bench_serve_latency --url 127.0.0.1:8001 --model policy_net --batch-size 128 --requests 1000
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmarks/percentile.h"
#include "client/cuda_shared_memory.h"
#include "client/inference_client.h"
#include "client/shm_region.h"
#include "common/cli_integer.h"
#include "common/clock.h"
#include "common/malloc_tuning.h"
#include "common/tensor_data.h"


namespace {
using chronoserve::RequestTiming;
using chronoserve::client::InferenceClient;
using chronoserve::bench::PercentileUs;
using chronoserve::client::Tensor;

// --shared-memory system|cuda: one input and one output region, registered for the whole run.
class ShmTransport {
 public:
  static absl::StatusOr<std::unique_ptr<ShmTransport>> Create(
      InferenceClient* client, const inference::ModelMetadataResponse& meta,
      const std::vector<std::vector<Tensor>>& variants, int batch, int64_t output_bytes, bool cuda, bool preload) {
    auto t = std::unique_ptr<ShmTransport>(new ShmTransport(client));
    t->preload_ = preload;
    size_t in_bytes = 1;
    for (const auto& inputs : variants) {
      size_t total = 0;
      for (const auto& in : inputs) total += Align(in.data.size());
      // Preloaded: every variant at its own offset; otherwise each request writes at offset 0.
      t->variant_offsets_.push_back(preload ? in_bytes - 1 : 0);
      in_bytes = preload ? in_bytes + total : std::max(in_bytes, total);
    }
    size_t out_total = 0;
    for (const auto& out : meta.outputs()) {
      auto dtype = chronoserve::DataTypeFromName(out.datatype());
      if (!dtype.ok()) return dtype.status();
      size_t bytes = static_cast<size_t>(output_bytes);
      if (bytes == 0) {
        int64_t elements = 1;
        for (int i = 0; i < out.shape_size(); ++i) {
          const int64_t d = out.shape(i) >= 0 ? out.shape(i) : (i == 0 ? batch : -1);
          if (d < 0) return absl::InvalidArgumentError(absl::StrCat("output '", out.name(), "' has variable dims: give --output-shared-memory-size"));
          elements *= d;
        }
        bytes = static_cast<size_t>(elements) * chronoserve::DataTypeByteSize(*dtype);
      }
      t->outputs_[out.name()] = {t->out_name_, bytes, out_total};
      out_total += Align(bytes);
    }
    const std::string tag = absl::StrCat("bench_serve_latency_", getpid());
    const size_t out_bytes = std::max<size_t>(out_total, 1);
    // The regions' memory: POSIX shared memory, or (--shared-memory cuda) this process's GPU memory.
    using chronoserve::client::ShmRegion;
    auto in = cuda ? ShmRegion::Cuda(0, in_bytes) : ShmRegion::System("/" + tag + "_in", in_bytes);
    if (!in.ok()) return in.status();
    auto out = cuda ? ShmRegion::Cuda(0, out_bytes) : ShmRegion::System("/" + tag + "_out", out_bytes);
    if (!out.ok()) return out.status();
    t->in_ = *std::move(in);
    t->out_ = *std::move(out);
    t->in_name_ = tag + "_in";
    t->out_name_ = tag + "_out";
    for (auto& [name, ref] : t->outputs_) ref.region = t->out_name_;
    if (auto s = t->in_->Register(client->stub(), t->in_name_, RpcDeadline()); !s.ok()) return s;
    t->registered_ = true;
    if (auto s = t->out_->Register(client->stub(), t->out_name_, RpcDeadline()); !s.ok()) return s;
    t->copied_out_.resize(t->out_->byte_size());
    if (preload) {
      for (size_t v = 0; v < variants.size(); ++v) {
        size_t offset = t->variant_offsets_[v];
        for (const Tensor& in : variants[v]) {
          if (auto s = t->in_->Write(offset, in.data.data(), in.data.size()); !s.ok()) return s;
          offset += Align(in.data.size());
        }
      }
    }
    return t;
  }
  ~ShmTransport() {
    if (!registered_) return;
    in_->Unregister(client_->stub(), in_name_, RpcDeadline()).IgnoreError();
    out_->Unregister(client_->stub(), out_name_, RpcDeadline()).IgnoreError();
  }

  // Copies input variant `variant` in, infers, copies out; e2e_ns covers all three, *call_ns the
  // gRPC call alone. Preloaded: no copies (the inputs are in the region already, the outputs are
  // left there), so e2e is the call.
  absl::StatusOr<chronoserve::client::InferResult> Infer(const std::string& model, size_t variant,
                                                         const std::vector<Tensor>& inputs,
                                                         chronoserve::client::InferOptions options, int64_t* call_ns) {
    const int64_t start = chronoserve::SteadyClock::Now();
    std::vector<Tensor> refs;
    size_t offset = variant_offsets_[variant];
    for (const Tensor& in : inputs) {
      if (!preload_) {
        if (absl::Status s = in_->Write(offset, in.data.data(), in.data.size()); !s.ok()) return s;
      }
      Tensor ref{in.name, in.dtype, in.shape, {}};
      ref.shared_memory = chronoserve::client::SharedMemoryRef{in_name_, in.data.size(), offset};
      refs.push_back(std::move(ref));
      offset += Align(in.data.size());
    }
    for (const auto& [name, ref] : outputs_) {
      if (options.outputs.empty() || std::count(options.outputs.begin(), options.outputs.end(), name) > 0) {
        options.output_shared_memory[name] = ref;
      }
    }
    auto result = client_->Infer(model, refs, options);
    if (!result.ok()) return result;
    *call_ns = result->e2e_ns;
    for (const auto& out : result->outputs) {
      if (preload_ || !out.shared_memory.has_value()) continue;
      const size_t bytes = std::min(out.shared_memory->byte_size,
                                    static_cast<size_t>(chronoserve::ElementCount(out.shape)) *
                                        chronoserve::DataTypeByteSize(out.dtype));
      if (absl::Status s = out_->Read(out.shared_memory->offset, bytes, copied_out_.data() + out.shared_memory->offset);
          !s.ok()) {
        return s;
      }
    }
    result->e2e_ns = chronoserve::SteadyClock::Now() - start;
    return result;
  }

 private:
  explicit ShmTransport(InferenceClient* client) : client_(client) {}
  static size_t Align(size_t n) { return (n + 63) / 64 * 64; }
  static absl::Time RpcDeadline() { return absl::Now() + absl::Seconds(10); }

  InferenceClient* const client_;
  std::unique_ptr<chronoserve::client::ShmRegion> in_, out_;
  std::string in_name_, out_name_;
  std::map<std::string, chronoserve::client::SharedMemoryRef> outputs_;
  std::string copied_out_;  // the client's copy of the outputs
  std::vector<size_t> variant_offsets_;  // where each input variant starts in the input region
  bool preload_ = false;
  bool registered_ = false;
};

// One measured request: the client's result and the gRPC call alone (the same as e2e unless the
// tensors went through shared memory, whose copies e2e includes).
struct Sample {
  chronoserve::client::InferResult r;
  int64_t call_ns = 0;
};

struct Series {
  const char* name;
  std::function<int64_t(const Sample&)> get;
  bool needs_timing = true;  // a server span: only from responses that carry timing
  bool shared_memory_only = false;  // the same as another row unless the tensors use shared memory
};

// Random inputs of `batch` items for every input of `meta`.
absl::StatusOr<std::vector<Tensor>> RandomInputs(const inference::ModelMetadataResponse& meta, int batch,
                                                 std::mt19937_64& rng) {
  std::vector<Tensor> inputs;
  for (const auto& in : meta.inputs()) {
    auto dtype = chronoserve::DataTypeFromName(in.datatype());
    if (!dtype.ok()) return dtype.status();
    Tensor t{in.name(), *dtype, {}, {}};
    for (int i = 0; i < in.shape_size(); ++i) t.shape.push_back(in.shape(i) >= 0 ? in.shape(i) : (i == 0 ? batch : 1));
    t.data = chronoserve::RandomTensorBytes(*dtype, chronoserve::ElementCount(t.shape), rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// Minor page faults of this process so far.
int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// --warm-client-requests: this process's client path (code, allocator, protobuf) warmed on a
// connection of its own, closed before the measured connection opens.
absl::Status WarmClient(const std::string& url, const std::string& model, int batch, int requests) {
  auto client = InferenceClient::Connect(url);
  auto meta = client->ModelMetadata(model);
  if (!meta.ok()) return meta.status();
  std::mt19937_64 rng(4321);
  auto inputs = RandomInputs(*meta, batch, rng);
  if (!inputs.ok()) return inputs.status();
  for (int i = 0; i < requests; ++i) {
    auto r = client->Infer(model, *inputs, {});
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "127.0.0.1:8001", model = "policy_net", json_path, label;
  std::vector<std::string> outputs;
  int batch = 1, requests = 1000, warmup = 100, gap_ms = 0;
  std::string shared_memory = "none";
  int64_t output_shm_bytes = 0;
  std::string warm_client_url;
  int warm_client_requests = 0;
  CLI::App app{"Closed-loop (concurrency 1) latency of one model on a running chronoserve"};
  app.add_option("-u,--url", url, "Server HOST:PORT")->capture_default_str();
  app.add_option("-m,--model", model, "Model name")->capture_default_str();
  app.add_option("-b,--batch-size", batch, "Items per request")->capture_default_str()->transform(chronoserve::IntegerIn(1, 1 << 30));
  app.add_option("-n,--requests", requests, "Measured requests")->capture_default_str()->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--warmup-requests", warmup, "Unmeasured requests first")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 100000000));
  app.add_option("--idle-gap-ms", gap_ms, "Idle time before each measured request")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 3600000));
  app.add_option("--outputs", outputs, "Request only these outputs (default: all)");
  app.add_option("--json", json_path, "Write the figures as JSON here");
  app.add_option("--label", label, "Label for the JSON record");
  app.add_option("--shared-memory", shared_memory,
                 "none; system: tensors through POSIX shared memory; cuda: through this process's GPU memory "
                 "(CUDA IPC; a build with CUDA). e2e includes the client's copies in and out")
      ->check(CLI::IsMember({"none", "system", "cuda"}))
      ->capture_default_str();
  bool preload = false;
  app.add_flag("--preload-shared-memory", preload,
               "With --shared-memory: write every input variant into the region once before the run and leave "
               "the outputs there (no client copies per request: e2e is the call, as for a client whose tensors "
               "already live in the region)");
  app.add_option("--output-shared-memory-size", output_shm_bytes,
                 "Bytes per output tensor in shared memory (default: from the output shapes and the batch size)")
      ->transform(chronoserve::IntegerIn(0, int64_t{1} << 40));
  app.add_option("--warm-client-requests", warm_client_requests,
                 "Before connecting to --url, send this many requests over a separate connection to "
                 "--warm-client-url, so the measured requests pay the server's and their connection's "
                 "first-request costs but not this process's own cold start")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 100000000));
  app.add_option("--warm-client-url", warm_client_url,
                 "Server for --warm-client-requests (default: --url); another server with the same model "
                 "leaves the measured server untouched until its first measured request");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  chronoserve::TuneMallocForLargeMessages();  // gRPC's read buffers stay in the heap (common/malloc_tuning.h)
  if (shared_memory == "cuda" && !chronoserve::client::CudaSharedMemory::Available()) {
    std::fprintf(stderr, "bench_serve_latency: --shared-memory cuda needs a build with CUDA (this one was built against "
                         "a LibTorch without it); use --shared-memory system\n");
    return 1;
  }

  if (warm_client_requests > 0) {
    if (absl::Status s = WarmClient(warm_client_url.empty() ? url : warm_client_url, model, batch,
                                    warm_client_requests);
        !s.ok()) {
      std::fprintf(stderr, "bench_serve_latency: warming the client: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
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
    auto made = RandomInputs(*meta, batch, rng);
    if (!made.ok()) return 1;
    inputs = *std::move(made);
  }
  std::unique_ptr<ShmTransport> shm;
  if (shared_memory != "none") {
    auto created =
        ShmTransport::Create(client.get(), *meta, variants, batch, output_shm_bytes, shared_memory == "cuda", preload);
    if (!created.ok()) {
      std::fprintf(stderr, "bench_serve_latency: shared memory: %s\n", std::string(created.status().message()).c_str());
      return 1;
    }
    shm = *std::move(created);
  }
  std::vector<Sample> results;
  int errors = 0;
  int64_t measured_faults = 0;  // minor page faults of this process over the measured requests
  for (int i = 0; i < warmup + requests; ++i) {
    const int64_t faults_before = i >= warmup ? MinorFaults() : 0;
    if (i >= warmup && gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    chronoserve::client::InferOptions options;
    options.outputs = outputs;
    const size_t variant = i % variants.size();
    const auto& inputs = variants[variant];
    int64_t call_ns = 0;
    auto r = shm != nullptr ? shm->Infer(model, variant, inputs, options, &call_ns) : client->Infer(model, inputs, options);
    if (!r.ok()) {
      if (++errors <= 3) std::fprintf(stderr, "error: %s\n", std::string(r.status().message()).c_str());
      continue;
    }
    if (i >= warmup) measured_faults += MinorFaults() - faults_before;
    r->outputs.clear();  // only the timing is kept
    if (shm == nullptr) call_ns = r->e2e_ns;
    if (i >= warmup) results.push_back({*std::move(r), call_ns});
  }
  const Series series[] = {
      {"e2e", [](const Sample& s) { return s.r.e2e_ns; }, false},
      {"call", [](const Sample& s) { return s.call_ns; }, false, true},
      {"client_copies", [](const Sample& s) { return s.r.e2e_ns - s.call_ns; }, false, true},
      {"transport", [](const Sample& s) { return s.r.e2e_ns - s.r.timing->server_total_ns; }},
      {"server_total", [](const Sample& s) { return s.r.timing->server_total_ns; }},
      {"queue", [](const Sample& s) { return s.r.timing->queue_ns; }},
      {"input_stage", [](const Sample& s) { return s.r.timing->input_stage_ns; }},
      {"h2d", [](const Sample& s) { return s.r.timing->h2d_ns; }},
      {"compute", [](const Sample& s) { return s.r.timing->compute_ns; }},
      {"launch", [](const Sample& s) { return s.r.timing->launch_ns; }},
      {"d2h", [](const Sample& s) { return s.r.timing->d2h_ns; }},
      {"output_stage", [](const Sample& s) { return s.r.timing->output_stage_ns; }},
      {"admit", [](const Sample& s) { return s.r.timing->admit_ns; }},
      {"handback", [](const Sample& s) { return s.r.timing->handback_ns; }},
      {"device_gap", [](const Sample& s) { return s.r.timing->device_gap_ns(); }},
      {"outside_gpu_spans", [](const Sample& s) { return s.r.e2e_ns - s.r.timing->h2d_ns - s.r.timing->compute_ns - s.r.timing->d2h_ns; }},
      {"call_outside_gpu_spans",
       [](const Sample& s) { return s.call_ns - s.r.timing->h2d_ns - s.r.timing->compute_ns - s.r.timing->d2h_ns; },
       true, true},
  };
  size_t timed = 0;
  bool device_timed = false;
  for (const auto& [r, call_ns] : results) {
    timed += r.timing.has_value() ? 1 : 0;
    device_timed |= r.timing.has_value() && r.timing->device_timed;
  }
  std::printf("\n%s  batch %d  %zu requests (+%d warm-up, %d errors)  spans: %s  tensors: %s\n", model.c_str(),
              batch, results.size(), warmup, errors,
              timed == 0 ? "none (server timing off)" : device_timed ? "CUDA events" : "host clock (CPU)",
              shm == nullptr                 ? "in the gRPC messages"
              : preload                 ? (shared_memory == "cuda" ? "CUDA shared memory, preloaded (no client copies)"
                                                               : "system shared memory, preloaded (no client copies)")
              : shared_memory == "cuda" ? "CUDA shared memory (e2e includes the client's copies to and from its GPU)"
                                        : "system shared memory (e2e includes the copies)");
  if (timed > 0 && timed < results.size()) {
    std::printf("%zu of %zu responses carried no timing: spans are over the others\n", results.size() - timed,
                results.size());
  }
  std::printf("%-18s %12s %12s\n", "stage", "p50 (us)", "p99 (us)");
  nlohmann::json record = {{"label", label}, {"model", model}, {"batch_size", batch}, {"shared_memory", shared_memory},
                           {"preloaded_shared_memory", shm != nullptr && preload},
                           {"requests", results.size()}, {"errors", errors}, {"idle_gap_ms", gap_ms},
                           {"warm_client_requests", warm_client_requests},
                           {"device_timed", device_timed}, {"server_timing", timed > 0},
                           {"responses_without_timing", results.size() - timed},
                           {"client_minor_faults_per_request",
                            results.empty() ? 0.0 : static_cast<double>(measured_faults) / results.size()}};
  std::printf("client page faults per request: %.2f\n",
              results.empty() ? 0.0 : static_cast<double>(measured_faults) / results.size());
  record["latency_us"] = nlohmann::json::object();
  for (const auto& s : series) {
    if (s.shared_memory_only && shm == nullptr) continue;
    std::vector<int64_t> values;
    for (const Sample& sample : results) {
      if (!s.needs_timing || sample.r.timing.has_value()) values.push_back(s.get(sample));
    }
    if (values.empty()) {
      std::printf("%-18s %12s %12s\n", s.name, "-", "-");
      continue;
    }
    const double p50 = PercentileUs(values, 50), p99 = PercentileUs(values, 99);
    std::printf("%-18s %12.1f %12.1f\n", s.name, p50, p99);
    record["latency_us"][s.name] = {{"p50", p50}, {"p99", p99}};
  }
  if (!json_path.empty()) std::ofstream(json_path) << record.dump(2) << "\n";
  return errors > 0 && results.empty() ? 1 : 0;
}
