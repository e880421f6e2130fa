// Benchmark: one chronobench run. Create() connects (--connections distinct channels), checks the
// server is live and the model exists (and offers system_shared_memory with --shared-memory
// system), builds the requests and sends one validation request per batch size (through shared
// memory too when asked) so bad shapes, models or region sizes fail fast with the server's message. Run() measures every sweep point with
// RunPoint and returns the report. Owned and called by main's thread.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_BENCHMARK_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_BENCHMARK_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/chronobench/bench_options.h"
#include "client/chronobench/bench_report.h"
#include "client/chronobench/client_tracer.h"
#include "client/chronobench/request_factory.h"
#include "client/chronobench/shm_slot_pool.h"
#include "client/chronobench/trial_runner.h"
#include "client/chronobench/channel_stubs.h"
#include "common/clock.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

// The sweep points the options ask for, in order.
std::vector<PointSpec> PlanSweep(const LoadOptions& load);

// `count` channels to `url` that do not share a TCP connection: each gets its own subchannel pool
// and a distinct channel argument.
std::vector<std::shared_ptr<grpc::Channel>> MakeDistinctChannels(const std::string& url, int count);
// One such channel, of index `index` (MakeDistinctChannels' are 0 .. count - 1).
std::shared_ptr<grpc::Channel> MakeDistinctChannel(const std::string& url, int index);

class Benchmark {
 public:
  // `tracer` (may be null) receives the client span of every traced request; it must outlive Run().
  static absl::StatusOr<std::unique_ptr<Benchmark>> Create(const BenchOptions& options, const Clock* clock,
                                                           ClientTracer* tracer = nullptr);

  // `on_point` is called after each point (console table); `progress` as RunnerContext says. A
  // point that fails ends the sweep: the report holds the points before it and `failed_point`
  // (the status is OK then; the caller decides how to exit).
  absl::StatusOr<BenchReport> Run(const std::function<void(const PointResult&)>& on_point,
                                  const std::function<void(const std::string&)>& progress);

 private:
  Benchmark(const BenchOptions& options, const Clock* clock, ClientTracer* tracer)
      : options_(options), clock_(clock), tracer_(tracer) {}
  absl::Status Connect();
  absl::Status Validate(int64_t batch_size);
  // Builds the point's request (and shared-memory layout) and measures it.
  absl::StatusOr<PointResult> RunOnePoint(const PointSpec& spec, RunnerContext* ctx);
  // The shared-memory layout of `request` (nullopt without --shared-memory).
  absl::StatusOr<std::optional<ShmLayout>> LayoutFor(const inference::ModelInferRequest& request,
                                                     int64_t batch_size) const;
  absl::Status ValidateStreaming(const inference::ModelInferRequest& request, int64_t batch_size);
  absl::Status ValidateSharedMemory(const inference::ModelInferRequest& request, const ShmLayout& layout,
                                    int64_t batch_size);

  BenchOptions options_;
  const Clock* clock_;
  ClientTracer* tracer_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<ChannelStubs> stubs_;  // one per channel
  inference::ServerMetadataResponse server_metadata_;
  inference::ModelMetadataResponse model_metadata_;
  std::string answered_version_;  // the model_version of the first validation request's answer
  std::unique_ptr<RequestFactory> factory_;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_BENCHMARK_H_
