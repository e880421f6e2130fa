// Server: the composition root. Owns the model registry, the device trackers, the gRPC service
// and the gRPC server; builds them in order and tears them down in reverse: stop accepting ->
// finish in-flight requests -> stop workers.
//
//   auto server = Server::Create(options);   // validates options
//   (*server)->Start();                       // listens, loads + warms models, READY
//   ... (*server)->Shutdown();
#ifndef CHRONOSERVE_SERVER_SERVER_H_
#define CHRONOSERVE_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/version.h"
#include "server/backend/device_activity.h"
#include "server/core/arena_store.h"
#include "server/core/host_keep_warm.h"
#include "server/core/host_policy.h"
#include "server/grpc/health_service.h"
#include "server/grpc/inference_service.h"
#include "server/grpc/model_infer_queues.h"
#include "server/grpc/serving_warmup.h"
#include "server/model_controller.h"
#include "server/scheduler/model_registry.h"
#include "server/scheduler/worker.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

namespace telemetry {
class Telemetry;
}  // namespace telemetry

inline constexpr int kAutoInferThreads = -1;

// --model-control-mode: Triton's none (every model of the repository loaded at start, no model
// control), explicit (the --load-model models at start, then RepositoryModelLoad / Unload) or poll
// (every model at start, then the repository scanned every --repository-poll-secs).
enum class ModelControlMode { kNone, kExplicit, kPoll };
// --grpc-infer-threads' default: half of the host's CPUs, 1 to 8 (on 16 CPUs: 4 queues, 2 threads each).
int DefaultInferThreads();

struct ServerOptions {
  std::string model_repository;
  ModelControlMode model_control_mode = ModelControlMode::kNone;
  // --load-model (explicit mode only): the models loaded at start; {"*"} = every one; empty = none.
  std::vector<std::string> load_models;
  // --repository-poll-secs (poll mode): how often the repository is scanned for changes.
  absl::Duration repository_poll_interval = absl::Seconds(15);
  // --model-load-thread-count: models loaded at once at start (every mode), and in explicit and poll
  // modes the loads and unloads of different models that may run at once; one model's run one after another.
  int model_load_threads = ModelController::kDefaultThreads;
  std::string host = "127.0.0.1";
  int grpc_port = 8001;  // 0 picks a free port (tests)
  // --grpc-unix-socket: also listen on this Unix domain socket (clients on the same host dial
  // "unix:PATH"). Empty = TCP only. A socket another server listens on at PATH fails the start (a
  // stale one is replaced); the socket file is removed at shutdown if it is still the one we bound.
  std::string unix_socket;
  int exit_timeout_secs = 30;
  // --grpc-infer-threads: every KServe and health RPC served by this many threads on completion
  // queues of gRPC's asynchronous API (server/grpc/model_infer_queues.h: two threads a queue;
  // health from server/grpc/health_service.h); 0 = every RPC on gRPC's callback API, health from
  // gRPC's own service; kAutoInferThreads = DefaultInferThreads().
  int grpc_infer_threads = kAutoInferThreads;
  // --grpc-threads-per-queue: how many of those threads poll each completion queue (1-4; the queues
  // are ceil(threads / this)). Two let one busy stream's reads and writes proceed at once; one gives
  // more queues (BENCHMARKS §45: more requests a second at concurrency 256, slower at concurrency 1).
  int grpc_threads_per_queue = ModelInferQueues::kDefaultThreadsPerQueue;
  // --grpc-minimal-stack: gRPC's minimal channel stack on the server: no compression or deadline
  // filter on any call (ConfigureServerChannel, docs/GPU_PERFORMANCE.md). Compressed requests are
  // then refused (UNIMPLEMENTED, "Compression algorithm 'gzip' is disabled") instead of reaching us
  // undecoded; deadlines still end a request in the queue. Off: compressed requests served.
  bool grpc_minimal_stack = false;
  // --grpc-max-request-bytes: the largest request message gRPC accepts (any RPC: an inference
  // request, a model-control call with files); larger ones are refused with RESOURCE_EXHAUSTED
  // before they are handled. 0: no limit of ours (protobuf's 2 GiB), as Triton.
  int64_t grpc_max_request_bytes = 0;
  WarmupOptions warmup;
  // Triton's system_shared_memory extension: clients may register POSIX shared-memory regions and
  // pass tensors through them (docs/SHARED_MEMORY.md: local, trusted clients only).
  bool allow_shared_memory = true;
  // Opens clients' CUDA IPC handles in place of CUDA's (tests: CUDA regions on a CPU server, host
  // memory standing in for the client's GPU memory). Null = CUDA's, on a GPU server.
  DeviceMemoryOpener cuda_ipc_opener;
  // --request-timing: off = workers record no span events and no launch timer, responses carry no
  // timing.* parameters and no server-timing trailer (docs/TIMING.md, "Switching timing off").
  bool request_timing = true;
  // --serving-warmup-requests: before READY, this many requests per model and batch size (1 and
  // max_batch_size) travel the whole serving path through the server's own gRPC port, plus one
  // stream of as many messages (server/grpc/serving_warmup.h); counted nowhere. 0 = off.
  int serving_warmup_requests = 4;
  // --host-policy: named CPU sets that models' workers are pinned to (server/core/host_policy.h).
  HostPolicies host_policies;
  // --input-arena-mib, in bytes: < 0 auto, 0 off (ModelLoadOptions::input_arena_bytes).
  int64_t input_arena_bytes = -1;
  // --input-arena-store: how a request's inputs are written into the arena; nullopt = auto
  // (ModelLoadOptions::input_arena_store).
  std::optional<ArenaStore> input_arena_store;
  // --max-queue-mib, in bytes: the input bytes each model's queued requests may hold; 0 = unbounded.
  uint64_t max_queue_bytes = uint64_t{1024} << 20;
  // --max-stream-unsent-mib, in bytes: the output bytes one ModelStreamInfer stream's answers may
  // hold before they are written (StreamOptions::max_unsent_bytes); 0 = unbounded.
  uint64_t max_stream_unsent_bytes = StreamOptions{}.max_unsent_bytes;
  // --host-keep-warm-ms: while a request arrived within this many ms, one SCHED_IDLE spinner per
  // CPU the server may run on keeps that CPU from halting (server/core/host_keep_warm.h). 0 = off.
  int host_keep_warm_ms = 0;
  // Traces, metrics, GPU monitor: built by main, not owned; started before the models load and
  // flushed last on shutdown. Null = none.
  telemetry::Telemetry* telemetry = nullptr;
  // Called on the loading thread as each of the start's model versions begins to load
  // (ModelLoadOptions::load_started; tests). Null = none.
  std::function<void(const std::string& model, int64_t version)> start_load_started;
};

using ::chronoserve::kChronoserveVersion;  // common/version.h

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();

  // Binds the gRPC port, then loads and warms every model. Returns once they are ready (or failed).
  absl::Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // What the serving warm-up sent and what failed: at Start, plus each model-control load's (all
  // zero when it was off).
  ServingWarmupReport serving_warmup_report() const;
  // The spinners of --host-keep-warm-ms (null when off, and after Shutdown).
  const HostKeepWarm* host_keep_warm() const { return host_keep_warm_.get(); }
  // The token that marks the serving warm-up's requests (for tests and in-process tools).
  const std::string& serving_warmup_token() const { return service_->serving_warmup_token(); }
  // Health NOT_SERVING, new requests UNAVAILABLE, in-flight requests finish (up to
  // exit_timeout_secs), workers stop. Idempotent.
  void Shutdown();
  // For a shutdown asked for while Start is loading: the model warming up stops at its next
  // warm-up run, later models are not loaded, the serving warm-up sends nothing more and health
  // never goes SERVING, so Start returns soon. Any thread, any time; Shutdown is still the
  // caller's to call. True when it came before Start's READY (the server never looks ready); false
  // when the server was already ready or up.
  bool StopLoading();

  ModelRegistry& registry() { return registry_; }
  // The shared-memory regions clients registered; null when shared memory is disallowed.
  SharedMemoryRegistry* shared_memory() { return shared_memory_.get(); }
  // Poll mode: the repository scans finished so far, and a wait until `n` have (up to `timeout`;
  // whether they did). 0 and false in the other modes.
  int64_t repository_polls() const;
  bool AwaitRepositoryPolls(int64_t n, absl::Duration timeout) const;

 private:
  explicit Server(const ServerOptions& options);
  // Start's steps, in order. BuildService: telemetry, shared memory, the inference service (warming
  // up) and host keep-warm. Listen: binds every listener and starts gRPC, health NOT_SERVING.
  // LoadModels: loads and warms the repository's models and records their load times.
  absl::Status BuildService(int infer_threads);
  absl::Status Listen(int infer_threads);
  absl::Status LoadModels();
  // How a model is loaded, as the options say (at start and by the model control).
  ModelLoadOptions LoadOptions() const;
  // Sends the serving warm-up (ServerOptions::serving_warmup_requests) to `specs` through every
  // listener until `stop`; logs what failed (never fatal), adds to serving_warmup_report() and
  // returns what it sent.
  ServingWarmupReport WarmServingPath(const std::vector<ModelSpec>& specs, const std::atomic<bool>* stop);
  // Health as the models now stand (after a model control change), once the server went READY and
  // until it drains.
  void RefreshHealth();
  // grpc.health.v1 for both services the server answers ("" and the inference service).
  void SetHealth(bool serving) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ready_mu_);

  const ServerOptions options_;
  const Clock* const clock_;
  ModelRegistry registry_;
  DeviceActivityRegistry devices_;
  // --model-control-mode explicit (null otherwise); stopped first at shutdown, destroyed after the service.
  std::unique_ptr<ModelController> model_controller_;
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;  // null when shared memory is disallowed
  std::unique_ptr<HostKeepWarm> host_keep_warm_;         // null when --host-keep-warm-ms is 0
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<ModelInferQueues> infer_queues_;  // null: every RPC on the callback API; outlives grpc_server_
  // grpc.health.v1 on the queues (with infer_queues_; outlives grpc_server_), else null: gRPC's own.
  std::unique_ptr<HealthService> health_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;  // the one serving, once listening
  int port_ = 0;
  // The --grpc-unix-socket file this server bound (st_dev, st_ino); shutdown removes only that file.
  std::optional<std::pair<dev_t, ino_t>> unix_socket_inode_;
  mutable absl::Mutex warmup_mu_;
  ServingWarmupReport serving_warmup_ ABSL_GUARDED_BY(warmup_mu_);
  bool shut_down_ = false;
  std::atomic<bool> stop_loading_{false};
  // Orders StopLoading against Start's READY: a stop either comes first (never ready) or after.
  absl::Mutex ready_mu_;
  bool readied_ ABSL_GUARDED_BY(ready_mu_) = false;  // Start went READY (or up, not every model ready)
  bool health_frozen_ ABSL_GUARDED_BY(ready_mu_) = false;  // Shutdown began: RefreshHealth changes nothing
};

// The (st_dev, st_ino) of the Unix socket file at `path`; nullopt when there is none (or no socket).
std::optional<std::pair<dev_t, ino_t>> SocketInode(const std::string& path);
// Removes the socket file at `path` only if it is still `bound` (SocketInode when this server bound
// it), so a shutting-down server never removes a socket another server has bound there since.
// Whether it removed it.
bool RemoveSocketIfSame(const std::string& path, std::pair<dev_t, ino_t> bound);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SERVER_H_
