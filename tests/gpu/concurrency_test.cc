// Two workers of one model on one GPU run concurrently: each has its own CUDA stream, and the
// event-timed compute spans of their batches, placed on the host clock as tracing places them
// (the end of d2h anchored at gpu_done_ns, d2h and compute laid backwards), overlap in time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/tensor_data.h"
#include "server/backend/device_activity.h"
#include "server/backend/torch_backend.h"
#include "server/core/infer_request.h"
#include "server/repository/model_config_loader.h"
#include "server/scheduler/model_runtime.h"
#include "tests/fakes/recording_instance.h"
#include "tests/gpu/load_on_gpu.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

constexpr int kMaxBatch = 128;
constexpr int kWorkers = 2;
constexpr int kClientThreads = 8;        // each keeps one request in flight
constexpr int kRequestsPerThread = 25;   // 200 requests of 128 rows: both workers stay busy
constexpr int64_t kRowFloats = 4 * 20 * 20;
constexpr int64_t kOutputFloats[] = {400, 1, 400};  // OUTPUT__0..2 per row

// One request's answer; shared with its completion callback so a late answer after a timed-out
// wait never writes to a dead stack frame.
struct Answer {
  absl::Notification done;
  absl::Status status;
  std::vector<std::string> outputs = std::vector<std::string>(3);
};

// A policy-net request of kMaxBatch random (never all-zero) rows whose outputs land in `answer`.
std::unique_ptr<server::InferRequest> PolicyRequest(const std::string& id, std::mt19937_64& rng,
                                                    const std::shared_ptr<Answer>& answer) {
  auto r = std::make_unique<server::InferRequest>();
  r->id = id;
  r->batch_items = kMaxBatch;
  server::InputTensor in;
  in.index = 0;
  in.dtype = DataType::kFp32;
  in.shape = {kMaxBatch, 4, 20, 20};
  in.Own(RandomTensorBytes(DataType::kFp32, kMaxBatch * kRowFloats, rng));
  r->inputs.push_back(std::move(in));
  r->set_shape_key("[4,20,20];");
  for (int k = 0; k < 3; ++k) {
    server::OutputTensor out;
    out.index = k;
    out.data = &answer->outputs[k];
    r->outputs.push_back(std::move(out));
  }
  r->on_complete = [answer](std::unique_ptr<server::InferRequest> finished) {
    answer->status = finished->status;
    answer->done.Notify();
  };
  return r;
}

// A batch's compute span on the host clock, as tracing places it.
struct Interval {
  int worker;
  int64_t start_ns, end_ns;
};

Interval ComputeOnHostClock(int worker, const server::BatchTiming& t) {
  const int64_t end = t.gpu_done_ns - t.d2h_ns;
  return Interval{worker, end - t.compute_ns, end};
}

// Every interval relative to the earliest start, in microseconds, one worker per line.
std::string Describe(const std::vector<Interval>& all) {
  int64_t t0 = INT64_MAX;
  for (const auto& i : all) t0 = std::min(t0, i.start_ns);
  std::ostringstream s;
  for (int w = 0; w < kWorkers; ++w) {
    s << "worker " << w << " compute [start, end] us:";
    for (const auto& i : all) {
      if (i.worker == w) s << " [" << (i.start_ns - t0) / 1000 << ", " << (i.end_ns - t0) / 1000 << "]";
    }
    s << "\n";
  }
  return s.str();
}

TEST(GpuConcurrencyTest, TwoWorkersOnOneGpuOverlapInTime) {
  testing::TempDir repo("cs_gpu_concurrency");
  examples::ModelOptions o;
  o.max_batch_size = kMaxBatch;
  o.instance_count = kWorkers;
  o.instance_kind = "KIND_GPU";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy_net");
  ASSERT_TRUE(spec.ok()) << spec.status();

  server::DeviceActivityRegistry devices;  // outlives the runtime (declared first)
  std::vector<testing::RecordingInstance*> recorders;
  std::vector<std::unique_ptr<server::ModelInstance>> instances;
  for (int w = 0; w < kWorkers; ++w) {
    server::InstanceOptions options;
    options.worker = w;
    auto real = testing::LoadOnGpu0(*spec, devices, options);
    ASSERT_NE(real, nullptr);
    auto recording = std::make_unique<testing::RecordingInstance>(*spec, std::move(real));
    recorders.push_back(recording.get());
    instances.push_back(std::move(recording));
  }
  server::WarmupOptions warmup;
  warmup.runs_per_batch_size = 1;
  auto created = server::ModelRuntime::Create(*spec, std::move(instances), warmup, SteadyClock::Get());
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<server::ModelRuntime> runtime = *std::move(created);
  ASSERT_TRUE(runtime->ready());
  ASSERT_EQ(runtime->workers().size(), static_cast<size_t>(kWorkers));
  for (const auto& worker : runtime->workers()) {
    EXPECT_EQ(worker->instance().gpu(), 0) << "worker " << worker->index();
  }

  absl::Mutex mu;
  std::vector<std::string> failures;  // guarded by mu
  int ok_requests = 0;                // guarded by mu
  std::vector<std::thread> clients;
  for (int t = 0; t < kClientThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const std::string id = "c" + std::to_string(t) + "_" + std::to_string(i);
        auto answer = std::make_shared<Answer>();
        auto request = PolicyRequest(id, rng, answer);
        std::string failure;
        if (absl::Status s = runtime->queue().Enqueue(request); !s.ok()) {
          failure = id + ": enqueue: " + s.ToString();
        } else if (!answer->done.WaitForNotificationWithTimeout(absl::Seconds(60))) {
          failure = id + ": no answer within 60 s";
        } else if (!answer->status.ok()) {
          failure = id + ": " + answer->status.ToString();
        } else {
          for (int k = 0; k < 3; ++k) {
            const size_t want = static_cast<size_t>(kMaxBatch * kOutputFloats[k]) * sizeof(float);
            if (answer->outputs[k].size() != want) {
              failure = id + ": OUTPUT__" + std::to_string(k) + " has " + std::to_string(answer->outputs[k].size()) +
                        " bytes, want " + std::to_string(want);
            }
          }
        }
        absl::MutexLock lock(&mu);
        if (!failure.empty()) {
          failures.push_back(failure);
          return;  // a stuck request ends this client; the others still run
        }
        ++ok_requests;
      }
    });
  }
  for (auto& c : clients) c.join();
  runtime->Stop();  // joins the workers: the recorders are final

  EXPECT_THAT(failures, ::testing::IsEmpty());
  EXPECT_EQ(ok_requests, kClientThreads * kRequestsPerThread) << "every request completed OK";

  std::vector<Interval> intervals;
  for (int w = 0; w < kWorkers; ++w) {
    const std::vector<server::BatchTiming> served = recorders[w]->served();
    EXPECT_FALSE(served.empty()) << "worker " << w << " executed no batch";
    for (const server::BatchTiming& t : served) {
      EXPECT_EQ(t.worker, w);
      EXPECT_EQ(t.gpu, 0);
      EXPECT_TRUE(t.device_timed) << "worker " << w << ": spans must be CUDA-event timed";
      EXPECT_EQ(t.batch_size, kMaxBatch);
      EXPECT_GT(t.compute_ns, 0);
      EXPECT_GE(t.d2h_ns, 0);
      intervals.push_back(ComputeOnHostClock(w, t));
    }
  }

  int overlapping_pairs = 0;
  for (const Interval& a : intervals) {
    for (const Interval& b : intervals) {
      if (a.worker == 0 && b.worker == 1 && a.start_ns < b.end_ns && b.start_ns < a.end_ns) ++overlapping_pairs;
    }
  }
  EXPECT_GT(overlapping_pairs, 0) << "no compute span of worker 0 overlaps one of worker 1 on the host clock:\n"
                                  << Describe(intervals);
  std::cout << "[ concurrency ] batches: worker 0 " << recorders[0]->served().size() << ", worker 1 "
            << recorders[1]->served().size() << "; overlapping compute pairs: " << overlapping_pairs << "\n";
}

}  // namespace
}  // namespace chronoserve
