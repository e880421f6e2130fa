// RunPoint when the server stops answering: chronoserve frozen with SIGSTOP keeps its socket open
// and answers nothing, and with --timeout-ms 0 or --streaming no request can fail by itself. The
// point fails with DEADLINE_EXCEEDED naming what it waited for, instead of hanging. Against the real
// chronoserve binary on 127.0.0.1. Also, without a server: the stall rule (StallWatch) and the seeds
// of a sweep's points.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/chronobench/benchmark.h"
#include "client/chronobench/stall_watch.h"
#include "client/chronobench/trial_runner.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/client/mlp_target.h"
#include "tests/client/test_server.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::MlpTarget;
using chronoserve::testing::StartMlpTarget;
using chronoserve::testing::TestServer;

constexpr auto kWait = std::chrono::seconds(60);

struct StuckCase {
  const char* name;
  bool streaming;
  bool freeze_in_first_window;  // false: frozen before the warm-up
  const char* waited_for;       // named in the message
};

void PrintTo(const StuckCase& stuck, std::ostream* os) { *os << stuck.name; }

class StuckServerTest : public ::testing::TestWithParam<StuckCase> {};

TEST_P(StuckServerTest, PointFailsWithDeadlineExceededInsteadOfHanging) {
  const StuckCase& stuck = GetParam();
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_stuck", /*seed=*/11);
  ASSERT_TRUE(target.ok()) << target.status();
  const TestServer* server = &target->server;
  const inference::ModelInferRequest* request = &target->request;
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(server->url, 1)) {
    // Connected before the server freezes: the calls are stuck on a live connection, not a dial.
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + kWait));
    stubs.emplace_back(channel);
  }

  RunnerContext ctx;
  ctx.stubs = &stubs;
  ctx.clock = SteadyClock::Get();
  ctx.measurement.interval_ms = 50;  // the wait gives up after 20 intervals (2 s at least)
  ctx.measurement.warmup_requests = 10;
  ctx.measurement.window_min_requests = stuck.freeze_in_first_window ? 1'000'000 : 0;
  ctx.measurement.max_trials = 3;
  ctx.timeout_ms = 0;
  ctx.streaming = stuck.streaming;
  std::atomic<bool> frozen{false};
  if (stuck.freeze_in_first_window) {
    ctx.progress = [&](const std::string& line) {
      if (line.find("trial") != std::string::npos && !frozen.exchange(true)) server->process->Signal(SIGSTOP);
    };
  } else {
    server->process->Signal(SIGSTOP);
    frozen = true;
  }
  PointSpec spec;
  spec.concurrency = 4;
  auto run = std::async(std::launch::async, [&] { return RunPoint(spec, *request, ctx); });
  const bool returned = run.wait_for(kWait) == std::future_status::ready;
  server->process->Signal(SIGCONT);
  if (!returned) {
    ADD_FAILURE() << stuck.name << ": RunPoint still waiting after 60 s";
    server->process->Signal(SIGKILL);  // every request fails now, so RunPoint should return
    if (run.wait_for(kWait) != std::future_status::ready) {
      // The future's destructor would wait for ever: end the test binary instead.
      std::fprintf(stderr, "%s: RunPoint still running 60 s after the server was killed\n", stuck.name);
      std::abort();
    }
  }
  const absl::StatusOr<PointResult> result = run.get();
  EXPECT_TRUE(frozen.load());
  ASSERT_TRUE(result.ok()) << stuck.name << ": the load ran, so the point comes back with its failure: "
                           << result.status();
  const absl::Status& failure = result->failure;
  EXPECT_EQ(failure.code(), absl::StatusCode::kDeadlineExceeded) << failure;
  EXPECT_NE(failure.message().find(stuck.waited_for), std::string::npos) << failure;
  EXPECT_NE(failure.message().find("concurrency 4"), std::string::npos) << failure;
  // The frozen server holds every request of the closed loop: all four are counted, none dropped.
  EXPECT_EQ(result->unanswered_at_end, spec.concurrency) << stuck.name;
  EXPECT_EQ(result->unsent_at_end, 0) << stuck.name;
}

INSTANTIATE_TEST_SUITE_P(
    UnaryAndStreamed, StuckServerTest,
    ::testing::Values(StuckCase{"unary, no timeout, frozen before the warm-up", false, false, "--warmup-requests"},
                      StuckCase{"streamed, frozen in the first window", true, true, "--measurement-request-count"}),
    [](const ::testing::TestParamInfo<StuckCase>& info) {
      return std::string(info.param.streaming ? "StreamedInWindow" : "UnaryInWarmup");
    });

// The calls chronobench makes while connecting (ServerLive, ServerMetadata, ModelMetadata,
// ModelReady) go through an InferenceClient with a default deadline (chronobench: its 10 s connect
// timeout; here 300 ms): a server that accepted the connection but answers nothing fails each with
// DEADLINE_EXCEEDED instead of hanging; once it answers again, the same client works.
TEST(StuckServerConnectTest, CallsWithoutTheirOwnDeadlineGetTheClientsDefault) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_stuck_connect", /*seed=*/13);
  ASSERT_TRUE(target.ok()) << target.status();
  auto channel = MakeDistinctChannels(target->server.url, 1)[0];
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + kWait));
  InferenceClient client(channel, std::chrono::milliseconds(300));
  target->server.process->Signal(SIGSTOP);
  auto calls = std::async(std::launch::async, [&] {
    return std::vector<absl::Status>{client.ServerLive().status(), client.ServerMetadata().status(),
                                     client.ModelMetadata("mlp").status(), client.ModelReady("mlp").status()};
  });
  const bool returned = calls.wait_for(kWait) == std::future_status::ready;
  target->server.process->Signal(SIGCONT);
  if (!returned) {
    ADD_FAILURE() << "a call without a deadline of its own waited for ever";
    target->server.process->Signal(SIGKILL);  // every call fails now, so the calls should return
    if (calls.wait_for(kWait) != std::future_status::ready) {
      // The future's destructor would wait for ever: end the test binary instead.
      std::fprintf(stderr, "the connect calls still running 60 s after the server was killed\n");
      std::abort();
    }
    return;
  }
  const std::vector<absl::Status> statuses = calls.get();
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), absl::StatusCode::kDeadlineExceeded) << "call " << i << ": " << statuses[i];
  }
  // Once resumed, the server answers again, but on a busy box maybe not within the 300 ms of the
  // first try: the same client retries (only on DEADLINE_EXCEEDED) for up to kWait.
  const absl::Time give_up = absl::Now() + absl::FromChrono(kWait);
  absl::StatusOr<bool> live = client.ServerLive();
  while (!live.ok() && live.status().code() == absl::StatusCode::kDeadlineExceeded && absl::Now() < give_up) {
    live = client.ServerLive();
  }
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
}

// Every point of a sweep builds its workers afresh; seeded alike, the k-th request of worker w drew
// the same traceparent sampling, trace id and span id at every point. Each point's workers now get
// a seed of their own, fixed by --seed and the point's place in the sweep.
TEST(PointSeedTest, EveryPointOfASweepSeedsItsWorkersApart) {
  LoadOptions load;
  load.mode = LoadMode::kConcurrency;
  load.concurrency = {1, 6, 11, 16};
  load.batch_sizes = {1, 2};
  const std::vector<PointSpec> points = PlanSweep(load);
  ASSERT_EQ(points.size(), 8u);
  RunnerContext ctx;
  ctx.threads = 4;
  ctx.seed = 1;
  std::set<uint64_t> seeds;
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].index, static_cast<int>(i));
    const std::vector<WorkerPlan> plans = PlanWorkers(points[i], ctx);
    ASSERT_FALSE(plans.empty());
    // One seed a point; LoadWorker and Pacer mix the worker's index into it.
    for (const WorkerPlan& plan : plans) EXPECT_EQ(plan.seed, plans[0].seed) << points[i].Label();
    EXPECT_EQ(plans[0].seed, PointSeed(1, static_cast<int>(i))) << "reproduced by --seed";
    seeds.insert(plans[0].seed);
  }
  EXPECT_EQ(seeds.size(), points.size()) << "two points share their workers' seed";
  ctx.seed = 2;
  for (const PointSpec& p : points) EXPECT_EQ(seeds.count(PlanWorkers(p, ctx)[0].seed), 0u) << p.Label();
  // Nearby seeds and points stay apart: --seed 1's second point is not --seed 2's first.
  EXPECT_NE(PointSeed(1, 1), PointSeed(2, 0));
}

// The stall rule of the waits for completions, on times written here. Open loop at 1/s with Poisson
// gaps has nothing in flight for seconds at a time (a gap over 3 s is e^-3, 5 % of them); that
// failed a healthy warm-up as stuck. Only time with requests in flight and no completion counts.
TEST(StallWatchTest, OnlyTimeWithRequestsInFlightAndNoCompletionCounts) {
  constexpr int64_t kLimit = 2'000'000'000;
  constexpr int64_t kTick = 200'000'000;
  StallWatch watch(kLimit, /*now_ns=*/1'000, /*completed=*/5);
  int64_t now = 1'000;
  // A long gap with nothing in flight: never a stall.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(watch.Stalled(now += kTick, 5, /*in_flight=*/0)) << i;
  // A request sent, answered within the limit: no stall; the answer starts the count again.
  const int64_t sent_at = now;
  EXPECT_FALSE(watch.Stalled(now = sent_at + kLimit - 1, 5, 1));
  EXPECT_FALSE(watch.Stalled(now = sent_at + kLimit, 6, 1)) << "a completion, with the next one in flight";
  EXPECT_FALSE(watch.Stalled(now = sent_at + 2 * kLimit - 1, 6, 1));
  // In flight for the whole limit without an answer: stalled, and it says for how long.
  EXPECT_TRUE(watch.Stalled(now = sent_at + 2 * kLimit, 6, 1));
  EXPECT_EQ(watch.StalledNs(now), kLimit);
  // A look with nothing in flight restarts the count, without any completion.
  StallWatch idle(kLimit, 0, 0);
  EXPECT_FALSE(idle.Stalled(kLimit - 1, 0, 3));
  EXPECT_FALSE(idle.Stalled(kLimit, 0, 0));
  EXPECT_FALSE(idle.Stalled(2 * kLimit - 1, 0, 2));
  EXPECT_TRUE(idle.Stalled(2 * kLimit, 0, 2));
}

}  // namespace
}  // namespace chronoserve::client::bench
