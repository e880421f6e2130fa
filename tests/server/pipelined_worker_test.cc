// The pipelined worker (an instance with pipeline_depth() 2, as a GPU instance has): with a fake
// instance that logs every Launch and Finish, the worker launches the next due batch before it
// finishes the one in flight, alternates the two slots, never waits for requests while a batch is
// in flight, answers a failed launch alone, finishes what is in flight before it exits, and
// finishes a batch already done on the device before it takes the next. Also
// the pipeline_depth parameter and the queue's non-blocking TryNextBatch. No sleeps: the fake parks
// a launch on a notification, and every wait has a timeout that fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/backend/batch_pipeline.h"
#include "server/scheduler/model_runtime.h"
#include "server/scheduler/worker.h"
#include "tests/fakes/finishes_within.h"

namespace chronoserve::server {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);

// Joins every worker of `runtime` (testing::FinishesWithin: past kTimeout the test fails and aborts).
void JoinWorkersWithin(ModelRuntime& runtime) {
  testing::FinishesWithin("the workers' exit after the queue's Close()", kTimeout, [&] {
    for (const auto& w : runtime.workers()) w->Join();
  });
}

ModelSpec Spec(std::map<std::string, std::string> parameters = {}, int max_batch_size = 1) {
  ModelSpec spec;
  spec.parameters = std::move(parameters);
  spec.name = "piped";
  spec.max_batch_size = max_batch_size;  // 1 by default, one request per batch: the log reads request by request
  spec.dynamic_batching.enabled = max_batch_size > 1;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {2}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  return spec;
}

// Logs "L:<id>@<slot>" and "F:<id>@<slot>" for client requests; Finish writes OUTPUT__0 = 2 x INPUT__0.
// A launch of request `park_id` parks until Release(); a launch of "bad" fails.
class LoggingPipelinedInstance final : public ModelInstance {
 public:
  int pipeline_depth() const override { return 2; }
  int gpu() const override { return -1; }
  absl::Status KeepWarm() override { return absl::OkStatus(); }
  std::string device_name() const override { return "fake"; }

  absl::Status Execute(Batch& batch, BatchTiming* timing) override {
    if (absl::Status s = Launch(batch, timing, 0); !s.ok()) return s;
    return Finish(batch, timing, 0);
  }
  absl::Status Launch(Batch& batch, BatchTiming* timing, int slot) override {
    const std::string id = batch.front()->id;
    {
      absl::MutexLock lock(&mu_);
      if (slot < 0 || slot > 1 || busy_[slot]) {
        misuse_ = absl::StrCat("launch into busy slot ", slot, " for ", id);
        return absl::InternalError(misuse_);
      }
      if (!batch.front()->synthetic) log_.push_back(absl::StrCat("L:", id, "@", slot));
      if (batch.front()->synthetic && busy_[1 - slot]) ++warmups_behind_another_[slot];
    }
    if (!park_id_.empty() && id == park_id_ && !batch.front()->synthetic) {
      parked_.Notify();
      release_.WaitForNotificationWithTimeout(kTimeout);
    }
    if (id == "bad") return absl::InternalError("model 'piped': launch of 'bad' failed");
    absl::MutexLock lock(&mu_);
    busy_[slot] = true;
    in_slot_[slot] = id;
    timing->batch_size = static_cast<int64_t>(batch.size());
    // With a clock: the gather takes gather_ns, the enqueue after it enqueue_ns (client batches).
    const bool timed = clock_ != nullptr && !batch.front()->synthetic;
    if (timed) clock_->AdvanceNs(gather_ns_);
    timing->staged_ns = timed ? clock_->NowNs() : timing->dequeued_ns;
    if (timed) clock_->AdvanceNs(enqueue_ns_);
    return absl::OkStatus();
  }
  // Done on the "device" when its first request's id was named by ReadAsDone.
  bool LaunchedDone(int slot) override {
    absl::MutexLock lock(&mu_);
    if (slot < 0 || slot > 1 || !busy_[slot]) return false;
    const bool done = done_ids_.count(in_slot_[slot]) > 0;
    if (done) log_.push_back(absl::StrCat("D:", in_slot_[slot], "@", slot));
    return done;
  }
  absl::Status Finish(Batch& batch, BatchTiming* timing, int slot) override {
    {
      absl::MutexLock lock(&mu_);
      if (!busy_[slot]) {
        misuse_ = absl::StrCat("finish of idle slot ", slot);
        return absl::InternalError(misuse_);
      }
      busy_[slot] = false;
      if (!batch.front()->synthetic) log_.push_back(absl::StrCat("F:", batch.front()->id, "@", slot));
    }
    timing->gpu_done_ns = timing->dequeued_ns;
    for (auto& r : batch) {
      const InputTensor& in = r->inputs.front();
      std::string bytes(in.byte_size, '\0');
      for (size_t i = 0; i < in.byte_size / sizeof(float); ++i) {
        float x;
        std::memcpy(&x, in.data + i * sizeof(float), sizeof(float));
        x *= 2;
        std::memcpy(bytes.data() + i * sizeof(float), &x, sizeof(float));
      }
      r->outputs.front().shape = in.shape;
      *r->outputs.front().data = bytes;
      r->timeline.output_done_ns = timing->dequeued_ns;
    }
    // Fails after its outputs were scattered and stamped (as a throw part-way through a scatter).
    if (batch.front()->id == "late_failure") return absl::InternalError("model 'piped': 'late_failure' failed");
    return absl::OkStatus();
  }

  void ParkLaunchOf(std::string id) { park_id_ = std::move(id); }
  // A launched batch whose first request is `id` reads as done when the worker asks (logged "D:").
  void ReadAsDone(std::string id) {
    absl::MutexLock lock(&mu_);
    done_ids_.insert(std::move(id));
  }
  // Every client launch from now on moves `clock` by `gather_ns`, stamps staged_ns, then moves it by
  // `enqueue_ns`. Set before the worker serves.
  void TakeTimeOn(FakeClock* clock, int64_t gather_ns, int64_t enqueue_ns) {
    clock_ = clock;
    gather_ns_ = gather_ns;
    enqueue_ns_ = enqueue_ns;
  }
  bool WaitParked() { return parked_.WaitForNotificationWithTimeout(kTimeout); }
  void Release() { release_.Notify(); }
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  std::string misuse() {
    absl::MutexLock lock(&mu_);
    return misuse_;
  }
  // Warm-up batches launched into `slot` while the other slot was busy.
  int warmups_behind_another(int slot) {
    absl::MutexLock lock(&mu_);
    return warmups_behind_another_[slot];
  }

 private:
  std::string park_id_;  // set before the worker starts serving
  FakeClock* clock_ = nullptr;
  int64_t gather_ns_ = 0;
  int64_t enqueue_ns_ = 0;
  absl::Notification parked_;
  absl::Notification release_;
  absl::Mutex mu_;
  bool busy_[2] ABSL_GUARDED_BY(mu_) = {false, false};
  std::string in_slot_[2] ABSL_GUARDED_BY(mu_);
  std::set<std::string> done_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  std::string misuse_ ABSL_GUARDED_BY(mu_);
  int warmups_behind_another_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
};

// One client request and what it was answered with.
struct Call {
  std::unique_ptr<InferRequest> request;
  float input[2];
  std::string output;
  absl::Notification done;
  absl::Status status;
  std::string answered;
  bool cold = false;  // timing.cold of the batch it ran in
  bool batch_completed = false;  // its timeline's batch_completed() when answered
  int64_t queued_ns = -1;  // dequeued - enqueued: its queue span
  int64_t input_stage_ns = -1;  // its input_stage span, as its response carries it
  int64_t advance_on_answer_ns = 0;  // its answer moves the test's clock this far (a slow answer)
};

class PipelinedWorkerTest : public ::testing::Test {
 protected:
  void Start(const std::string& park_id = "", int64_t gather_ns = 0, int64_t enqueue_ns = 0,
             std::map<std::string, std::string> parameters = {}, int max_batch_size = 1) {
    auto fake = std::make_unique<LoggingPipelinedInstance>();
    fake_ = fake.get();
    fake_->ParkLaunchOf(park_id);
    if (gather_ns > 0 || enqueue_ns > 0) fake_->TakeTimeOn(&clock_, gather_ns, enqueue_ns);
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::move(fake));
    auto runtime = ModelRuntime::Create(Spec(std::move(parameters), max_batch_size), std::move(instances),
                                        WarmupOptions{}, &clock_);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
  }

  // Queues request `id` with inputs (seed, -seed / 3).
  Call* Send(const std::string& id, float seed, int64_t deadline_ns = 0) {
    calls_.push_back(std::make_unique<Call>());
    Call* call = calls_.back().get();
    call->input[0] = seed;
    call->input[1] = -seed / 3;
    auto r = std::make_unique<InferRequest>();
    r->id = id;
    r->batch_items = 1;
    r->set_shape_key("[2];");
    r->cancelled = std::make_shared<CancelFlag>();
    r->deadline_ns = deadline_ns;
    InputTensor in;
    in.index = 0;
    in.dtype = DataType::kFp32;
    in.shape = {1, 2};
    in.data = reinterpret_cast<const char*>(call->input);
    in.byte_size = sizeof(call->input);
    r->inputs.push_back(std::move(in));
    OutputTensor out;
    out.index = 0;
    out.data = &call->output;
    r->outputs.push_back(out);
    r->on_complete = [this, call](std::unique_ptr<InferRequest> finished) {
      if (call->advance_on_answer_ns > 0) clock_.AdvanceNs(call->advance_on_answer_ns);
      call->queued_ns = finished->timeline.batch().dequeued_ns - finished->timeline.enqueued_ns;
      call->input_stage_ns = finished->timeline.Finalize(clock_.NowNs()).input_stage_ns;
      call->status = finished->status;
      call->answered = *finished->outputs.front().data;
      call->cold = finished->timeline.batch().cold;
      call->batch_completed = finished->timeline.batch_completed();
      call->done.Notify();
    };
    EXPECT_TRUE(runtime_->queue().Enqueue(r).ok());
    return call;
  }

  // Waits for `call`'s answer and checks it is OK with 2 x its own inputs.
  void ExpectDoubled(Call* call) {
    ASSERT_TRUE(call->done.WaitForNotificationWithTimeout(kTimeout)) << "no answer";
    ASSERT_TRUE(call->status.ok()) << call->status;
    ASSERT_EQ(call->answered.size(), sizeof(call->input));
    float got[2];
    std::memcpy(got, call->answered.data(), sizeof(got));
    EXPECT_EQ(got[0], 2 * call->input[0]);
    EXPECT_EQ(got[1], 2 * call->input[1]);
  }

  FakeClock clock_;
  LoggingPipelinedInstance* fake_ = nullptr;
  std::unique_ptr<ModelRuntime> runtime_;
  std::vector<std::unique_ptr<Call>> calls_;
};

TEST_F(PipelinedWorkerTest, ALoneBatchIsFinishedWithoutWaitingForAnother) {
  Start();
  Call* a = Send("a", 1.5f);
  ExpectDoubled(a);
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "F:a@0"));
}

TEST_F(PipelinedWorkerTest, WarmUpLaunchesASecondBatchBehindTheFirstBeforeServing) {
  Start();
  EXPECT_EQ(fake_->warmups_behind_another(1), 1) << "slot 1 and the copy stream are warmed before READY";
  EXPECT_EQ(fake_->warmups_behind_another(0), 0);
  EXPECT_EQ(fake_->misuse(), "");
  EXPECT_EQ(runtime_->stats().Snapshot().execution_count, 0u) << "warm-up runs are not executions";
  EXPECT_EQ(runtime_->workers().front()->batches(), 0) << "nor the worker's batches";
}

TEST_F(PipelinedWorkerTest, LaunchesTheNextBatchBeforeFinishingTheOneInFlight) {
  Start(/*park_id=*/"a");
  Call* a = Send("a", 0.75f);
  ASSERT_TRUE(fake_->WaitParked());  // the worker is inside Launch(a): b and c queue behind it
  Call* b = Send("b", -2.25f);
  Call* c = Send("c", 3.5f);
  fake_->Release();
  ExpectDoubled(a);
  ExpectDoubled(b);
  ExpectDoubled(c);
  // b goes into the other slot before a is finished; c reuses a's slot only after a's Finish.
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "L:b@1", "F:a@0", "L:c@0", "F:b@1", "F:c@0"));
  EXPECT_EQ(fake_->misuse(), "");
  EXPECT_EQ(runtime_->stats().Snapshot().execution_count, 3u);
}

// A batch in flight whose device work is already done (LaunchedDone) is finished before the next
// batch is taken: its answer does not wait for the next launch, and the next batch goes into the
// free slot on an idle stream. A batch not yet done is still pipelined behind.
TEST_F(PipelinedWorkerTest, ABatchAlreadyDoneIsFinishedBeforeTheNextIsLaunched) {
  Start(/*park_id=*/"a");
  fake_->ReadAsDone("a");
  fake_->ReadAsDone("c");
  Call* a = Send("a", 0.75f);
  ASSERT_TRUE(fake_->WaitParked());  // b, c and d queue while a is launched
  Call* b = Send("b", -2.25f);
  Call* c = Send("c", 3.5f);
  Call* d = Send("d", -1.0f);
  fake_->Release();
  ExpectDoubled(a);
  ExpectDoubled(b);
  ExpectDoubled(c);
  ExpectDoubled(d);
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);
  // a done: finished before b is launched. b not done: c goes behind it into slot 1. c done when
  // asked next (b is finished after c's launch, as before): finished before d.
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "D:a@0", "F:a@0", "L:b@0", "L:c@1", "F:b@0", "D:c@1", "F:c@1",
                                        "L:d@0", "F:d@0"));
  EXPECT_EQ(fake_->misuse(), "");
  EXPECT_EQ(runtime_->stats().Snapshot().execution_count, 4u);
}

// A request whose deadline passed while queued comes out of the queue with the next batch; the
// worker answers it before staging that batch. However long that answer takes, it is neither the
// batch's queueing (its queue span ends when the worker had it) nor its input staging (which
// begins once the answer is done).
TEST_F(PipelinedWorkerTest, AnsweringARequestDroppedWithABatchIsNotInThatBatchsQueueOrInputStageSpan) {
  Start(/*park_id=*/"a", /*gather_ns=*/3'000);
  Call* a = Send("a", 1.25f);
  ASSERT_TRUE(fake_->WaitParked());
  Call* late = Send("late", 2.5f, /*deadline_ns=*/clock_.NowNs() + 1'000);
  late->advance_on_answer_ns = 5'000'000;  // a 5 ms answer
  Call* b = Send("b", -0.5f);
  clock_.AdvanceNs(2'000);  // late's deadline has passed; b has queued 2 us
  fake_->Release();
  ExpectDoubled(a);
  ExpectDoubled(b);
  ASSERT_TRUE(late->done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(late->status.code(), absl::StatusCode::kDeadlineExceeded) << late->status;
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "L:b@1", "F:a@0", "F:b@1")) << "late never reached the device";
  EXPECT_GE(b->queued_ns, 2'000);
  EXPECT_LT(b->queued_ns, 5'000'000) << "the dropped request's answer landed in b's queue span";
  EXPECT_EQ(b->input_stage_ns, 3'000) << "b's gather alone, not the dropped request's answer before it";
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);
  EXPECT_EQ(runtime_->workers().front()->batches(), 2) << "a and b; late was answered in no batch";
}

TEST_F(PipelinedWorkerTest, AFailedLaunchIsAnsweredAloneAndTheBatchInFlightStillFinishes) {
  Start(/*park_id=*/"a");
  Call* a = Send("a", 4.0f);
  ASSERT_TRUE(fake_->WaitParked());
  Call* bad = Send("bad", 1.0f);
  Call* c = Send("c", -0.5f);
  fake_->Release();
  ExpectDoubled(a);
  ASSERT_TRUE(bad->done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(bad->status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(bad->status.message(), HasSubstr("launch of 'bad' failed"));
  ExpectDoubled(c);
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "L:bad@1", "L:c@1", "F:a@0", "F:c@1"));
  EXPECT_EQ(fake_->misuse(), "");
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);
  EXPECT_EQ(runtime_->workers().front()->batches(), 3) << "a, the failed launch and c: every batch it ended";
}

// Every request of a failed batch of several gets the batch's error, saying that the whole batch
// failed and how big it was (the cause may be another request's values); a batch of one does not.
TEST_F(PipelinedWorkerTest, EveryRequestOfAFailedBatchIsToldTheWholeBatchFailed) {
  Start(/*park_id=*/"a", 0, 0, {}, /*max_batch_size=*/2);
  Call* a = Send("a", 4.0f);
  ASSERT_TRUE(fake_->WaitParked());
  Call* bad = Send("bad", 1.0f);  // queued behind the parked launch: taken together, "bad" first
  Call* mate = Send("mate", -0.5f);
  fake_->Release();
  ExpectDoubled(a);
  for (Call* call : {bad, mate}) {
    ASSERT_TRUE(call->done.WaitForNotificationWithTimeout(kTimeout));
    EXPECT_EQ(call->status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(call->status.message(), "model 'piped': launch of 'bad' failed (the whole batch failed: 2 requests, 2 items)");
  }
  Call* alone = Send("bad", 2.0f);
  ASSERT_TRUE(alone->done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(alone->status.message(), "model 'piped': launch of 'bad' failed") << "a batch of one: nothing to add";
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);
}

// A batch that fails after its device work was seen done and outputs scattered is not a completed
// batch: the metrics and traces (batch_completed()) count no device spans of it.
TEST_F(PipelinedWorkerTest, ABatchThatFailsAfterItsScatterIsNotCompleted) {
  Start();
  Call* a = Send("a", 1.5f);
  ExpectDoubled(a);
  EXPECT_TRUE(a->batch_completed);
  Call* late = Send("late_failure", 2.5f);
  ASSERT_TRUE(late->done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(late->status.code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(late->batch_completed) << "a failed batch's spans were counted as a completed batch's";
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);
}

TEST_F(PipelinedWorkerTest, StopFinishesTheBatchInFlightFirst) {
  Start(/*park_id=*/"a");
  Call* a = Send("a", 2.0f);
  ASSERT_TRUE(fake_->WaitParked());
  Call* b = Send("b", 5.0f);
  runtime_->queue().Close();  // shutdown: what was accepted is still served
  fake_->Release();
  ExpectDoubled(a);
  ExpectDoubled(b);
  JoinWorkersWithin(*runtime_);
  EXPECT_THAT(fake_->log(), ElementsAre("L:a@0", "L:b@1", "F:a@0", "F:b@1"));
}

// With keep-warm, the first batch after the horizon lapsed is cold; one launched behind it is not,
// although the worker's idle spell only ends when the first one finishes.
TEST_F(PipelinedWorkerTest, OnlyTheFirstBatchAfterAKeepWarmLapseIsCold) {
  Start(/*park_id=*/"a", 0, 0, {{"keep_warm_ms", "10"}, {"keep_warm_horizon_ms", "35"}});
  Call* first = Send("first", 0.5f);
  ExpectDoubled(first);
  EXPECT_TRUE(first->cold) << "the first batch after load";
  clock_.AdvanceNs(100'000'000);  // 100 ms idle: past the 35 ms horizon in one step
  Call* a = Send("a", 1.5f);
  ASSERT_TRUE(fake_->WaitParked());
  Call* b = Send("b", -2.0f);
  fake_->Release();
  ExpectDoubled(a);
  ExpectDoubled(b);
  EXPECT_THAT(fake_->log(), ElementsAre("L:first@0", "F:first@0", "L:a@0", "L:b@1", "F:a@0", "F:b@1"));
  EXPECT_TRUE(a->cold) << "first batch after the keep-warm lapse";
  EXPECT_FALSE(b->cold) << "launched behind a batch on the device: no idle spell before it";
}

// A launch that fails with nothing else in flight ends the idle spell as a batch run would: the
// batch right after it is not cold (it was, keep-warm's horizon measured from the idle spell before
// the failed launch, and keep-warm then lapsed at once in the next idle spell).
TEST_F(PipelinedWorkerTest, AFailedLaunchAloneEndsTheIdleSpell) {
  Start("", 0, 0, {{"keep_warm_ms", "10"}, {"keep_warm_horizon_ms", "35"}});
  Call* first = Send("first", 0.5f);
  ExpectDoubled(first);
  clock_.AdvanceNs(100'000'000);  // 100 ms idle: past the 35 ms horizon in one step
  Call* bad = Send("bad", 1.0f);
  ASSERT_TRUE(bad->done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(bad->status.code(), absl::StatusCode::kInternal) << bad->status;
  EXPECT_TRUE(bad->cold) << "the first batch after the keep-warm lapse";
  Call* next = Send("next", -1.5f);  // at once: no idle time since the failed launch
  ExpectDoubled(next);
  EXPECT_FALSE(next->cold) << "the failed launch did not end the idle spell";
  EXPECT_THAT(fake_->log(), ElementsAre("L:first@0", "F:first@0", "L:bad@0", "L:next@0", "F:next@0"));
}

// The worker's launch time is split at the instance's staged_ns: the gather before it, the enqueue
// after it (chronoserve_worker_seconds_total's "gather" and "launch").
TEST_F(PipelinedWorkerTest, LaunchTimeIsSplitIntoGatherAndEnqueue) {
  constexpr int64_t kGatherNs = 3'000, kEnqueueNs = 5'000;
  Start(/*park_id=*/"", kGatherNs, kEnqueueNs);
  const Worker& worker = *runtime_->workers().front();
  const int64_t gather_before = worker.phase_ns(WorkerPhase::kGather);
  const int64_t launch_before = worker.phase_ns(WorkerPhase::kLaunch);
  Call* a = Send("a", 1.25f);
  ExpectDoubled(a);
  Call* b = Send("b", -0.5f);
  ExpectDoubled(b);
  runtime_->queue().Close();
  JoinWorkersWithin(*runtime_);  // the phases are final once joined
  EXPECT_EQ(worker.phase_ns(WorkerPhase::kGather) - gather_before, 2 * kGatherNs);
  EXPECT_EQ(worker.phase_ns(WorkerPhase::kLaunch) - launch_before, 2 * kEnqueueNs);
  EXPECT_STREQ(WorkerPhaseName(WorkerPhase::kGather), "gather");
}

// An idle worker adds its wait to phase_ns as it goes (at least every kWaitAccountingSliceNs), not
// only when its next batch comes: a scrape between two requests sees the wait grow.
TEST_F(PipelinedWorkerTest, AnIdleWorkersWaitIsCountedBeforeItsNextBatch) {
  Start();
  Call* a = Send("a", 0.75f);
  ExpectDoubled(a);
  const Worker& worker = *runtime_->workers().front();
  const int64_t waited_before = worker.phase_ns(WorkerPhase::kWait);
  const auto waited = [&] { return worker.phase_ns(WorkerPhase::kWait) - waited_before; };
  constexpr int64_t kSliceNs = Worker::kWaitAccountingSliceNs;
  // A slice of the fake clock at a time (the worker may not be waiting yet when it moves first),
  // each followed by a Poke so the waiting worker re-reads the clock at once.
  const absl::Time give_up = absl::Now() + kTimeout;
  while (waited() < kSliceNs && absl::Now() < give_up) {
    clock_.AdvanceNs(kSliceNs);
    runtime_->queue().Poke();
    const absl::Time look_until = std::min(give_up, absl::Now() + absl::Milliseconds(50));
    while (waited() < kSliceNs && absl::Now() < look_until) std::this_thread::yield();
  }
  EXPECT_GE(waited(), kSliceNs) << "no request came: the wait still counts";
  EXPECT_EQ(worker.batches(), 1);
  Call* b = Send("b", -1.5f);
  ExpectDoubled(b);
}

TEST(ModelQueueTryNextBatchTest, NeverWaitsNotEvenForAFullerBatch) {
  FakeClock clock;
  BatchPolicyConfig policy;
  policy.max_batch_size = 4;
  policy.dynamic = true;
  policy.max_queue_delay_ns = 1'000'000;  // a lone request waits 1 ms for company
  ModelQueue queue("model 'm'", policy, {}, &clock);
  Batch batch, dropped;
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout) << "empty";
  std::string out;
  auto r = std::make_unique<InferRequest>();
  r->set_shape_key("[2];");
  r->cancelled = std::make_shared<CancelFlag>();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout)
      << "the request is still inside its queue delay";
  EXPECT_TRUE(batch.empty());
  clock.AdvanceNs(1'000'000);
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kBatch);
  EXPECT_EQ(batch.size(), 1u);
  queue.Close();
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kClosed);
}

TEST(PipelineDepthConfigTest, TwoByDefaultOneOrTwoAcceptedOthersNamed) {
  ModelSpec spec = Spec();
  auto absent = PipelineDepthFromSpec(spec);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(*absent, 2);
  spec.parameters[kPipelineDepthKey] = " 1 ";
  EXPECT_EQ(*PipelineDepthFromSpec(spec), 1);
  spec.parameters[kPipelineDepthKey] = "2";
  EXPECT_EQ(*PipelineDepthFromSpec(spec), 2);
  for (const char* bad : {"3", "0", "two", ""}) {
    spec.parameters[kPipelineDepthKey] = bad;
    auto depth = PipelineDepthFromSpec(spec);
    ASSERT_FALSE(depth.ok()) << bad;
    EXPECT_EQ(depth.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(depth.status().message(), HasSubstr("model 'piped'"));
    EXPECT_THAT(depth.status().message(), HasSubstr("pipeline_depth"));
  }
}

}  // namespace
}  // namespace chronoserve::server
