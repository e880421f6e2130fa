#include "server/core/timeline.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "server/backend/device_activity.h"
#include "server/core/model_stats.h"

namespace chronoserve::server {
namespace {

TEST(TimelineTest, SpansFromStampsAndBatch) {
  Timeline t;
  t.received_ns = 1'000;
  t.enqueued_ns = 1'500;
  BatchTiming b;
  b.dequeued_ns = 4'500;
  b.staged_ns = 5'000;
  b.h2d_ns = 300;
  b.compute_ns = 2'000;
  b.launch_ns = 400;
  b.d2h_ns = 200;
  b.gpu_done_ns = 8'000;
  b.batch_size = 4;
  b.worker = 1;
  b.cold = true;
  t.SetBatch(b);
  t.output_done_ns = 8'600;
  const RequestTiming& r = t.Finalize(9'000);
  EXPECT_EQ(r.server_total_ns, 8'000);
  EXPECT_EQ(r.queue_ns, 3'000);
  EXPECT_EQ(r.input_stage_ns, 500);
  EXPECT_EQ(r.output_stage_ns, 600);
  EXPECT_EQ(r.compute_ns, 2'000);
  EXPECT_EQ(r.batch_size, 4);
  EXPECT_TRUE(r.cold);
  EXPECT_TRUE(r.IsConsistent());
  EXPECT_EQ(r.remainder_ns(), 8'000 - (3'000 + 500 + 300 + 2'000 + 200 + 600));
  EXPECT_EQ(r.admit_ns, 500);
  EXPECT_EQ(r.handback_ns, 400);
  // Staged -> observed done (3'000) less h2d + compute + d2h (2'500): the rest of the remainder.
  EXPECT_EQ(r.device_gap_ns(), 500);
  // Finalize happens once.
  EXPECT_EQ(t.Finalize(50'000).server_total_ns, 8'000);
}

TEST(TimelineTest, NeverExecutedRequestHasOnlyAdmitAndTotal) {
  Timeline t;
  t.received_ns = 1'000;
  t.enqueued_ns = 1'200;
  const RequestTiming& r = t.Finalize(3'000);
  EXPECT_EQ(r.server_total_ns, 2'000);
  EXPECT_EQ(r.admit_ns, 200);
  EXPECT_EQ(r.queue_ns, 0);
  EXPECT_EQ(r.output_stage_ns, 0);
  EXPECT_EQ(r.handback_ns, 0) << "no outputs were built";
  EXPECT_TRUE(r.IsConsistent());
}

TEST(DeviceActivityTest, IdleGapOnlyWhenNothingRuns) {
  DeviceActivity device(/*now_ns=*/0);
  EXPECT_EQ(device.BeginWork(5'000'000), 5'000) << "idle since creation";
  EXPECT_EQ(device.BeginWork(5'100'000), 0) << "another worker is busy";
  device.EndWork(6'000'000);
  EXPECT_EQ(device.BeginWork(6'500'000), 0) << "still one busy";
  device.EndWork(7'000'000);
  device.EndWork(7'000'000);
  EXPECT_EQ(device.BeginWork(9'000'000), 2'000);
}

TEST(ModelStatsTest, AccumulatesTritonShape) {
  ModelStats stats;
  RequestTiming t;
  t.queue_ns = 10;
  t.input_stage_ns = 1;
  t.h2d_ns = 2;
  t.compute_ns = 30;
  t.d2h_ns = 3;
  t.output_stage_ns = 4;
  t.server_total_ns = 100;
  stats.RecordSuccess(t, 4, /*request_timing=*/true);
  stats.RecordSuccess(t, 2, /*request_timing=*/true);
  stats.RecordExecution(6, 3, 30, 7);
  stats.RecordFailure(50, ModelStats::Failure::kCancelled);
  const ModelStatsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.inference_count, 6u);
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.success.count, 2u);
  EXPECT_EQ(s.success.ns, 200u);
  EXPECT_EQ(s.compute_input.ns, 6u);
  EXPECT_EQ(s.compute_output.ns, 14u);
  EXPECT_EQ(s.fail.count, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.by_batch_size.at(6).compute_infer.ns, 30u);
  EXPECT_GT(s.last_inference_ms, 0u);
}

TEST(ModelStatsTest, WithoutRequestTimingOnlyHostFiguresAndCountsAreKept) {
  ModelStats stats;
  RequestTiming t;
  t.queue_ns = 10;
  t.input_stage_ns = 1;
  t.output_stage_ns = 4;
  t.server_total_ns = 100;
  stats.RecordSuccess(t, 3, /*request_timing=*/false);
  stats.RecordUntimedExecution();
  const ModelStatsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.inference_count, 3u);
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.success.count, 1u);
  EXPECT_EQ(s.success.ns, 100u);
  EXPECT_EQ(s.queue.count, 1u);
  EXPECT_EQ(s.queue.ns, 10u);
  EXPECT_EQ(s.compute_input.count, 0u) << "needs h2d: not recorded rather than partial";
  EXPECT_EQ(s.compute_infer.count, 0u);
  EXPECT_EQ(s.compute_output.count, 0u);
  EXPECT_TRUE(s.by_batch_size.empty());
}

TEST(ModelStatsTest, ThreadsRecordingAtOnceLoseNothing) {
  ModelStats stats;
  constexpr int kThreads = 8;
  constexpr int kEach = 5000;
  std::vector<std::thread> threads;
  for (int n = 0; n < kThreads; ++n) {
    threads.emplace_back([&stats, n] {
      RequestTiming t;
      t.queue_ns = 7 + n;
      t.input_stage_ns = 1;
      t.h2d_ns = 2;
      t.compute_ns = 30;
      t.d2h_ns = 3;
      t.output_stage_ns = 4;
      t.server_total_ns = 100 + n;
      for (int i = 0; i < kEach; ++i) {
        stats.RecordSuccess(t, 1 + i % 3, /*request_timing=*/i % 4 != 0);
        if (i % 10 == 0) stats.RecordFailure(9, ModelStats::Failure::kDeadline);
        if (i % 5 == 0) stats.RecordExecution(2, 1, 2, 3);
      }
    });
  }
  for (auto& t : threads) t.join();
  const ModelStatsSnapshot s = stats.Snapshot();
  const uint64_t requests = kThreads * kEach;
  const uint64_t timed = kThreads * (kEach - kEach / 4);
  uint64_t items = 0;
  for (int i = 0; i < kEach; ++i) items += 1 + i % 3;
  EXPECT_EQ(s.success.count, requests);
  EXPECT_EQ(s.success.ns, kEach * (100u * kThreads + kThreads * (kThreads - 1) / 2));
  EXPECT_EQ(s.queue.ns, kEach * (7u * kThreads + kThreads * (kThreads - 1) / 2));
  EXPECT_EQ(s.inference_count, items * kThreads);
  EXPECT_EQ(s.compute_infer.count, timed);
  EXPECT_EQ(s.compute_infer.ns, timed * 30);
  EXPECT_EQ(s.compute_output.ns, timed * 7);
  EXPECT_EQ(s.deadline_exceeded, kThreads * (kEach / 10u));
  EXPECT_EQ(s.execution_count, kThreads * (kEach / 5u));
  EXPECT_EQ(s.by_batch_size.at(2).compute_output.ns, 3u * kThreads * (kEach / 5u));
}

}  // namespace
}  // namespace chronoserve::server
