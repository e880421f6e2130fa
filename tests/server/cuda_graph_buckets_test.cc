// CUDA-graph buckets: defaults, config parsing and batch -> bucket selection (pure functions; the
// GPU suite checks the graphs themselves).
#include "server/backend/cuda_graph_buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

ModelSpec GraphSpec(int max_batch_size, const char* sizes = nullptr) {
  ModelSpec spec;
  spec.name = "policy";
  spec.max_batch_size = max_batch_size;
  spec.cuda_graphs = true;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {4, 20, 20}}};
  if (sizes != nullptr) spec.parameters[kGraphBatchSizesKey] = sizes;
  return spec;
}

TEST(CudaGraphBucketsTest, DefaultsArePowersOfTwoThenMax) {
  struct Case {
    int max_batch_size;
    std::vector<int> want;
  };
  const Case cases[] = {
      {0, {1}},
      {1, {1}},
      {2, {1, 2}},
      {8, {1, 2, 4, 8}},
      {100, {1, 2, 4, 8, 16, 32, 64, 100}},
      {128, {1, 2, 4, 8, 16, 32, 64, 128}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DefaultGraphBuckets(c.max_batch_size), c.want) << "max_batch_size " << c.max_batch_size;
  }
}

TEST(CudaGraphBucketsTest, BatchGoesToTheSmallestBucketThatHoldsIt) {
  const std::vector<int> buckets = {1, 8, 64, 128};
  struct Case {
    int64_t items;
    int want;
  };
  const Case cases[] = {{1, 1}, {2, 8}, {8, 8}, {9, 64}, {64, 64}, {65, 128}, {128, 128}, {129, 0}};
  for (const Case& c : cases) {
    EXPECT_EQ(BucketFor(buckets, c.items), c.want) << "items " << c.items;
  }
  EXPECT_EQ(BucketFor({}, 1), 0) << "no graphs: eager";
  EXPECT_EQ(BucketFor({4, 16}, 17), 0) << "beyond the largest bucket: eager";
}

TEST(CudaGraphBucketsTest, GraphsOffMeansNoBucketsButTheSettingIsStillChecked) {
  ModelSpec spec = GraphSpec(16, "1,8");
  spec.cuda_graphs = false;
  auto buckets = GraphBucketsFromSpec(spec);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_TRUE(buckets->empty());
  spec.parameters.erase(kGraphBatchSizesKey);
  buckets = GraphBucketsFromSpec(spec);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_TRUE(buckets->empty());
  // A typo is refused even while graphs are off, not found only when they are turned on.
  spec.parameters[kGraphBatchSizesKey] = "1,abc,999";
  buckets = GraphBucketsFromSpec(spec);
  ASSERT_FALSE(buckets.ok());
  EXPECT_THAT(buckets.status().message(), HasSubstr("'abc' is not a positive integer"));
}

TEST(CudaGraphBucketsTest, ParsesTheConfiguredSizes) {
  struct Case {
    const char* sizes;
    std::vector<int> want;
  };
  const Case cases[] = {
      {"1,8,64,128", {1, 8, 64, 128}},
      {" 64, 1 ,8,8 ", {1, 8, 64}},  // sorted, distinct, spaces allowed
      {"128", {128}},
  };
  for (const Case& c : cases) {
    auto buckets = GraphBucketsFromSpec(GraphSpec(128, c.sizes));
    ASSERT_TRUE(buckets.ok()) << c.sizes << ": " << buckets.status();
    EXPECT_EQ(*buckets, c.want) << c.sizes;
  }
  auto defaults = GraphBucketsFromSpec(GraphSpec(16));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, (std::vector<int>{1, 2, 4, 8, 16}));
}

TEST(CudaGraphBucketsTest, RejectsBadSizesNamingModelKeyAndValue) {
  for (const char* bad : {"", "0", "-4", "8,abc", "1,,8", "1.5", "129"}) {
    auto buckets = GraphBucketsFromSpec(GraphSpec(128, bad));
    ASSERT_FALSE(buckets.ok()) << "'" << bad << "'";
    EXPECT_EQ(buckets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(buckets.status().message(), HasSubstr("model 'policy'"));
    EXPECT_THAT(buckets.status().message(), HasSubstr(kGraphBatchSizesKey));
  }
  auto unbatched = GraphBucketsFromSpec(GraphSpec(0, "1"));
  ASSERT_FALSE(unbatched.ok());
  EXPECT_THAT(unbatched.status().message(), HasSubstr("max_batch_size 0"));
}

TEST(CudaGraphBucketsTest, OnlyStaticInputShapesAreCaptured) {
  ModelSpec spec = GraphSpec(8);
  EXPECT_TRUE(HasStaticInputShapes(spec));
  spec.inputs.push_back({"INPUT__1", DataType::kFp32, {-1}});
  EXPECT_FALSE(HasStaticInputShapes(spec));
}

}  // namespace
}  // namespace chronoserve::server
