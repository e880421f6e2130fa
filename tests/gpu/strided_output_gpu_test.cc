// Strided outputs on a GPU, eager and as a CUDA graph: a transposed output and a sliced one come
// back with the right values at every batch size; the copy that makes them contiguous runs before
// the compute span ends (inside the captured graph for graph replays), so a strided output's d2h is
// a copy like a contiguous one's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/strided_model.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"

namespace chronoserve {
namespace {
using client::Tensor;

constexpr int kRows = 64, kCols = 128, kRepeat = 64, kMaxBatch = 4;
constexpr testing::StridedDims kDims{kRows, kCols, kRepeat, kMaxBatch};
using testing::Median;

TEST(StridedOutputGpuTest, StridedOutputsAreRightEagerAndAsAGraph) {
  testing::TempDir repo("cs_gpu_strided");
  const struct {
    const char* name;
    bool graphs;
    const char* tail;
  } models[] = {{"strided_eager", false, ""}, {"strided_graph", true, ""}, {"copied_graph", true, ".contiguous()"}};
  for (const auto& m : models) {
    const std::string extra = std::string("instance_group { kind: KIND_GPU count: 1 gpus: [0] }\n") +
                              (m.graphs ? "optimization { cuda { graphs: true } }\n" : "");
    ASSERT_TRUE(testing::WriteStridedModel(repo, m.name, kDims, extra, m.tail));
  }
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(78);
  std::vector<int64_t> d2h[3];
  for (int batch : {1, 3, 4}) {
    const int64_t items = int64_t{batch} * kRows * kCols;
    const Tensor input{"INPUT__0", DataType::kFp32, {batch, kRows, kCols}, RandomTensorBytes(DataType::kFp32, items, rng)};
    std::vector<float> x(items);
    std::memcpy(x.data(), input.data.data(), input.data.size());
    for (int k = 0; k < 3; ++k) {
      auto r = c->Infer(models[k].name, {input});
      ASSERT_TRUE(r.ok()) << models[k].name << ": " << r.status();
      ASSERT_EQ(r->outputs.size(), 2u);
      ASSERT_TRUE(r->timing.has_value());
      EXPECT_EQ(r->timing->cuda_graph, models[k].graphs) << models[k].name << " batch " << batch;
      const size_t y_floats = size_t{kCols} * kRows * kRepeat, s_floats = size_t{kRows} * (kCols / 2);
      ASSERT_EQ(r->outputs[0].data.size(), sizeof(float) * y_floats * batch);
      ASSERT_EQ(r->outputs[1].data.size(), sizeof(float) * s_floats * batch);
      const auto* y = reinterpret_cast<const float*>(r->outputs[0].data.data());
      const auto* s = reinterpret_cast<const float*>(r->outputs[1].data.data());
      int64_t wrong = 0;
      for (int b = 0; b < batch; ++b) {
        const float* xb = x.data() + int64_t{b} * kRows * kCols;
        for (int j = 0; j < kCols; ++j) {
          for (int i = 0; i < kRows * kRepeat; ++i) {
            // The GPU may fuse x * 2 + 1 into one rounding: allow that one rounding's difference.
            const float want = xb[(i % kRows) * kCols + j] * 2.0f + 1.0f;
            const float got = y[b * y_floats + size_t{j} * kRows * kRepeat + i];
            wrong += !(std::fabs(got - want) <= 1e-6f * std::max(1.0f, std::fabs(want)));
          }
        }
        for (int i = 0; i < kRows; ++i) {
          for (int j = 0; j < kCols / 2; ++j) wrong += s[b * s_floats + i * (kCols / 2) + j] != xb[i * kCols + 2 * j];
        }
      }
      EXPECT_EQ(wrong, 0) << models[k].name << " batch " << batch;
      d2h[k].push_back(r->timing->d2h_ns);
    }
  }
  // Only a copy of the same bytes in d2h either way: within 2x of each other (+ 100 us of noise).
  EXPECT_LE(Median(d2h[1]), 2 * Median(d2h[2]) + 100'000)
      << "d2h medians (ns): strided graph " << Median(d2h[1]) << ", contiguous graph " << Median(d2h[2]);
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
