// The offline profiler on a real GPU: the policy net (max_batch_size 128) profiled at batch 1 and
// 128. Checks what the CPU suite cannot: eager, cuda_graph and eager_exact are all measured from
// CUDA events (the profiler itself refuses an eager_exact run whose stream was not held, so
// "measured" means every sample held it), a graph replay at batch 1 is launched faster than the
// eager forward, the copy row times a real copy from pageable memory (slower than the pinned h2d,
// TIMING.md lesson 3), and the throughput search goes past max_batch_size and stops at the device's
// memory limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/server/test_repository.h"
#include "tools/example_models.h"
#include "tools/profile/model_profiler.h"
#include "tools/profile/profile_report.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;

const profile::ModeProfile& Mode(const profile::ProfileReport& r, const std::string& name) {
  for (const profile::ModeProfile& m : r.modes) {
    if (m.mode == name) return m;
  }
  ADD_FAILURE() << "no mode " << name;
  return r.modes.front();
}

// Writes the policy net (max_batch_size 128) into `repo`; options to profile it on GPU 0 at batch 1
// and 128.
profile::ProfileOptions PolicyNetAt1And128(const testing::TempDir& repo) {
  examples::ModelOptions o;
  o.max_batch_size = 128;
  EXPECT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", o).ok());
  profile::ProfileOptions options;
  options.gpu = 0;
  options.batch_sizes = "1,128";
  return options;
}

TEST(GpuProfileTest, PolicyNetEagerGraphExactPageableCopyAndSearchPastMax) {
  testing::TempDir repo("cs_gpu_profile");
  profile::ProfileOptions options = PolicyNetAt1And128(repo);
  options.warmup_runs = 20;
  options.repetitions = 100;
  options.search_max_batch = 512;
  auto report = profile::ProfileModel(repo.path() + "/policy_net", options);
  ASSERT_TRUE(report.ok()) << report.status();
  profile::PrintReport(*report, std::cout);  // the figures, for the device call's log

  EXPECT_EQ(report->device, "cuda:0");
  EXPECT_TRUE(report->device_timed);
  const profile::ModeProfile& eager = Mode(*report, "eager");
  const profile::ModeProfile& graph = Mode(*report, "cuda_graph");
  const profile::ModeProfile& exact = Mode(*report, "eager_exact");
  ASSERT_TRUE(eager.measured) << eager.note;
  ASSERT_TRUE(graph.measured) << graph.note;
  ASSERT_TRUE(exact.measured) << exact.note << " (every eager_exact sample must have held its stream)";
  for (const profile::ModeProfile* m : {&eager, &graph, &exact}) {
    ASSERT_EQ(m->batches.size(), 2u) << m->mode;
    for (const profile::BatchProfile& b : m->batches) {
      EXPECT_EQ(b.compute_us.samples, 100) << m->mode;
      EXPECT_GT(b.compute_us.median, 0) << m->mode << " batch " << b.batch_size;
      EXPECT_GT(b.h2d_us.median, 0) << m->mode << " batch " << b.batch_size;
    }
  }
  ASSERT_EQ(eager.batches[0].batch_size, 1);
  ASSERT_EQ(graph.batches[0].batch_size, 1);
  EXPECT_LT(graph.batches[0].launch_us.median, eager.batches[0].launch_us.median)
      << "one graph replay is enqueued faster than the eager forward's kernels";

  EXPECT_EQ(report->mistakes_batch_size, 128);
  ASSERT_EQ(report->mistakes.size(), 4u);
  // The host timer's correct figure is the device's own compute (eager_exact at the same size), not
  // the idle stream's events, which count the launch the mistake is about.
  const profile::TimingMistake& host_timer = report->mistakes[1];
  EXPECT_EQ(host_timer.name, "host timer without synchronisation");
  EXPECT_EQ(host_timer.correct_figure, "median compute with the stream held (device time only, eager_exact)");
  ASSERT_EQ(exact.batches[1].batch_size, 128);
  EXPECT_DOUBLE_EQ(host_timer.correct_us, exact.batches[1].compute_us.median);
  const profile::TimingMistake& copy = report->mistakes[2];
  EXPECT_EQ(copy.name, "includes the host-to-device copy");
  ASSERT_TRUE(copy.measured) << copy.note;
  ASSERT_EQ(copy.details_us.count("pageable_h2d_us"), 1u);
  ASSERT_EQ(copy.details_us.count("pinned_h2d_us"), 1u);
  const double pageable = copy.details_us.at("pageable_h2d_us"), pinned = copy.details_us.at("pinned_h2d_us");
  EXPECT_GT(pinned, 0);
  EXPECT_GT(pageable, pinned) << "800 KB from pageable memory vs from pinned staging";
  // The mistaken figure is that run's pageable h2d + its compute. Against the correct compute only
  // its copy part is certain: the eager policy net is launch-bound, so its compute moves with the
  // host (under AddressSanitizer one run's came out 30 us below the median, more than the copy).
  EXPECT_GT(copy.mistaken_us, pageable) << "pageable h2d + compute";
  EXPECT_THAT(copy.what, HasSubstr("pageable"));
  for (const profile::TimingMistake& m : report->mistakes) EXPECT_TRUE(m.measured) << m.name << ": " << m.note;

  std::vector<int64_t> searched;
  for (const profile::ThroughputPoint& p : report->throughput.points) {
    searched.push_back(p.batch_size);
    EXPECT_EQ(p.above_max_batch_size, p.batch_size > 128) << p.batch_size;
  }
  EXPECT_THAT(searched, ::testing::ElementsAre(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)) << report->throughput.stopped_by;
}

// --mistakes-batch-size 8, not among the profiled sizes (1 and 128): eager_exact measures it on its
// own, as eager does, so the host-timer row is still judged against device-only compute (it fell
// back to the idle stream's events, which count the very launch the mistake is about).
TEST(GpuProfileTest, AMistakesBatchSizeNotProfiledIsStillJudgedAgainstDeviceTime) {
  testing::TempDir repo("cs_gpu_profile_mistakes");
  profile::ProfileOptions options = PolicyNetAt1And128(repo);
  options.mistakes_batch_size = 8;
  options.warmup_runs = 5;
  options.repetitions = 20;
  options.cuda_graphs = false;
  options.throughput_search = false;
  auto report = profile::ProfileModel(repo.path() + "/policy_net", options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(Mode(*report, "eager_exact").measured) << Mode(*report, "eager_exact").note;
  EXPECT_EQ(report->mistakes_batch_size, 8);
  ASSERT_EQ(report->mistakes.size(), 4u);
  const profile::TimingMistake& host_timer = report->mistakes[1];
  EXPECT_EQ(host_timer.correct_figure, "median compute with the stream held (device time only, eager_exact)");
  EXPECT_TRUE(host_timer.measured) << host_timer.note;
  EXPECT_GT(host_timer.correct_us, 0);
}

// A model that needs 1 GiB of device memory per item: INPUT__0 [256] FP32 expanded 2^20 times and
// summed back (OUTPUT__0 [256]). Its inputs are 1 KiB per item, so the device runs out long before
// the host or the search's input-bytes bound: at batch 128 on an 80 GB H100, 256 on a 141 GB H200.
void WriteMemoryHog(const std::string& repository, int max_batch_size) {
  torch::jit::Module m("MemoryHog");
  m.define("def forward(self, x):\n    return x.unsqueeze(1).expand(-1, 1048576, -1).contiguous().sum(1)\n");
  const std::filesystem::path dir = std::filesystem::path(repository) / "hog";
  std::filesystem::create_directories(dir / "1");
  m.save((dir / "1" / "model.pt").string());
  std::ofstream config(dir / "config.pbtxt");
  config << "name: \"hog\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: " << max_batch_size << "\n"
         << "input { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 256 ] }\n"
         << "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 256 ] }\n";
}

TEST(GpuProfileTest, ThroughputSearchStopsAtTheDeviceMemoryLimit) {
  testing::TempDir repo("cs_gpu_profile_oom");
  WriteMemoryHog(repo.path(), 4);
  profile::ProfileOptions options;
  options.gpu = 0;
  options.batch_sizes = "1";
  options.warmup_runs = 1;
  options.repetitions = 3;
  options.cuda_graphs = false;
  options.exact_device_timing = false;
  options.search_max_batch = 4096;
  auto report = profile::ProfileModel(repo.path() + "/hog", options);
  ASSERT_TRUE(report.ok()) << report.status();
  const profile::ThroughputSearch& search = report->throughput;
  std::cout << "stopped by " << search.stopped_by << ": " << search.stop_error << "\n";
  ASSERT_GT(search.memory_limit_batch_size, 4) << search.stopped_by << ": " << search.stop_error;
  EXPECT_LE(search.memory_limit_batch_size, 1024);
  EXPECT_EQ(search.stopped_by, "memory limit at batch size " + std::to_string(search.memory_limit_batch_size));
  EXPECT_THAT(search.stop_error, HasSubstr("out of memory"));
  ASSERT_FALSE(search.points.empty());
  EXPECT_EQ(search.points.back().batch_size * 2, search.memory_limit_batch_size);
  EXPECT_TRUE(search.points.back().above_max_batch_size);
}

}  // namespace
}  // namespace chronoserve
