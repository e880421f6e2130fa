// bench_served_path: the server's own request path at high concurrency, without gRPC's transport
// (issue 3: how much of the gap between served and in-process throughput is the server's, and how
// much the transport's). It loads a repository the way chronoserve does (ModelManager with the
// server's default options, telemetry with the GPU monitor and no metrics endpoint, as
// run_streaming.sh starts the server), then `--threads` feeder threads stand in for gRPC's: each keeps
// its share of `--concurrency` requests in flight. Per request a feeder parses the request message
// from its bytes (gRPC's deserialisation), builds and queues it through the server's InferDispatcher
// (validation, request parameters, the input arena), and when the answer comes it serialises the
// response (gRPC's serialisation) and sends that slot's next request. Everything between is the
// server's: queue, dynamic batcher, worker, CUDA graphs, completion pool, statistics, timing
// parameters and the telemetry observer. Only the transport is missing: HTTP/2, completion queues,
// sockets, and the client.
//
//   bench_served_path --model-repository models -m policy_net --concurrency 256 --threads 8 \
//       --duration-ms 4500 --json served_path.json
//
// Prints items/s, latency from parse to response, the items per executed batch and the mix of batch
// sizes (for bench_inprocess_throughput --batch-mix), and writes JSON whose "runs"[0] has the fields
// of chronobench's report that benchmarks/run_streaming.sh reads. The workers' time by phase is in
// the log at exit, as the server logs it.
#include <CLI/CLI.hpp>

#include <atomic>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "benchmarks/percentile.h"
#include "common/batch_sizes.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "proto/inference.pb.h"
#include "server/backend/device_activity.h"
#include "server/grpc/infer_dispatcher.h"
#include "server/grpc/serving_warmup.h"
#include "server/model_manager.h"
#include "server/scheduler/model_registry.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"

namespace {
using namespace chronoserve;          // NOLINT: a benchmark's main
using namespace chronoserve::server;  // NOLINT

struct Flags {
  std::string repository;
  std::string model;
  int concurrency = 256;
  int threads = 8;
  int64_t items = 1;
  int64_t warmup_requests = 1024;
  int64_t duration_ms = 4500;
  std::string request_timing = "on";
  std::string json_path;
};

// What the feeders count, under one mutex per feeder (answers arrive on the completion threads).
struct Counts {
  int64_t responses = 0;
  int64_t errors = 0;
  std::map<int64_t, int64_t> responses_by_size;  // batch size the response gave -> responses
  std::vector<int64_t> latency_ns;                // parse to response serialised
};

// One feeder: `slots` requests in flight, each re-sent as soon as its answer is serialised.
class Feeder {
 public:
  Feeder(InferDispatcher* dispatcher, const std::string& request_bytes, int slots, const Clock* clock)
      : dispatcher_(dispatcher), request_bytes_(request_bytes), clock_(clock), slots_(slots) {
    for (int i = 0; i < slots; ++i) ready_.push_back(i);
  }

  void Run() {
    std::vector<int> sending;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto due = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !ready_.empty() || stopping_; };
        mu_.Await(absl::Condition(&due));
        if (stopping_) return;
        sending.swap(ready_);
      }
      for (int slot : sending) Send(slot);
      sending.clear();
    }
  }
  // Run() returns; answers still due are counted as usual.
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // From now on answers count (false: they do not).
  void SetCounting(bool counting) {
    absl::MutexLock lock(&mu_);
    counting_ = counting;
  }
  // Answers so far, counted or not.
  int64_t answered() {
    absl::MutexLock lock(&mu_);
    return answered_;
  }
  Counts counts() {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  struct Slot {
    inference::ModelInferRequest request;
    inference::ModelInferResponse response;
    std::string wire;  // the serialised response
    int64_t sent_ns = 0;
  };

  void Send(int index) {
    Slot& slot = slots_[index];
    slot.sent_ns = clock_->NowNs();
    if (!slot.request.ParseFromString(request_bytes_)) {  // clears the message first
      Answer(index, absl::InternalError("the request message does not parse"), RequestTiming{});
      return;
    }
    slot.request.set_id(absl::StrCat(next_id_++));
    ClearKeepingTimingParams(&slot.response);
    CallInfo info;
    info.received_ns = slot.sent_ns;
    info.streamed = true;
    auto built = dispatcher_->Build(slot.request, &slot.response, std::move(info));
    if (!built.ok()) {
      Answer(index, built.status(), RequestTiming{});
      return;
    }
    absl::Status queued = dispatcher_->Enqueue(
        *std::move(built), &slot.response,
        [this, index](const absl::Status& status, const RequestTiming& timing, bool) { Answer(index, status, timing); });
    if (!queued.ok()) Answer(index, queued, RequestTiming{});
  }

  // On a completion thread (or the feeder's, for a refusal): serialise, count, send again.
  void Answer(int index, const absl::Status& status, const RequestTiming& timing) {
    Slot& slot = slots_[index];
    if (status.ok()) slot.response.SerializeToString(&slot.wire);
    const int64_t done_ns = clock_->NowNs();
    absl::MutexLock lock(&mu_);
    ++answered_;
    ready_.push_back(index);
    if (!counting_) return;
    ++counts_.responses;
    if (!status.ok()) {
      if (counts_.errors++ == 0) CS_LOG(ERROR) << "request failed: " << status.message();
      return;
    }
    ++counts_.responses_by_size[timing.batch_size];
    counts_.latency_ns.push_back(done_ns - slot.sent_ns);
  }

  InferDispatcher* const dispatcher_;
  const std::string& request_bytes_;
  const Clock* const clock_;
  std::vector<Slot> slots_;
  int64_t next_id_ = 0;  // the feeder's thread only
  absl::Mutex mu_;
  std::vector<int> ready_ ABSL_GUARDED_BY(mu_);
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  bool counting_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

// CPU time (user + system, clock ticks) of this process's threads by name, digits removed (the
// workers' and completion threads' numbers), from /proc/self/task/*/stat.
std::map<std::string, int64_t> ThreadTicks() {
  std::map<std::string, int64_t> ticks;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::string name;
    for (char c : stat.substr(open + 1, close - open - 1)) {
      if (c < '0' || c > '9') name += c;
    }
    std::istringstream rest(stat.substr(close + 2));  // from field 3, the state
    std::string field;
    int64_t utime = 0;
    int64_t stime = 0;
    for (int k = 3; k <= 15 && rest >> field; ++k) {
      if (k == 14) utime = std::stoll(field);
      if (k == 15) stime = std::stoll(field);
    }
    ticks[name] += utime + stime;
  }
  return ticks;
}

// Cores used by each thread name between two ThreadTicks() `seconds` apart, and in all ("process").
// Threads that started in between count from zero.
nlohmann::json CoresBetween(const std::map<std::string, int64_t>& before, const std::map<std::string, int64_t>& after,
                            double seconds) {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  nlohmann::json threads = nlohmann::json::object();
  double process = 0;
  for (const auto& [name, t] : after) {
    auto it = before.find(name);
    const double cores = static_cast<double>(t - (it == before.end() ? 0 : it->second)) / hz / seconds;
    process += cores;
    threads[name] = cores;  // every thread, idle ones too: the reader filters
  }
  return {{"process", process}, {"threads", threads}};
}

// Answers so far over the feeders.
int64_t Answered(std::vector<std::unique_ptr<Feeder>>& feeders) {
  int64_t n = 0;
  for (auto& f : feeders) n += f->answered();
  return n;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  return 1;
}

int Run(const Flags& flags) {
  const Clock* clock = SteadyClock::Get();
  const ServerOptions defaults;  // chronoserve's own defaults for everything not set here

  telemetry::TelemetryOptions telemetry_options;
  telemetry_options.metrics.enabled = false;  // as run_streaming.sh starts the server (--allow-metrics false)
  auto created = telemetry::Telemetry::Create(std::move(telemetry_options));
  if (!created.ok()) return Fail(created.status());
  std::unique_ptr<telemetry::Telemetry> telemetry = *std::move(created);
  if (absl::Status s = telemetry->Start(); !s.ok()) return Fail(s);

  ModelRegistry registry;
  telemetry->SetModelRegistry(&registry);
  DeviceActivityRegistry devices;
  ModelManager manager(&registry, &devices,
                       ModelLoadOptions{defaults.warmup, flags.request_timing == "on", defaults.host_policies,
                                        defaults.input_arena_bytes, defaults.max_queue_bytes},
                       clock, telemetry->gpu_clock());
  if (absl::Status s = manager.LoadModel(flags.repository + "/" + flags.model); !s.ok()) return Fail(s);
  auto runtime = registry.Find(flags.model, "");
  if (!runtime.ok()) return Fail(runtime.status());
  const ModelSpec spec = (*runtime)->spec();
  InferDispatcher dispatcher(&registry, clock, telemetry.get(), nullptr);

  inference::ModelInferRequest message = SyntheticInferMessage(spec, flags.items, 0x5e7ed);
  const std::string request_bytes = message.SerializeAsString();

  std::vector<std::unique_ptr<Feeder>> feeders;
  for (int t = 0; t < flags.threads; ++t) {
    const int slots = flags.concurrency / flags.threads + (t < flags.concurrency % flags.threads ? 1 : 0);
    feeders.push_back(std::make_unique<Feeder>(&dispatcher, request_bytes, slots, clock));
  }
  std::vector<std::thread> threads;
  const int64_t feeding_from_ns = clock->NowNs();
  for (auto& f : feeders) {
    threads.emplace_back([feeder = f.get()] {
      SetCurrentThreadName("sp-feeder");
      feeder->Run();
    });
  }

  // Warm-up: until that many answers have come (at most a minute), then the measured window.
  const absl::Time warmup_deadline = absl::Now() + absl::Minutes(1);
  while (Answered(feeders) < flags.warmup_requests && absl::Now() < warmup_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::printf("measuring for %lld ms\n", static_cast<long long>(flags.duration_ms));
  std::fflush(stdout);
  const std::map<std::string, int64_t> ticks_before = ThreadTicks();
  const int64_t start_ns = clock->NowNs();
  for (auto& f : feeders) f->SetCounting(true);
  absl::SleepFor(absl::Milliseconds(flags.duration_ms));
  for (auto& f : feeders) f->SetCounting(false);
  const int64_t end_ns = clock->NowNs();
  const nlohmann::json cores =
      CoresBetween(ticks_before, ThreadTicks(), static_cast<double>(end_ns - start_ns) * 1e-9);
  for (auto& f : feeders) f->Stop();
  for (auto& t : threads) t.join();
  const bool drained = dispatcher.WaitForAnswered(absl::Now() + absl::Seconds(30));

  Counts total;
  for (auto& f : feeders) {
    Counts c = f->counts();
    total.responses += c.responses;
    total.errors += c.errors;
    for (const auto& [size, n] : c.responses_by_size) total.responses_by_size[size] += n;
    total.latency_ns.insert(total.latency_ns.end(), c.latency_ns.begin(), c.latency_ns.end());
  }
  const double feeding_s = static_cast<double>(clock->NowNs() - feeding_from_ns) * 1e-9;
  registry.StopAll();  // the workers log their time by phase
  telemetry->Shutdown();

  const double seconds = static_cast<double>(end_ns - start_ns) * 1e-9;
  const int64_t ok = total.responses - total.errors;
  const double items_per_s = static_cast<double>(ok * flags.items) / seconds;
  // Items per executed batch (each batch counted once: common/batch_sizes.h), and the plain mean of
  // the sizes the answers gave.
  const double per_batch = ItemsPerBatch(total.responses_by_size);
  double sum = 0;
  int64_t sized = 0;
  for (const auto& [size, n] : total.responses_by_size) {
    if (size <= 0 || n <= 0) continue;
    sum += static_cast<double>(n) * static_cast<double>(size);
    sized += n;
  }
  const double mean = sized > 0 ? sum / static_cast<double>(sized) : 0;
  const double p50 = bench::PercentileUs(total.latency_ns, 50);
  const double p99 = bench::PercentileUs(total.latency_ns, 99);
  std::printf("served path without gRPC: %s, concurrency %d, %d feeder threads, %lld item(s) per request, timing %s\n",
              flags.model.c_str(), flags.concurrency, flags.threads, static_cast<long long>(flags.items),
              flags.request_timing.c_str());
  std::printf("%12s %10s %10s %10s %10s %8s %10s\n", "items/s", "p50 us", "p99 us", "batch", "mean/resp", "errors",
              "cores");
  std::printf("%12.0f %10.0f %10.0f %10.1f %10.1f %8lld %10.2f\n", items_per_s, p50, p99, per_batch, mean,
              static_cast<long long>(total.errors), cores["process"].get<double>());
  if (!drained) std::fprintf(stderr, "requests still unanswered 30 s after the window\n");

  if (!flags.json_path.empty()) {
    nlohmann::json by_size = nlohmann::json::object();
    for (const auto& [size, n] : total.responses_by_size) {
      if (n > 0) by_size[std::to_string(size)] = n;
    }
    nlohmann::json run = {
        {"batch_size", flags.items},
        {"concurrency", flags.concurrency},
        {"throughput_items_per_s", items_per_s},
        {"responses", total.responses},
        {"errors", total.errors},
        {"stable", nullptr},  // a fixed window: no stability judged
        {"window_s", seconds},
        {"latency_us", {{"e2e", {{"p50", p50}, {"p99", p99}}}}},
        {"batch_size_executed",
         flags.request_timing == "on"
             ? nlohmann::json{{"mean", mean}, {"per_batch_mean", per_batch}, {"responses_by_size", by_size}}
             : nlohmann::json(nullptr)},
    };
    nlohmann::json report = {{"tool", "bench_served_path"},
                             {"model", flags.model},
                             {"threads", flags.threads},
                             {"request_timing", flags.request_timing},
                             {"cpu_cores", cores},
                             {"feeding_s", feeding_s},
                             {"runs", nlohmann::json::array({run})}};
    std::ofstream(flags.json_path) << report.dump(2) << "\n";
  }
  return total.errors == 0 && drained ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The server's request path without gRPC's transport: feeder threads in place of gRPC's"};
  Flags flags;
  app.add_option("--model-repository", flags.repository, "Model repository")->required();
  app.add_option("-m,--model", flags.model, "Model name (its directory in the repository)")->required();
  app.add_option("--concurrency", flags.concurrency, "Requests kept in flight")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--threads", flags.threads, "Feeder threads (in place of gRPC's)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("-b,--batch-size", flags.items, "Items per request")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--warmup-requests", flags.warmup_requests, "Answers before the window opens")
      ->check(CLI::Range(0, 1 << 30))->capture_default_str();
  app.add_option("--duration-ms", flags.duration_ms, "The measured window")->check(CLI::Range(1, 3600 * 1000))
      ->capture_default_str();
  app.add_option("--request-timing", flags.request_timing, "As chronoserve's --request-timing")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  app.add_option("--json", flags.json_path, "Write the report as JSON");
  CLI11_PARSE(app, argc, argv);
  if (flags.threads > flags.concurrency) flags.threads = flags.concurrency;
  return Run(flags);
}
