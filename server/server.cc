#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu_set.h"
#include "common/host_port.h"
#include "common/log.h"
#include "server/backend/host_pinning.h"
#include "server/backend/torch_backend.h"
#include "server/grpc/server_channel.h"
#include "server/grpc/serving_warmup.h"
#include "server/listen_check.h"
#include "server/model_manager.h"
#include "server/repository/model_config_loader.h"
#include "server/shared_memory/region_releaser.h"
#include "server/telemetry/telemetry.h"

namespace chronoserve::server {
namespace {
constexpr const char* kServiceName = "inference.GRPCInferenceService";
// After the exit timeout: how long the UNAVAILABLE answers of the requests still queued get to reach
// their callers before gRPC cancels every call left.
constexpr auto kAbandonedAnswersGrace = std::chrono::seconds(1);

// The gRPC target of --grpc-unix-socket PATH ("unix:PATH"); empty when there is none.
std::string UnixTarget(const std::string& path) { return path.empty() ? "" : absl::StrCat("unix:", path); }

// gRPC unlinks any socket file at the path before it binds, so a second server would silently take
// the path over from a live one. A socket file is only stale when a connection to it is refused.
// Anything else at the path is left to the bind (a file that is not a socket fails it). A live
// server whose accept backlog is full answers EAGAIN (the connect never blocks): not stale either.
// Two servers starting at the same moment can both find the path free; the check is for a server
// started beside a running one.
absl::Status CheckUnixSocketFree(const std::string& path) {
  if (!SocketInode(path).has_value()) return absl::OkStatus();  // nothing there, or no socket: the bind decides
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::OkStatus();  // cannot tell: the bind decides
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  const bool connected = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  const int error = errno;
  close(fd);
  if (!connected && (error == ECONNREFUSED || error == ENOENT)) return absl::OkStatus();  // stale
  return absl::UnavailableError(absl::StrCat(
      "cannot listen on unix:", path, ": ",
      connected ? "another server is listening on that socket"
                : absl::StrCat("the socket there is not stale (connecting to it failed: ", std::strerror(error), ")"),
      "; stop it or choose another --grpc-unix-socket"));
}

// A loaded model's load and warm-up times, for /metrics.
void RecordLoad(telemetry::Telemetry* telemetry, const ModelRuntime& runtime) {
  telemetry->RecordModelLoad(runtime.spec().name, runtime.spec().version, runtime.load_ns(), runtime.warmup_ns());
}

}  // namespace

std::optional<std::pair<dev_t, ino_t>> SocketInode(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

bool RemoveSocketIfSame(const std::string& path, std::pair<dev_t, ino_t> bound) {
  return SocketInode(path) == bound && unlink(path.c_str()) == 0;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  if (options.model_repository.empty()) {
    return absl::InvalidArgumentError("--model-repository is required");
  }
  if (std::error_code ec; !std::filesystem::is_directory(options.model_repository, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--model-repository '", options.model_repository,
                                                   "' is not a directory", ec ? ": " + ec.message() : ""));
  }
  if (options.grpc_port < 0 || options.grpc_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-port ", options.grpc_port, " is not a port"));
  }
  if (!options.unix_socket.empty() && options.unix_socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-unix-socket '", options.unix_socket, "' is ",
                                                   options.unix_socket.size(), " bytes long; a Unix socket path has at most ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1));
  }
  if (options.grpc_max_request_bytes < 0 || options.grpc_max_request_bytes > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-max-request-bytes ", options.grpc_max_request_bytes,
                                                   " is not in 0 (no limit) .. ", std::numeric_limits<int32_t>::max()));
  }
  // gRPC's minimal stack has no message-size filter: the limit would silently not hold.
  if (options.grpc_max_request_bytes > 0 && options.grpc_minimal_stack) {
    return absl::InvalidArgumentError(
        "--grpc-max-request-bytes needs gRPC's full channel stack: --grpc-minimal-stack has no message-size "
        "filter, so the limit would not be enforced");
  }
  if (options.model_control_mode != ModelControlMode::kExplicit && !options.load_models.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--load-model '", options.load_models.front(),
                                                   "' needs --model-control-mode explicit (modes none and poll load "
                                                   "every model of the repository)"));
  }
  if (options.model_load_threads < 1) {
    return absl::InvalidArgumentError("--model-load-thread-count must be at least 1");
  }
  if (options.repository_poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--repository-poll-secs must be above 0");
  }
  for (const std::string& name : options.load_models) {
    if (name == "*") {
      if (options.load_models.size() > 1) {
        return absl::InvalidArgumentError("--load-model '*' (every model) must be the only --load-model");
      }
      continue;
    }
    if (absl::Status valid = ValidateModelName(name); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--load-model: ", valid.message()));
    }
  }
  if (options.exit_timeout_secs < 0) {
    return absl::InvalidArgumentError("--exit-timeout-secs must be >= 0");
  }
  if (options.host_keep_warm_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host-keep-warm-ms ", options.host_keep_warm_ms, " is negative (0 turns it off)"));
  }
  return std::unique_ptr<Server>(new Server(options));
}

int DefaultInferThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 1, 8);
}

Server::Server(const ServerOptions& options) : options_(options), clock_(SteadyClock::Get()) {}

Server::~Server() { Shutdown(); }

absl::Status Server::Start() {
  CS_LOG(INFO) << "chronoserve " << kChronoserveVersion << " with " << TorchBuildDescription()
               << ", " << CudaDeviceCount() << " CUDA device(s)";
  const int infer_threads =
      options_.grpc_infer_threads == kAutoInferThreads ? DefaultInferThreads() : options_.grpc_infer_threads;
  if (absl::Status s = BuildService(infer_threads); !s.ok()) return s;
  if (absl::Status s = Listen(infer_threads); !s.ok()) return s;
  if (!options_.request_timing) {
    CS_LOG(INFO) << "request timing off: responses carry no timing.* parameters and no server-timing trailer";
  }
  if (absl::Status s = LoadModels(); !s.ok()) return s;
  const bool ready = registry_.AllReady();
  // The models that loaded serve even when another failed: their first requests are warmed too.
  if (options_.serving_warmup_requests > 0 && !stop_loading_ && !registry_.Ready().empty()) {
    std::vector<ModelSpec> specs;
    for (const auto& runtime : registry_.Ready()) specs.push_back(runtime->spec());
    WarmServingPath(specs, &stop_loading_);
  }
  absl::MutexLock lock(&ready_mu_);  // a StopLoading now waits: it comes before READY or after
  if (stop_loading_) {
    // Health stays NOT_SERVING and ServerReady / ModelReady false (still "warming up") until the
    // caller's Shutdown drains: the server never looks ready after a signal stopped its start.
    CS_LOG(INFO) << "loading stopped: the server is shutting down";
    return absl::OkStatus();
  }
  service_->SetWarmingUp(false);
  SetHealth(ready);
  readied_ = true;
  if (model_controller_ != nullptr) {
    model_controller_->Open();
    if (options_.model_control_mode == ModelControlMode::kPoll) {
      model_controller_->StartPolling(options_.repository_poll_interval);
      CS_LOG(INFO) << "model control on (--model-control-mode poll): " << options_.model_repository
                   << " is scanned every " << options_.repository_poll_interval
                   << "; model directories added are loaded, changed ones reloaded, removed ones unloaded";
    } else {
      CS_LOG(INFO) << "model control on (--model-control-mode explicit): RepositoryModelLoad / Unload load, reload "
                      "and unload the models of "
                   << options_.model_repository;
    }
  }
  CS_LOG(INFO) << (ready ? "server READY" : "server up, but not every model loaded (see errors above)");
  return absl::OkStatus();
}

int64_t Server::repository_polls() const {
  return model_controller_ != nullptr ? model_controller_->polls() : 0;
}

bool Server::AwaitRepositoryPolls(int64_t n, absl::Duration timeout) const {
  return model_controller_ != nullptr && model_controller_->AwaitPolls(n, timeout);
}

void Server::RefreshHealth() {
  absl::MutexLock lock(&ready_mu_);
  if (!readied_ || health_frozen_ || health_ == nullptr) return;
  SetHealth(registry_.AllReady());
}

void Server::SetHealth(bool serving) {
  health_->SetServingStatus(kServiceName, serving);
  health_->SetServingStatus(serving);
}

bool Server::StopLoading() {
  absl::MutexLock lock(&ready_mu_);
  stop_loading_ = true;
  return !readied_;
}

absl::Status Server::BuildService(int infer_threads) {
  telemetry::Telemetry* telemetry = options_.telemetry;
  if (telemetry != nullptr) {
    if (absl::Status s = telemetry->Start(); !s.ok()) return s;
    telemetry->SetModelRegistry(&registry_);
  }
  if (options_.allow_shared_memory) {
    if (!IsLoopbackHost(options_.host)) {
      CS_LOG(WARNING) << "shared memory is on (--allow-shared-memory) while gRPC listens on " << options_.host
                      << ": any client that reaches the port can have this server map the POSIX shared-memory "
                         "objects its user can open, and open CUDA IPC handles; pass --allow-shared-memory=false "
                         "unless every client is local and trusted";
    }
    // On a GPU server the regions are page-locked at registration, so a single-request batch
    // copies straight between a client's region and the device (no staging copy).
    // With a GPU, clients may also register GPU memory (CUDA IPC handles).
    shared_memory_ = std::make_unique<SharedMemoryRegistry>(
        HostMemoryPinner(MakeCudaHostPinner()),
        options_.cuda_ipc_opener ? options_.cuda_ipc_opener : DeviceMemoryOpener(MakeCudaIpcOpener()));
  }
  registry_.SetUnknownModelHint([repository = options_.model_repository, mode = options_.model_control_mode,
                                  poll = options_.repository_poll_interval](const std::string& name) -> std::string {
    if (!IsModelDirectory(repository, name)) return "";
    switch (mode) {
      case ModelControlMode::kExplicit:
        return ": the model repository has it, but it is not loaded (this server runs with --model-control-mode "
               "explicit: RepositoryModelLoad loads it)";
      case ModelControlMode::kPoll:
        return absl::StrCat(": its directory is in the model repository, but no scan has loaded it yet (this "
                            "server scans the repository every ", absl::FormatDuration(poll), ")");
      case ModelControlMode::kNone:
        break;
    }
    return ": its directory is in the model repository, but came after the server's start (with "
           "--model-control-mode none the server loads its models only then: restart it, or run with "
           "--model-control-mode poll or explicit)";
  });
  if (options_.model_control_mode != ModelControlMode::kNone) {
    ModelController::Hooks hooks;
    if (telemetry != nullptr) {
      hooks.loaded = [telemetry](const ModelRuntime& runtime) { RecordLoad(telemetry, runtime); };
    }
    hooks.changed = [this] { RefreshHealth(); };
    if (options_.serving_warmup_requests > 0) {
      hooks.warm_serving_path = [this](const ModelSpec& spec, const std::atomic<bool>* stop) {
        WarmServingPath({spec}, stop);
      };
    }
    model_controller_ = std::make_unique<ModelController>(
        &registry_, &devices_, options_.model_repository, LoadOptions(), clock_,
        telemetry != nullptr ? telemetry->gpu_clock() : nullptr, std::move(hooks), options_.model_load_threads);
  }
  StreamOptions stream_options;
  stream_options.max_unsent_bytes = options_.max_stream_unsent_bytes;
  service_ = std::make_unique<InferenceService>(&registry_, clock_,
                                                ServerInfo{"chronoserve", kChronoserveVersion, options_.request_timing}, telemetry,
                                                shared_memory_.get(), stream_options, infer_threads > 0);
  service_->SetWarmingUp(true);  // until the models are loaded and the serving path is warm
  if (model_controller_ != nullptr) {
    service_->SetRepositoryModels([controller = model_controller_.get()] { return controller->RepositoryModels(); });
  }
  if (options_.model_control_mode == ModelControlMode::kExplicit) {
    service_->SetModelControl(model_controller_.get());
  } else if (options_.model_control_mode == ModelControlMode::kPoll) {
    service_->SetNoModelControlReason(
        "this server runs with --model-control-mode poll: it loads, reloads and unloads models as their "
        "directories in the repository change (Triton refuses explicit loads while polling too)");
  }
  if (telemetry != nullptr) {
    service_->SetTraceSettings(telemetry->trace_settings());
    telemetry->SetInflightSource([dispatcher = &service_->dispatcher()] { return dispatcher->inflight(); });
  }
  if (options_.host_keep_warm_ms > 0) {
    // The CPUs this process may run on (taskset, cpuset): the ones its threads wake up on.
    auto warm = HostKeepWarm::Start(CurrentThreadCpus(), absl::Milliseconds(options_.host_keep_warm_ms), clock_);
    if (!warm.ok()) return warm.status();
    host_keep_warm_ = *std::move(warm);
    service_->dispatcher().set_host_keep_warm(host_keep_warm_.get());
    CS_LOG(INFO) << "host keep-warm: CPUs " << FormatCpuList(host_keep_warm_->cpus())
                 << " spin at idle priority while a request arrived within the last " << options_.host_keep_warm_ms
                 << " ms (threads cs-spin-N)";
  }
  return absl::OkStatus();
}

absl::Status Server::Listen(int infer_threads) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // With the asynchronous API, health is ours (on the queues; registered below).
  ChooseHealthService(/*async_api=*/infer_threads > 0, &builder);
  const std::string address = HostPort(options_.host, options_.grpc_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  // gRPC replaces a stale socket file at the path; any other file there fails the bind.
  const std::string unix_address = UnixTarget(options_.unix_socket);
  if (!unix_address.empty()) builder.AddListeningPort(unix_address, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  ConfigureServerChannel(options_.grpc_minimal_stack, &builder, options_.grpc_max_request_bytes);
  if (options_.grpc_minimal_stack) {
    CS_LOG(INFO) << "--grpc-minimal-stack: no compression or deadline filter; compressed requests are refused "
                    "(UNIMPLEMENTED)";
  }
  if (infer_threads > 0) {
    infer_queues_ = std::make_unique<ModelInferQueues>(service_.get(), &builder, infer_threads,
                                                       options_.grpc_threads_per_queue);
    health_service_ = std::make_unique<HealthService>();
    builder.RegisterService(health_service_->service());
    for (QueuedCallFactory& calls : health_service_->Calls()) infer_queues_->AddCalls(std::move(calls));
  }
  if (!unix_address.empty()) {
    if (absl::Status free = CheckUnixSocketFree(options_.unix_socket); !free.ok()) return free;
  }
  grpc_server_ = builder.BuildAndStart();
  // BuildAndStart returns null unless every listener is bound.
  if (grpc_server_ == nullptr || port_ == 0) {
    // gRPC gives no reason: probe each address for one.
    std::string why;
    if (const std::string tcp = WhyTcpListenFails(options_.host, options_.grpc_port); !tcp.empty()) {
      why = absl::StrCat("cannot listen on ", address, ": ", tcp);
    }
    if (!unix_address.empty()) {
      if (const std::string unix_why = WhyUnixListenFails(options_.unix_socket); !unix_why.empty()) {
        absl::StrAppend(&why, why.empty() ? "" : "; ", "cannot listen on ", unix_address, ": ", unix_why);
      }
    }
    if (why.empty()) {
      why = absl::StrCat("cannot listen on ", address, unix_address.empty() ? "" : absl::StrCat(" and ", unix_address),
                         " (gRPC logged the reason)");
    }
    return absl::UnavailableError(why);
  }
  if (!unix_address.empty()) {
    unix_socket_inode_ = SocketInode(options_.unix_socket);
    CS_LOG(INFO) << "gRPC also listening on " << unix_address;
  }
  if (infer_queues_ != nullptr) {
    infer_queues_->Start();
    CS_LOG(INFO) << "every KServe and health RPC (inference, readiness, metadata, statistics, shared memory) on "
                 << infer_queues_->threads() << " thread(s) polling " << infer_queues_->queues()
                 << " completion queue(s) (gRPC's asynchronous API)";
  }
  health_ = health_service_ != nullptr ? health_service_.get() : grpc_server_->GetHealthCheckService();
  health_->SetServingStatus(false);
  CS_LOG(INFO) << "gRPC listening on " << HostPort(options_.host, port_)
               << " (KServe v2, grpc.health.v1, reflection)";
  return absl::OkStatus();
}

ModelLoadOptions Server::LoadOptions() const {
  ModelLoadOptions load{options_.warmup, options_.request_timing, options_.host_policies, options_.input_arena_bytes,
                        options_.max_queue_bytes};
  load.input_arena_store = options_.input_arena_store;
  load.threads = options_.model_load_threads;  // the start's models at once, and one model's versions
  return load;
}

absl::Status Server::LoadModels() {
  telemetry::Telemetry* telemetry = options_.telemetry;
  ModelLoadOptions load_options = LoadOptions();
  load_options.warmup.stop = &stop_loading_;
  load_options.load_started = options_.start_load_started;
  ModelManager manager(&registry_, &devices_, load_options, clock_,
                       telemetry != nullptr ? telemetry->gpu_clock() : nullptr);
  const std::vector<std::string>& named = options_.load_models;
  // Poll mode: what the directories hold before they load, so that the first scan reloads only
  // what changes from here on.
  if (options_.model_control_mode == ModelControlMode::kPoll) model_controller_->NoteRepository();
  const int64_t start = clock_->NowNs();
  if (options_.model_control_mode != ModelControlMode::kExplicit || (named.size() == 1 && named[0] == "*")) {
    if (absl::Status s = manager.LoadRepository(options_.model_repository); !s.ok()) return s;
  } else {
    if (named.empty()) {
      CS_LOG(INFO) << "--model-control-mode explicit without --load-model: no model loaded at start "
                      "(RepositoryModelLoad loads them)";
    }
    if (absl::Status s = manager.LoadModels(options_.model_repository, named); !s.ok()) return s;
  }
  const std::vector<ModelRegistry::IndexEntry> index = registry_.Index();
  if (!index.empty()) {
    size_t ready = 0;
    for (const auto& entry : index) ready += entry.state == ModelRegistry::IndexEntry::State::kReady ? 1 : 0;
    CS_LOG(INFO) << "start's loads done in " << (clock_->NowNs() - start) / 1000000 << " ms: " << ready << " of "
                 << index.size() << " model version(s) READY, up to " << options_.model_load_threads
                 << " model(s) loaded at once (--model-load-thread-count)";
  }
  if (telemetry != nullptr) {
    for (const auto& runtime : registry_.Ready()) {
      RecordLoad(telemetry, *runtime);
    }
  }
  return absl::OkStatus();
}

ServingWarmupReport Server::WarmServingPath(const std::vector<ModelSpec>& specs, const std::atomic<bool>* stop) {
  // Through every listener a client may use: each has its own connection-level state to warm.
  std::vector<std::string> targets = {LoopbackTarget(options_.host, port_)};
  if (!options_.unix_socket.empty()) targets.push_back(UnixTarget(options_.unix_socket));
  ServingWarmupReport total;
  for (const std::string& target : targets) {
    const ServingWarmupReport report = RunServingWarmup(target, specs, service_->serving_warmup_token(),
                                                        options_.serving_warmup_requests, absl::Seconds(60), stop);
    CS_LOG(INFO) << "serving warm-up: " << report.sent << " requests to " << specs.size() << " model(s) through "
                 << target << " in " << report.elapsed_ns / 1000000 << " ms";
    if (report.failed > 0) {
      CS_LOG(WARNING) << "serving warm-up: " << report.failed << " of " << report.sent << " requests through "
                      << target << " failed (the first requests may be slower); first: " << report.first_error;
    }
    total.sent += report.sent;
    total.failed += report.failed;
    total.elapsed_ns += report.elapsed_ns;
    if (total.first_error.empty()) total.first_error = report.first_error;
  }
  absl::MutexLock lock(&warmup_mu_);
  serving_warmup_.sent += total.sent;
  serving_warmup_.failed += total.failed;
  serving_warmup_.elapsed_ns += total.elapsed_ns;
  if (serving_warmup_.first_error.empty()) serving_warmup_.first_error = total.first_error;
  return total;
}

ServingWarmupReport Server::serving_warmup_report() const {
  absl::MutexLock lock(&warmup_mu_);
  return serving_warmup_;
}

void Server::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // First: no load or unload may change health while the models drain; health says NOT_SERVING
  // and new requests are refused at once, and the exit timeout starts now, before a load or unload
  // in progress is waited for (a model's load, or an unload draining its queue, takes as long as it
  // takes: it would have kept health SERVING and the port taking requests meanwhile).
  {
    absl::MutexLock lock(&ready_mu_);
    health_frozen_ = true;
  }
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(options_.exit_timeout_secs);
  if (grpc_server_ != nullptr) {
    CS_LOG(INFO) << "shutting down: NOT_SERVING, finishing in-flight requests (up to "
                 << options_.exit_timeout_secs << " s)";
    if (health_ != nullptr) health_->SetServingStatus(false);
    service_->SetDraining();
  }
  // No load or unload may change the models while they drain; the calls still waiting are answered
  // UNAVAILABLE while gRPC still carries answers.
  const size_t retired_abandoned =
      model_controller_ != nullptr ? model_controller_->Stop(absl::FromChrono(deadline)) : 0;
  if (grpc_server_ != nullptr) {
    // The ones queued need not wait for their batching window to close (it may be longer than the
    // exit timeout): they run now. After the controller stopped: a load it finished meanwhile is
    // closed too.
    registry_.CloseQueues();
    // Keep the port open while accepted requests finish: health answers NOT_SERVING and new
    // requests UNAVAILABLE (gRPC's own shutdown would cancel calls that arrive meanwhile).
    if (!service_->WaitForAnswered(absl::FromChrono(deadline))) {
      CS_LOG(WARNING) << "exit timeout: cancelling the requests still in flight";
      // Before gRPC cancels the calls: a queued request must not start on a worker while its
      // cancellation is on its way (the models' queues would otherwise drain it when they stop).
      const size_t abandoned =
          registry_.AbandonQueued(ModelRuntime::kExitTimeoutReason);
      // Those answers (UNAVAILABLE, which a client may retry elsewhere) are only queued on their
      // calls: gRPC's shutdown at a deadline already past would reset the streams first, and the
      // callers would read INTERNAL or CANCELLED. A moment for them to go out; what is left after it,
      // a running batch's answer or a slow reader's, is cancelled. Without such answers, none.
      if (abandoned > 0) {
        CS_LOG(WARNING) << "exit timeout: " << abandoned << " queued request(s) answered UNAVAILABLE; up to "
                        << std::chrono::duration_cast<std::chrono::seconds>(kAbandonedAnswersGrace).count()
                        << " s for those answers to go out";
        deadline = std::chrono::system_clock::now() + kAbandonedAnswersGrace;
      }
    }
    // Answers the controller gave at the deadline (a retired version's queue) get the same moment.
    if (retired_abandoned > 0) {
      deadline = std::max(deadline, std::chrono::system_clock::now() + kAbandonedAnswersGrace);
    }
    // Ours ends its Watch calls, which would otherwise hold gRPC's shutdown up to the deadline.
    if (health_service_ != nullptr) health_service_->Shutdown();
    grpc_server_->Shutdown(deadline);
  }
  registry_.StopAll();
  if (grpc_server_ != nullptr) grpc_server_->Wait();
  // After Wait: every call is over, so the queues' threads have nothing left to answer.
  if (infer_queues_ != nullptr) infer_queues_->Stop();
  // Regions the last requests held, handed off by the workers: unmapped before the process ends
  // (and before CUDA's teardown, for page-locked ones).
  if (!RegionReleaser::Get().WaitIdle(absl::Seconds(10))) {
    CS_LOG(WARNING) << "shared-memory regions still being unmapped after 10 s; stopping without them";
  }
  if (host_keep_warm_ != nullptr) {
    service_->dispatcher().set_host_keep_warm(nullptr);
    host_keep_warm_.reset();
  }
  // gRPC removes the socket file when it closes the listener; make sure the socket we bound is not
  // left behind, and never remove one that another server has bound at the path since.
  if (unix_socket_inode_.has_value()) RemoveSocketIfSame(options_.unix_socket, *unix_socket_inode_);
  // Last: every request has completed, so every span is queued; flush them (bounded).
  if (options_.telemetry != nullptr) options_.telemetry->Shutdown();
  CS_LOG(INFO) << "stopped";
}

}  // namespace chronoserve::server
