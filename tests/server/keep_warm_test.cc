// Keep-warm and the launch-bound flag: config parsing, the schedule (pure), the queue's timed wait,
// and a Worker with a fake instance on a FakeClock: it re-runs its model while idle, stops after
// the horizon, restarts after the next batch, and keeps the runs out of statistics and timing.
// Time moves only when the test advances the FakeClock and Poke()s the queue: no sleeps.
#include "server/scheduler/keep_warm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/scheduler/model_runtime.h"
#include "server/scheduler/worker.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

ModelSpec Spec(std::map<std::string, std::string> parameters) {
  ModelSpec spec;
  spec.name = "warm";
  spec.max_batch_size = 2;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {3}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  spec.parameters = std::move(parameters);
  return spec;
}

TEST(KeepWarmConfigTest, OffByDefaultHorizonDefaultsToAMinute) {
  auto off = KeepWarmConfigFromSpec(Spec({}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->enabled());
  auto on = KeepWarmConfigFromSpec(Spec({{"keep_warm_ms", "50"}}));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->period_ns, 50 * kMs);
  EXPECT_EQ(on->horizon_ns, 60'000 * kMs);
  auto both = KeepWarmConfigFromSpec(Spec({{"keep_warm_ms", " 10 "}, {"keep_warm_horizon_ms", "250"}}));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->period_ns, 10 * kMs);
  EXPECT_EQ(both->horizon_ns, 250 * kMs);
  auto zero = KeepWarmConfigFromSpec(Spec({{"keep_warm_ms", "0"}}));
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->enabled());
}

TEST(KeepWarmConfigTest, RejectsBadValuesNamingModelAndKey) {
  const std::map<std::string, std::string> bad[] = {
      {{"keep_warm_ms", "fast"}},      {{"keep_warm_ms", "-1"}},
      {{"keep_warm_ms", "2.5"}},       {{"keep_warm_ms", ""}},
      {{"keep_warm_horizon_ms", "0"}}, {{"keep_warm_ms", "10"}, {"keep_warm_horizon_ms", "1e3"}},
      {{"keep_warm_ms", "120000"}},  // longer than the default horizon (60 s): it would never run
  };
  for (const auto& params : bad) {
    auto config = KeepWarmConfigFromSpec(Spec(params));
    ASSERT_FALSE(config.ok()) << params.begin()->second;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr("model 'warm'"));
    EXPECT_THAT(config.status().message(), HasSubstr("keep_warm"));
  }
}

TEST(KeepWarmScheduleTest, RunsEveryPeriodUntilTheHorizon) {
  KeepWarmConfig config;
  config.period_ns = 10;
  config.horizon_ns = 35;
  struct Case {
    int64_t idle_since, last_run, want;
  };
  const Case cases[] = {
      {100, 100, 110},  // first run one period after the batch
      {100, 110, 120},  // then one period after the previous run started
      {100, 120, 130},
      {100, 125, 135},  // exactly at the horizon: still runs
      {100, 130, 0},    // the next would be past the horizon: lapsed
      {200, 130, 210},  // a new batch ended at 200: a new idle spell
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NextKeepWarmNs(config, c.idle_since, c.last_run), c.want)
        << "idle since " << c.idle_since << ", last run " << c.last_run;
  }
  EXPECT_EQ(NextKeepWarmNs(KeepWarmConfig{}, 100, 100), 0) << "off";
}

TEST(LaunchBoundTest, LaunchAtLeastFourFifthsOfDeviceTimedCompute) {
  struct Case {
    int64_t launch_ns, compute_ns;
    bool device_timed, want;
  };
  const Case cases[] = {
      {800, 1000, true, true},   {799, 1000, true, false}, {1200, 1000, true, true},
      {10, 100, true, false},    {1000, 1000, false, false},  // CPU: launch == compute by design
      {100, 0, true, false},
  };
  for (const Case& c : cases) {
    BatchTiming t;
    t.launch_ns = c.launch_ns;
    t.compute_ns = c.compute_ns;
    t.device_timed = c.device_timed;
    EXPECT_EQ(IsLaunchBound(t), c.want) << c.launch_ns << "/" << c.compute_ns << " " << c.device_timed;
  }
}

std::unique_ptr<InferRequest> Request(std::string* output) {
  auto r = std::make_unique<InferRequest>();
  r->set_shape_key("[3];");
  r->cancelled = std::make_shared<CancelFlag>();
  OutputTensor out;
  out.index = 0;
  out.data = output;
  r->outputs.push_back(out);
  return r;
}

TEST(ModelQueueTimedWaitTest, TimesOutOnlyWhileEmpty) {
  FakeClock clock;
  BatchPolicyConfig policy;
  policy.max_batch_size = 8;
  policy.dynamic = true;
  policy.max_queue_delay_ns = 50 * kMs;  // a lone request waits for company
  ModelQueue queue("model 'm'", policy, {}, &clock);
  Batch batch, dropped;
  EXPECT_EQ(queue.NextBatchUntil(&batch, &dropped, clock.NowNs()), ModelQueue::WaitResult::kTimeout);
  std::string out;
  auto r = Request(&out);
  ASSERT_TRUE(queue.Enqueue(r).ok());
  clock.AdvanceNs(50 * kMs);
  // The deadline has long passed, but a queued request is never abandoned for it.
  EXPECT_EQ(queue.NextBatchUntil(&batch, &dropped, clock.NowNs() - 40 * kMs),
            ModelQueue::WaitResult::kBatch);
  EXPECT_EQ(batch.size(), 1u);
  queue.Close();
  EXPECT_EQ(queue.NextBatchUntil(&batch, &dropped, clock.NowNs() + kMs), ModelQueue::WaitResult::kClosed);
}

// A fake instance (no device) that counts keep-warm runs and lets the test wait for them.
class KeepWarmCountingInstance final : public ModelInstance {
 public:
  explicit KeepWarmCountingInstance(absl::Status keep_warm_status = absl::OkStatus())
      : keep_warm_status_(std::move(keep_warm_status)) {}
  absl::Status Execute(Batch& batch, BatchTiming* timing) override {
    timing->batch_size = static_cast<int64_t>(batch.size());
    timing->staged_ns = timing->gpu_done_ns = timing->dequeued_ns;
    for (auto& r : batch) {
      for (auto& out : r->outputs) out.data->assign(8, '\x01');
      r->timeline.output_done_ns = timing->dequeued_ns;
    }
    return absl::OkStatus();
  }
  absl::Status KeepWarm() override {
    absl::MutexLock lock(&mu_);
    ++runs_;
    return keep_warm_status_;
  }
  int gpu() const override { return -1; }
  std::string device_name() const override { return "fake"; }

  // Waits (at most 10 s of real time) until `n` keep-warm runs happened; returns the count.
  int WaitForRuns(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return runs_ >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
    return runs_;
  }
  int runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  const absl::Status keep_warm_status_;
  absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
};

class KeepWarmWorkerTest : public ::testing::Test {
 protected:
  void Start(const ModelSpec& spec, absl::Status keep_warm_status = absl::OkStatus()) {
    auto fake = std::make_unique<KeepWarmCountingInstance>(std::move(keep_warm_status));
    fake_ = fake.get();
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::move(fake));
    auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, &clock_);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
  }
  // Moves the clock and wakes the worker so it re-reads it.
  void Advance(int64_t ns) {
    clock_.AdvanceNs(ns);
    runtime_->queue().Poke();
  }
  // Serves one request; returns the batch timing it was answered with.
  BatchTiming Serve() {
    std::string output;
    auto r = Request(&output);
    absl::Notification done;
    BatchTiming timing;
    r->on_complete = [&](std::unique_ptr<InferRequest> finished) {
      EXPECT_TRUE(finished->status.ok()) << finished->status;
      timing = finished->timeline.batch();
      done.Notify();
    };
    EXPECT_TRUE(runtime_->queue().Enqueue(r).ok());
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return timing;
  }
  const Worker& worker() { return *runtime_->workers().front(); }

  FakeClock clock_;
  KeepWarmCountingInstance* fake_ = nullptr;
  std::unique_ptr<ModelRuntime> runtime_;
};

TEST_F(KeepWarmWorkerTest, ReplaysWhileIdleStopsAfterHorizonNeverCounted) {
  Start(Spec({{"keep_warm_ms", "10"}, {"keep_warm_horizon_ms", "35"}}));
  for (int n = 1; n <= 3; ++n) {
    Advance(10 * kMs);
    ASSERT_EQ(fake_->WaitForRuns(n), n) << "run " << n << " due " << n * 10 << " ms into the idle spell";
  }
  Advance(10 * kMs);  // 40 ms idle: past the 35 ms horizon, nothing more runs
  Advance(60 * kMs);
  const BatchTiming timing = Serve();
  EXPECT_EQ(fake_->runs(), 3);
  EXPECT_EQ(worker().keep_warm_runs(), 3);
  EXPECT_TRUE(timing.cold) << "first batch after load (and after a keep-warm lapse)";
  EXPECT_EQ(timing.batch_size, 1) << "keep-warm never shares a request's batch";
  const ModelStatsSnapshot stats = runtime_->stats().Snapshot();
  EXPECT_EQ(stats.execution_count, 1u) << "keep-warm runs are not executions";

  // The batch starts a new idle spell: keep-warm resumes one period later.
  Advance(10 * kMs);
  ASSERT_EQ(fake_->WaitForRuns(4), 4);
  // A batch inside the horizon is not cold.
  EXPECT_FALSE(Serve().cold);
  Advance(36 * kMs);  // lapse again
  EXPECT_TRUE(Serve().cold) << "first batch after a keep-warm lapse is cold";
  EXPECT_EQ(fake_->runs(), 4) << "a wake-up past the horizon does not run";
  EXPECT_EQ(runtime_->stats().Snapshot().execution_count, 3u);
}

TEST_F(KeepWarmWorkerTest, OffByDefault) {
  Start(Spec({}));
  Advance(3600'000 * kMs);
  EXPECT_TRUE(Serve().cold);
  Advance(3600'000 * kMs);
  EXPECT_FALSE(Serve().cold) << "without keep-warm only the first batch is cold";
  EXPECT_EQ(fake_->runs(), 0);
  EXPECT_EQ(worker().keep_warm_runs(), 0);
}

TEST_F(KeepWarmWorkerTest, AFailedRunTurnsKeepWarmOff) {
  Start(Spec({{"keep_warm_ms", "10"}}), absl::UnimplementedError("no keep-warm here"));
  Advance(10 * kMs);
  ASSERT_EQ(fake_->WaitForRuns(1), 1);
  Advance(10 * kMs);
  Advance(10 * kMs);
  Serve();
  EXPECT_EQ(fake_->runs(), 1) << "not retried";
  EXPECT_EQ(worker().keep_warm_runs(), 0) << "only successful runs count";
}

TEST(KeepWarmLoadTest, BadSettingFailsTheModelLoad) {
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<KeepWarmCountingInstance>());
  auto runtime = ModelRuntime::Create(Spec({{"keep_warm_ms", "often"}}), std::move(instances),
                                      WarmupOptions{}, SteadyClock::Get());
  ASSERT_FALSE(runtime.ok());
  EXPECT_THAT(runtime.status().message(), HasSubstr("keep_warm_ms"));
}

}  // namespace
}  // namespace chronoserve::server
