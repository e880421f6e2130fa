#include "client/chronobench/benchmark.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/connect_probe.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "common/status_macros.h"

namespace chronoserve::client::bench {
namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kConnectStep = std::chrono::milliseconds(100);  // between looks at the channel's state
constexpr auto kProbeEvery = std::chrono::seconds(1);           // plain connects to learn why it failed

// `requested`: -x (empty: the server's choice); `answered`: the version the server said ran the
// validation request (its response's model_version; empty when it did not say).
nlohmann::json ModelJson(const inference::ModelMetadataResponse& m, const RequestFactory& factory,
                         const std::string& requested, const std::string& answered) {
  auto tensors = [](const auto& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : list) {
      out.push_back({{"name", t.name()}, {"datatype", t.datatype()},
                     {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
    }
    return out;
  };
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [name, dims] : factory.SampleShapes()) shapes[name] = dims;
  return {{"name", m.name()},
          {"versions", std::vector<std::string>(m.versions().begin(), m.versions().end())},
          {"version_requested", requested.empty() ? nlohmann::json(nullptr) : nlohmann::json(requested)},
          {"version_answered", answered.empty() ? nlohmann::json(nullptr) : nlohmann::json(answered)},
          {"platform", m.platform()},
          {"inputs", tensors(m.inputs())},
          {"outputs", tensors(m.outputs())},
          {"batched", factory.batched()},
          {"sample_shapes_sent", shapes}};
}

}  // namespace

std::optional<size_t> SaturationIndex(const std::vector<double>& items_per_s, double min_gain) {
  for (size_t i = 0; i + 1 < items_per_s.size(); ++i) {
    // The gain as a difference: 210 vs 200 * 1.05 would hang on the rounding of 1.05.
    if (items_per_s[i + 1] - items_per_s[i] <= items_per_s[i] * min_gain) return i;
  }
  return std::nullopt;
}

std::vector<PointSpec> PlanSweep(const LoadOptions& load) {
  std::vector<PointSpec> base;
  auto add = [&](PointSpec p) { base.push_back(p); };
  switch (load.mode) {
    case LoadMode::kConcurrency:
      for (int64_t c : load.concurrency) add({LoadMode::kConcurrency, c, 0, 0, 1});
      break;
    case LoadMode::kRate:
      for (double r : load.rates) add({LoadMode::kRate, 1, r, 0, 1});
      break;
    case LoadMode::kIdleGap:
      for (double g : load.idle_gaps_ms) add({LoadMode::kIdleGap, 1, 0, g, 1});
      break;
  }
  std::vector<PointSpec> points;
  for (const PointSpec& p : base) {
    for (int64_t b : load.batch_sizes) {
      PointSpec q = p;
      q.batch_size = b;
      q.index = static_cast<int>(points.size());
      points.push_back(q);
    }
  }
  return points;
}

std::shared_ptr<grpc::Channel> MakeDistinctChannel(const std::string& url, int index) {
  grpc::ChannelArguments args = ClientChannelArguments();
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("chronobench.channel_index", index);  // distinct args: never one shared subchannel
  return grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args);
}

std::vector<std::shared_ptr<grpc::Channel>> MakeDistinctChannels(const std::string& url, int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) channels.push_back(MakeDistinctChannel(url, i));
  return channels;
}

absl::StatusOr<std::unique_ptr<Benchmark>> Benchmark::Create(const BenchOptions& options, const Clock* clock,
                                                             ClientTracer* tracer) {
  RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Benchmark> bench(new Benchmark(options, clock, tracer));
  RETURN_IF_ERROR(bench->Connect());
  ASSIGN_OR_RETURN(RequestFactory factory,
                   RequestFactory::Create(bench->model_metadata_, options.input, options.load.seed));
  bench->factory_ = std::make_unique<RequestFactory>(std::move(factory));
  for (int64_t b : options.load.batch_sizes) RETURN_IF_ERROR(bench->Validate(b));
  return bench;
}

absl::Status Benchmark::Connect() {
  const std::string& url = options_.target.url;
  channels_ = MakeDistinctChannels(url, options_.target.connections);
  for (const auto& ch : channels_) {
    const auto deadline = std::chrono::system_clock::now() + kConnectTimeout;
    auto next_probe = std::chrono::system_clock::now();
    bool connected = false;
    ConnectProbe probe;
    while (!connected && std::chrono::system_clock::now() < deadline) {
      connected = ch->WaitForConnected(std::min(deadline, std::chrono::system_clock::now() + kConnectStep));
      // gRPC tells only that the connection failed: a plain connect (at most one a second) tells
      // why, and a port where nothing listens will not start listening by waiting out the 10 s.
      if (!connected && ch->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE &&
          std::chrono::system_clock::now() >= next_probe) {
        next_probe = std::chrono::system_clock::now() + kProbeEvery;
        probe = ProbeConnect(url, 1000);
        if (probe.refused) {
          return absl::UnavailableError(absl::StrCat("cannot connect to ", url, ": ", probe.reason,
                                                     " (is chronoserve running and listening there?)"));
        }
      }
    }
    if (!connected) {
      // A listener that accepts and says nothing keeps gRPC connecting, never failing: no probe
      // ran in the loop, so one runs now.
      if (!probe.connected && probe.reason.empty()) probe = ProbeConnect(url, 1000);
      std::string why;
      if (probe.connected) {
        why = " (a plain connect there succeeds, but gRPC's connection does not: not a gRPC port, one that never "
              "answers the HTTP/2 handshake, or one that wants TLS? chronoserve's port is plaintext)";
      } else if (!probe.reason.empty()) {
        why = absl::StrCat(" (", probe.reason, ")");
      }
      return absl::UnavailableError(absl::StrCat("cannot connect to ", url, " within 10 s", why));
    }
    stubs_.emplace_back(ch);
  }
  // A server that accepts the connection but answers nothing must not hang chronobench here.
  InferenceClient client(channels_[0], kConnectTimeout);
  auto live = client.ServerLive();
  if (live.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(url, " accepted the connection but did not answer ServerLive within ",
                                                    kConnectTimeout.count(), " s (a stuck server?)"));
  }
  if (!live.ok()) return absl::UnavailableError(absl::StrCat(url, " is not a KServe v2 server: ", live.status().message()));
  if (!*live) return absl::UnavailableError(absl::StrCat(url, " answers ServerLive with live = false"));
  ASSIGN_OR_RETURN(server_metadata_, client.ServerMetadata());
  const std::string& version = options_.target.model_version;
  // "model 'm'" or "model 'm' version 'v'": the metadata and readiness asked for are those of -x.
  const std::string what = absl::StrCat("model '", options_.target.model, "'",
                                        version.empty() ? "" : absl::StrCat(" version '", version, "'"));
  auto metadata = client.ModelMetadata(options_.target.model, version);
  if (!metadata.ok()) {
    return absl::NotFoundError(absl::StrCat(what, " on ", url, ": ", metadata.status().message()));
  }
  model_metadata_ = *std::move(metadata);
  const auto& extensions = server_metadata_.extensions();
  if (options_.shared_memory.kind == SharedMemoryKind::kSystem &&
      std::find(extensions.begin(), extensions.end(), "system_shared_memory") == extensions.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        url, " does not offer the system_shared_memory extension (chronoserve: --allow-shared-memory=true)"));
  }
  if (options_.shared_memory.kind == SharedMemoryKind::kCuda &&
      std::find(extensions.begin(), extensions.end(), "cuda_shared_memory") == extensions.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        url, " does not offer the cuda_shared_memory extension (chronoserve offers it with "
        "--allow-shared-memory=true when it runs on a GPU)"));
  }
  auto ready = client.ModelReady(options_.target.model, version);
  if (!ready.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(what, " is not ready on ", url, ": ", ready.status().message()));
  }
  if (!*ready) {  // the server gives no reason beside the flag
    return absl::FailedPreconditionError(absl::StrCat(
        what, " is not ready on ", url, " (still loading or warming up, failed to load, or the server is stopping)"));
  }
  return absl::OkStatus();
}

absl::Status Benchmark::Validate(int64_t batch_size) {
  ASSIGN_OR_RETURN(inference::ModelInferRequest request, factory_->Build(options_.target.model_version, batch_size));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(options_.target.timeout_ms > 0 ? options_.target.timeout_ms : 60'000));
  inference::ModelInferResponse response;
  const grpc::Status status = stubs_[0].generated->ModelInfer(&ctx, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("validation request (batch ", batch_size, ") failed: ", status.error_message()));
  }
  if (answered_version_.empty()) answered_version_ = response.model_version();
  ASSIGN_OR_RETURN(std::optional<ShmLayout> layout, LayoutFor(request, batch_size));
  if (layout.has_value()) RETURN_IF_ERROR(ValidateSharedMemory(request, *layout, batch_size));
  if (options_.target.streaming) RETURN_IF_ERROR(ValidateStreaming(request, batch_size));
  return absl::OkStatus();
}

// One request on a stream: a server without ModelStreamInfer (UNIMPLEMENTED) fails here. InferStream
// is on gRPC's callback API, and in gRPC 1.51 (the epoll1 poller) the first callback call on a
// channel starts the process's shared callback queue: cores / 2 threads ("nexting_thread", 8 on a
// 16-vCPU host) that poll every connection of the process until that channel is destroyed. Under
// load they took about a core of chronobench's CPU (docs/BENCHMARKS.md §37), reading the load's
// sockets and handing each completion to the load thread that owns it. So the stream runs on a
// channel of its own, gone (and those threads with it) before the load starts; the load itself is on
// the asynchronous API (load_worker.h).
absl::Status Benchmark::ValidateStreaming(const inference::ModelInferRequest& request, int64_t batch_size) {
  const absl::Duration timeout =
      absl::Milliseconds(options_.target.timeout_ms > 0 ? options_.target.timeout_ms : 60'000);
  // Index -1: never one of the load's channels (0 .. connections - 1).
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub =
      inference::GRPCInferenceService::NewStub(MakeDistinctChannel(options_.target.url, -1));
  auto stream = InferStream::Open(stub.get());
  inference::ModelInferRequest first = request;
  first.set_id("chronobench-validate");
  stream->Send(std::move(first));
  stream->CloseSend();
  std::optional<StreamAnswer> answer = stream->Next(timeout);
  absl::Status status;
  if (answer.has_value()) {
    status = InferStream::Decode(answer->message).status();
  } else {
    auto end = stream->Finish(timeout);
    status = !end.has_value() ? absl::DeadlineExceededError("no response")
             : end->ok()      ? absl::UnknownError("the stream ended without a response")
                              : FromGrpcStatus(*end);
  }
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("validation request on a ModelStreamInfer stream (batch ", batch_size,
                                                  ") failed: ", status.message()));
}

absl::StatusOr<std::optional<ShmLayout>> Benchmark::LayoutFor(const inference::ModelInferRequest& request,
                                                              int64_t batch_size) const {
  if (options_.shared_memory.kind == SharedMemoryKind::kNone) return std::optional<ShmLayout>();
  auto layout = PlanShmLayout(request, model_metadata_, batch_size, factory_->batched(),
                              options_.shared_memory.output_byte_size);
  if (!layout.ok()) return layout.status();
  layout->kind = options_.shared_memory.kind;
  layout->cuda_device = options_.shared_memory.cuda_device;
  layout->preload = options_.shared_memory.preload;
  return std::optional<ShmLayout>(*std::move(layout));
}

// One request through a one-slot pool, its outputs copied back: a server on another machine (shm_open or
// cudaIpcOpenMemHandle fails there) or an output region too small fails here, before the run.
absl::Status Benchmark::ValidateSharedMemory(const inference::ModelInferRequest& request, const ShmLayout& layout,
                                             int64_t batch_size) {
  ShmSlotPool pool(stubs_[0].generated.get(), &request, &layout, absl::StrCat("chronobench_", getpid(), "_validate"));
  absl::Status status = pool.Grow(1);
  if (status.ok()) {
    ShmSlot* slot = pool.Acquire();
    status = pool.CopyIn(*slot);
    if (status.ok()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options_.target.timeout_ms > 0 ? options_.target.timeout_ms : 60'000));
      inference::ModelInferResponse response;
      status = FromGrpcStatus(stubs_[0].generated->ModelInfer(&ctx, slot->request, &response));
      if (status.ok()) status = pool.CopyOut(*slot, response.outputs());
    }
  }
  if (absl::Status unregistered = pool.UnregisterAll(); status.ok()) status = unregistered;
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("validation request through ",
                                                  SharedMemoryKindName(layout.kind), " shared memory (batch ",
                                                  batch_size, ") failed: ", status.message()));
}

absl::StatusOr<PointResult> Benchmark::RunOnePoint(const PointSpec& spec, RunnerContext* ctx) {
  ASSIGN_OR_RETURN(inference::ModelInferRequest request, factory_->Build(options_.target.model_version, spec.batch_size));
  ASSIGN_OR_RETURN(std::optional<ShmLayout> layout, LayoutFor(request, spec.batch_size));
  ctx->shm_layout = layout.has_value() ? &*layout : nullptr;
  absl::StatusOr<PointResult> point = RunPoint(spec, request, *ctx);
  ctx->shm_layout = nullptr;  // `layout` ends here
  return point;
}

absl::StatusOr<BenchReport> Benchmark::Run(const std::function<void(const PointResult&)>& on_point,
                                           const std::function<void(const std::string&)>& progress) {
  const int threads = options_.load.threads > 0
                          ? options_.load.threads
                          : static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
  BenchReport report;
  report.url = options_.target.url;
  report.model = options_.target.model;
  report.server = {{"name", server_metadata_.name()},
                   {"version", server_metadata_.version()},
                   {"extensions", std::vector<std::string>(server_metadata_.extensions().begin(),
                                                           server_metadata_.extensions().end())},
                   {"url", options_.target.url},
                   {"connections", options_.target.connections},
                   {"streaming", options_.target.streaming},
                   {"connection_affinity", options_.target.connection_affinity},
                   {"threads", threads},
                   {"shared_memory", SharedMemoryKindName(options_.shared_memory.kind)},
                   {"shared_memory_preload", options_.shared_memory.preload}};
  report.model_info = ModelJson(model_metadata_, *factory_, options_.target.model_version, answered_version_);
  report.percentiles = options_.measurement.percentiles;
  report.mode = options_.load.mode;
  report.distribution = options_.load.distribution;
  report.batch_sweep = options_.load.batch_sweep;
  report.started_unix_ms = WallNowNs() / 1'000'000;

  RunnerContext ctx;
  ctx.stubs = &stubs_;
  ctx.clock = clock_;
  ctx.measurement = options_.measurement;
  ctx.distribution = options_.load.distribution;
  ctx.threads = threads;
  ctx.timeout_ms = options_.target.timeout_ms;
  ctx.streaming = options_.target.streaming;
  ctx.connection_affinity = options_.target.connection_affinity;
  ctx.traceparent_rate = options_.trace.traceparent_rate;
  ctx.tracer = tracer_;
  ctx.seed = options_.load.seed;
  ctx.max_send_poll_ns = options_.load.max_send_poll_us * 1000;
  ctx.progress = progress;
  for (const PointSpec& spec : PlanSweep(options_.load)) {
    absl::StatusOr<PointResult> point = RunOnePoint(spec, &ctx);
    const absl::Status failure = point.ok() ? point->failure : point.status();
    if (!failure.ok()) {  // the points measured so far are kept, and the report says where it stopped
      report.failed_point = FailedPoint{spec.Label(), std::string(failure.message()), spec,
                                        absl::StatusCodeToString(failure.code())};
      if (point.ok()) {
        report.failed_point->unanswered_at_end = point->unanswered_at_end;
        report.failed_point->unsent_at_end = point->unsent_at_end;
      }
      break;
    }
    if (on_point) on_point(*point);
    report.points.push_back(*std::move(point));
  }
  if (report.batch_sweep) {
    std::vector<double> items;
    for (const auto& p : report.points) items.push_back(p.items_per_s);
    report.saturation_index = SaturationIndex(items);
  }
  return report;
}

}  // namespace chronoserve::client::bench
