// LoadWorker when the server stops in the middle of the load (SIGTERM: error responses and, with
// --streaming, ended streams while it drains, then refused connections): every request sent is
// answered, failed or cancelled at the end (sent == completed + drained), none is lost on a stream
// that failed before its Finish arrived, and failures keep being counted after the server is gone;
// streamed closed and open loop, and unary open loop. Also: one send-time stamp outside open loop,
// an open-loop worker that keeps its times without spinning (run alone: ALONE in
// tests/client/CMakeLists.txt), and the requests sent in the warm-up kept out of the measurement.
// Against the real chronoserve binary on 127.0.0.1.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/chronobench/benchmark.h"
#include "client/chronobench/load_worker.h"
#include "client/chronobench/request_factory.h"
#include "client/chronobench/send_waker.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/client/mlp_target.h"
#include "tests/client/test_server.h"
#include "tests/server/proc_threads.h"
#include "tools/example_models.h"

namespace chronoserve::client::bench {
namespace {

using chronoserve::testing::TestDir;
using chronoserve::testing::MlpTarget;
using chronoserve::testing::RunDelayNs;
using chronoserve::testing::StartMlpTarget;
using chronoserve::testing::StartTestServer;
using chronoserve::testing::StolenPerCpuNs;
using chronoserve::testing::TestServer;

constexpr absl::Duration kWait = absl::Seconds(30);

struct StopCase {
  const char* name;
  WorkerPlan plan;
};

std::vector<StopCase> StopCases() {
  WorkerPlan closed;
  closed.mode = LoadMode::kConcurrency;
  closed.in_flight = 8;
  closed.streaming = true;
  WorkerPlan open = closed;
  open.mode = LoadMode::kRate;
  open.total_rate_per_s = 2000;
  WorkerPlan unary_open = open;
  unary_open.streaming = false;
  unary_open.timeout_ms = 10'000;
  return {{"streamed closed loop, 8 in flight", closed},
          {"streamed open loop, 2000/s", open},
          {"unary open loop, 2000/s", unary_open}};
}

class LoadWorkerStopTest : public ::testing::TestWithParam<int> {};

TEST_P(LoadWorkerStopTest, RequestsAreAnsweredOrCountedWhenTheServerStops) {
  const StopCase stop_case = StopCases()[GetParam()];
  SCOPED_TRACE(stop_case.name);
  absl::StatusOr<TestDir> test_dir = TestDir::Create("chronobench_worker");  // outlives the server below
  ASSERT_TRUE(test_dir.ok()) << test_dir.status();
  const std::string dir = test_dir->path();
  examples::ModelOptions mlp;
  mlp.max_batch_size = 16;
  ASSERT_TRUE(examples::WriteMlp(dir + "/models", "mlp", mlp).ok());
  absl::StatusOr<TestServer> server = StartTestServer(dir + "/models", {"--exit-timeout-secs", "5"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string& url = server->url;

  auto metadata = InferenceClient::Connect(url, std::chrono::seconds(30))->ModelMetadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  auto factory = RequestFactory::Create(*metadata, InputOptions{}, /*seed=*/7);
  ASSERT_TRUE(factory.ok()) << factory.status();
  auto request = factory->Build("", 1);
  ASSERT_TRUE(request.ok()) << request.status();
  // Two connections: one stream may fail while the other still answers, the case that lost requests.
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(url, 2)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &*request, SteadyClock::Get(), nullptr, 1, nullptr};
  LoadWorker worker(0, stop_case.plan, shared);
  ASSERT_TRUE(worker.Prepare().ok());
  worker.Start(SteadyClock::Get()->NowNs());

  ASSERT_TRUE(worker.AwaitCompleted(200, kWait)) << "the load never ran: " << worker.completed();
  server->process->Signal(SIGTERM);
  auto server_exit = server->process->WaitForExit(kWait);
  ASSERT_TRUE(server_exit.ok()) << server_exit.status();
  // With the server gone every request fails at once. Closed loop: a request lost with its slot
  // would stop the load once all eight were lost.
  const int64_t at_exit = worker.completed();
  EXPECT_TRUE(worker.AwaitCompleted(at_exit + 1000, kWait))
      << "failures stopped being counted after " << worker.completed() - at_exit;
  worker.Stop();

  EXPECT_EQ(worker.sent(), worker.completed() + worker.drained())
      << worker.sent() - worker.completed() - worker.drained() << " requests neither answered nor counted";
  const LatencyRecorder recorded = worker.TakeRecorder();
  EXPECT_GT(recorded.successes(), 0);
  EXPECT_EQ(recorded.successes() + recorded.errors(), worker.completed());
  EXPECT_GT(recorded.errors_by_code().count(static_cast<int>(grpc::StatusCode::UNAVAILABLE)), 0u);
}

INSTANTIATE_TEST_SUITE_P(ClosedAndOpenLoop, LoadWorkerStopTest, ::testing::Values(0, 1, 2));

// Which channel each send goes on: round-robin over all from the worker's own index by default;
// with --connection-affinity only the worker's own channels, none shared while there are enough.
TEST(ChannelForSendTest, RoundRobinOrEachWorkerOnItsOwnChannels) {
  for (uint64_t turn = 0; turn < 8; ++turn) {
    EXPECT_EQ(ChannelForSend(1, 2, 4, turn, false), (1 + turn) % 4);
  }
  // 8 workers, 8 channels: worker w always on channel w.
  for (int w = 0; w < 8; ++w) {
    for (uint64_t turn = 0; turn < 5; ++turn) EXPECT_EQ(ChannelForSend(w, 8, 8, turn, true), static_cast<size_t>(w));
  }
  // 4 workers, 10 channels: worker 1 on 1, 5, 9 in turn; worker 3 on 3, 7; every channel used by one.
  std::vector<std::set<int>> users(10);
  for (int w = 0; w < 4; ++w) {
    for (uint64_t turn = 0; turn < 12; ++turn) users[ChannelForSend(w, 4, 10, turn, true)].insert(w);
  }
  for (size_t c = 0; c < users.size(); ++c) {
    EXPECT_EQ(users[c], std::set<int>{static_cast<int>(c % 4)}) << "channel " << c;
  }
  EXPECT_EQ(ChannelForSend(1, 4, 10, 0, true), 1u);
  EXPECT_EQ(ChannelForSend(1, 4, 10, 1, true), 5u);
  EXPECT_EQ(ChannelForSend(1, 4, 10, 2, true), 9u);
  EXPECT_EQ(ChannelForSend(1, 4, 10, 3, true), 1u);
  // 8 workers, 4 channels: each worker on one, two workers a channel.
  for (int w = 0; w < 8; ++w) {
    for (uint64_t turn = 0; turn < 3; ++turn) EXPECT_EQ(ChannelForSend(w, 8, 4, turn, true), static_cast<size_t>(w % 4));
  }
  // A worker index not below the plan's count (a caller's mismatch) goes round-robin, never / 0.
  for (uint64_t turn = 0; turn < 4; ++turn) {
    EXPECT_EQ(ChannelForSend(2, 1, 2, turn, true), (2 + turn) % 2);
    EXPECT_EQ(ChannelForSend(0, 0, 3, turn, true), turn % 3);
  }
}

// Outside open loop e2e counts from the actual send: one stamp, taken after the context is built
// and the traceparent formatted, so e2e and e2e_actual_send are the same values (no schedule lag),
// unary and streamed.
TEST(LoadWorkerTest, ClosedLoopAndIdleGapTimeFromTheActualSend) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_stamp", /*seed=*/5);
  ASSERT_TRUE(target.ok()) << target.status();
  const TestServer* server = &target->server;
  const inference::ModelInferRequest* request = &target->request;
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(server->url, 2)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &*request, SteadyClock::Get(), nullptr, 1, nullptr};

  for (const LoadMode mode : {LoadMode::kConcurrency, LoadMode::kIdleGap}) {
    for (const bool streaming : {false, true}) {
      SCOPED_TRACE(::testing::Message() << LoadModeName(mode) << (streaming ? ", streamed" : ", unary"));
      WorkerPlan plan;
      plan.mode = mode;
      plan.in_flight = 4;
      plan.idle_gap_ns = 100'000;
      plan.timeout_ms = 10'000;
      plan.traceparent_rate = 1;  // the most work between building the call and sending it
      plan.streaming = streaming;
      LoadWorker worker(0, plan, shared);
      ASSERT_TRUE(worker.Prepare().ok());
      worker.Start(SteadyClock::Get()->NowNs());
      const bool ran = worker.AwaitCompleted(50, kWait);
      worker.Stop();
      ASSERT_TRUE(ran) << "completed " << worker.completed();
      const LatencyRecorder recorded = worker.TakeRecorder();
      EXPECT_EQ(recorded.errors(), 0);
      EXPECT_EQ(recorded.traced(), recorded.successes());
      const Histogram& e2e = recorded.metric(Metric::kE2e);
      const Histogram& actual = recorded.metric(Metric::kE2eActualSend);
      ASSERT_GE(e2e.count(), 50);
      EXPECT_GT(e2e.min(), 0);
      EXPECT_EQ(recorded.schedule_lag().max(), 0) << "intended and actual send stamped apart";
      EXPECT_EQ(e2e.count(), actual.count());
      EXPECT_EQ(e2e.min(), actual.min());
      EXPECT_EQ(e2e.max(), actual.max());
      EXPECT_EQ(e2e.mean(), actual.mean());
    }
  }
}

// The warm-up ends (StartMeasuring) with a closed loop's 8 requests in flight: they were sent during
// the warm-up and are answered after it, so they are discarded, not measured in the first window;
// everything else that finished after it is measured, and nothing is lost between the two.
TEST(LoadWorkerTest, RequestsSentInTheWarmUpAreNotMeasured) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_warmup", /*seed=*/21);
  ASSERT_TRUE(target.ok()) << target.status();
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(target->server.url, 1)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &target->request, SteadyClock::Get(), nullptr, 1, nullptr};
  WorkerPlan plan;
  plan.mode = LoadMode::kConcurrency;
  plan.in_flight = 8;
  plan.timeout_ms = 10'000;
  LoadWorker worker(0, plan, shared);
  ASSERT_TRUE(worker.Prepare().ok());
  worker.Start(SteadyClock::Get()->NowNs());
  const bool warmed_up = worker.AwaitCompleted(20, kWait);
  const int64_t measure_from_ns = SteadyClock::Get()->NowNs();
  const int64_t before_start = worker.completed();
  worker.StartMeasuring();
  const int64_t at_start = worker.completed();
  const bool measured = worker.AwaitCompleted(at_start + 100, kWait);
  worker.Stop();
  ASSERT_TRUE(warmed_up) << "completed " << at_start;
  ASSERT_TRUE(measured) << "completed " << worker.completed() - at_start << " of 100 after the warm-up";

  const LatencyRecorder recorded = worker.TakeRecorder();
  EXPECT_GE(recorded.measure_from_ns(), measure_from_ns);
  // At most the 8 in flight at the warm-up's end, and (the server answering them) at least one.
  EXPECT_GE(recorded.discarded(), 1);
  EXPECT_LE(recorded.discarded(), 8);
  EXPECT_EQ(worker.discarded(), recorded.discarded());
  EXPECT_EQ(recorded.errors(), 0);
  // Everything that finished after StartMeasuring is in the recorder or discarded, nothing before it.
  const int64_t finished = recorded.successes() + recorded.discarded();
  EXPECT_GE(finished, worker.completed() - at_start);
  EXPECT_LE(finished, worker.completed() - before_start);
  EXPECT_EQ(worker.completed_while_measuring(), finished) << "what finished after the warm-up, counted alike";
  EXPECT_EQ(worker.sent(), worker.completed() + worker.drained());
}

// One worker's open loop at `rate` requests/s, its polls before a send capped at `max_send_poll_ns`.
WorkerPlan RatePlan(double rate, int64_t max_send_poll_ns) {
  WorkerPlan plan;
  plan.mode = LoadMode::kRate;
  plan.total_rate_per_s = rate;
  plan.timeout_ms = 10'000;
  plan.max_send_poll_ns = max_send_poll_ns;
  return plan;
}

// One measured window of an open-loop worker: what it sent, the time its thread polled and
// otherwise spent on the CPU, how late its sends were, and how short of CPU the machine was.
struct LagWindow {
  int64_t sends = 0;
  int64_t wall_ns = 0;
  int64_t poll_ns = 0;
  int64_t busy_ns = 0;
  int64_t delay_ns = 0;   // the worker and its waker waiting for a CPU while runnable (schedstat)
  int64_t stolen_ns = 0;  // the hypervisor holding the machine's CPUs (/proc/stat steal), a CPU
  int64_t waits = 0;      // blocking waits before a send time (LoadWorker::SendWaits)
  int64_t woken = 0;      // of those, the ones the waker's alarm ended
  int64_t past_deadline = 0;  // and the ones the queue's deadline ended (no alarm by the send time)
  LatencyRecorder recorded;

  int64_t LagNs(double percentile) const { return recorded.schedule_lag().ValueAtPercentile(percentile); }
  int64_t PerSendNs(int64_t ns) const { return ns / std::max<int64_t>(sends, 1); }
  // Then a late median says nothing of ours: with four to six busy loops beside the test on the
  // 2-core VM the median send was at times up to 0.8 ms late with nothing wrong but the machine.
  bool ShortOfCpu() const { return chronoserve::testing::ShortOfCpu(delay_ns, stolen_ns, wall_ns); }
  std::string Figures() const {
    return absl::StrCat(sends, " sends in ", wall_ns / 1'000'000, " ms: polls ", PerSendNs(poll_ns) / 1'000,
                        " us/send, other CPU ", PerSendNs(busy_ns) / 1'000, " us/send (",
                        100 * busy_ns / std::max<int64_t>(wall_ns, 1), " % of the wall time), lag p50 ",
                        LagNs(50) / 1'000, " us, p90 ", LagNs(90) / 1'000, " us, p99 ", LagNs(99) / 1'000,
                        " us; worker and waker waited for a CPU ", PerSendNs(delay_ns) / 1'000,
                        " us/send, the hypervisor held each CPU ", PerSendNs(stolen_ns) / 1'000,
                        " us/send; of ", waits, " waits before a send the waker's alarm ended ", woken,
                        ", the deadline ", past_deadline);
  }
};

// Runs `worker` until `completions` more requests complete and reports that window (the recorder
// holds what finished in it: the caller takes the recorder before the first window).
LagWindow MeasureWindow(LoadWorker& worker, int64_t completions) {
  LagWindow w;
  const int64_t wall_start_ns = SteadyClock::Get()->NowNs();
  const int64_t sent_start = worker.sent();
  const int64_t poll_start_ns = worker.PollNs();
  const int64_t busy_start_ns = worker.BusyCpuNs();
  const int64_t delay_start_ns = RunDelayNs("cb-load") + RunDelayNs("cb-wake");
  const int64_t stolen_start_ns = StolenPerCpuNs();
  const int64_t waits_start = worker.SendWaits();
  const int64_t woken_start = worker.SendWaitsWoken();
  const int64_t past_deadline_start = worker.SendWaitsPastDeadline();
  const bool ran = worker.AwaitCompleted(worker.completed() + completions, kWait);
  w.busy_ns = worker.BusyCpuNs() - busy_start_ns;
  w.poll_ns = worker.PollNs() - poll_start_ns;
  w.sends = worker.sent() - sent_start;
  w.wall_ns = SteadyClock::Get()->NowNs() - wall_start_ns;
  w.delay_ns = RunDelayNs("cb-load") + RunDelayNs("cb-wake") - delay_start_ns;
  w.stolen_ns = StolenPerCpuNs() - stolen_start_ns;
  w.waits = worker.SendWaits() - waits_start;
  w.woken = worker.SendWaitsWoken() - woken_start;
  w.past_deadline = worker.SendWaitsPastDeadline() - past_deadline_start;
  w.recorded = worker.TakeRecorder();
  EXPECT_TRUE(ran) << "completed " << worker.completed();
  return w;
}

// The waker's alarm, not the queue's deadline, ends most of the waits before a send time, in every
// window; and the median send of an open loop is on time (under 300 µs late) in one of up to three
// windows where the machine had CPU to give: a worker that waits for gRPC's millisecond-rounded
// deadline instead of its waker's alarm is late in every window (about 0.5 ms at the median), while
// a machine that takes the CPU away now and then (a shared CI VM: once the median send was 588 µs
// late with its threads waiting only 201 µs a send for a CPU) spoils one window, seldom three.
// `check` judges each window's other bounds; every window is printed.
template <typename Check>
void ExpectOnTimeInOneOfThreeWindows(LoadWorker& worker, int64_t completions, Check check) {
  std::vector<std::string> late;
  int judged = 0;
  for (int window = 1; window <= 3; ++window) {
    const LagWindow w = MeasureWindow(worker, completions);
    std::cout << "[ figures  ] window " << window << ": " << w.Figures() << "\n";
    ASSERT_GE(w.recorded.schedule_lag().count(), completions) << w.Figures();
    EXPECT_EQ(w.recorded.errors(), 0) << w.Figures();
    // What the lag below judges, seen whatever the machine: a waker whose alarm never comes leaves
    // the waits to the queue's deadline (19-37 % of them, the rest ended by responses, on the
    // 2-core VM with 30-90 % steal), while a working one ended 5-10 times as many as the deadline
    // did (2-10 %).
    EXPECT_GE(w.woken, 2 * w.past_deadline)
        << "the queue's deadline, not the waker's alarm, ended the waits: " << w.Figures();
    check(w);
    if (w.ShortOfCpu()) {
      std::cout << "[ note     ] the machine was short of CPU: the lag is not judged\n";
      continue;
    }
    ++judged;
    if (w.LagNs(50) < 300'000) return;
    late.push_back(w.Figures());
  }
  if (judged > 0) {
    ADD_FAILURE() << "sends late to the millisecond in every window the machine had CPU in:\n  "
                  << absl::StrJoin(late, "\n  ");
  } else {
    std::cout << "[ note     ] short of CPU in every window: the lag was never judged\n";
  }
}

// Open loop at 1000 requests/s, a period shorter than the old 1.1 ms poll window (with which the
// worker thread was on the CPU all the time): the worker waits on its queue until its SendWaker
// wakes it and polls only what is left of the lead, so over each measured window its polls take
// at most WakeLead::kMaxNs per send (the design's bound, whatever the lead learnt on a loaded
// machine; the old window took about 1 ms per send), the rest of its CPU time is a fraction of the
// wall time, and sends are on time (a median lag well under the ~0.5 ms that a timed wait rounded
// up to the millisecond would give). Run alone (ALONE in tests/client/CMakeLists.txt).
TEST(LoadWorkerTest, OpenLoopSendsOnTimeWithoutSpinning) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_nospin", /*seed=*/9);
  ASSERT_TRUE(target.ok()) << target.status();
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(target->server.url, 1)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &target->request, SteadyClock::Get(), nullptr, 1, nullptr};
  LoadWorker worker(0, RatePlan(1000, WakeLead::kMaxNs), shared);
  ASSERT_TRUE(worker.Prepare().ok());
  worker.Start(SteadyClock::Get()->NowNs());
  ASSERT_TRUE(worker.AwaitCompleted(200, kWait)) << "the load never ran: " << worker.completed();
  worker.TakeRecorder();  // the warm-up, while the waker learns its lead
  ExpectOnTimeInOneOfThreeWindows(worker, 1500, [](const LagWindow& w) {
    ASSERT_GT(w.sends, 1000) << "1500 completed, less what was in flight at the start";
    EXPECT_GT(w.poll_ns, 0) << "no send time was polled for";
    EXPECT_LE(w.poll_ns, w.sends * WakeLead::kMaxNs * 12 / 10) << "polls longer than the lead allows: "
                                                               << w.Figures();
    // About 100-150 µs a send on a 2-core VM; a loop that spins outside its polls takes all of it.
    EXPECT_LT(w.busy_ns, w.wall_ns / 2) << "the worker thread was busy, not waiting: " << w.Figures();
  });
  worker.Stop();
}

// --max-send-poll-us 0: the worker's wait ends with its waker's alarm and it sends at once, with no
// polling before send times, and the sends are still near their times: the alarm's lateness (tens
// of µs), not gRPC's millisecond-rounded deadline (about 0.5 ms late at the median). Run alone
// (ALONE in tests/client/CMakeLists.txt).
TEST(LoadWorkerTest, OpenLoopWithoutPollingKeepsItsRate) {
  absl::StatusOr<MlpTarget> target = StartMlpTarget("chronobench_nopoll", /*seed=*/10);
  ASSERT_TRUE(target.ok()) << target.status();
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(target->server.url, 1)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &target->request, SteadyClock::Get(), nullptr, 1, nullptr};
  LoadWorker worker(0, RatePlan(500, /*max_send_poll_ns=*/0), shared);
  ASSERT_TRUE(worker.Prepare().ok());
  worker.Start(SteadyClock::Get()->NowNs());
  ExpectOnTimeInOneOfThreeWindows(worker, 500, [](const LagWindow& w) {
    // A send due at once still looks at the queue one time (a zero-deadline AsyncNext, a few µs);
    // with the default lead the polls take 15-100 µs a send on the 2-core VM.
    EXPECT_LT(w.poll_ns, w.sends * 10'000) << w.PerSendNs(w.poll_ns) << " ns polled per send";
  });
  worker.Stop();
}

}  // namespace
}  // namespace chronoserve::client::bench
