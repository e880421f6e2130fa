// The serving warm-up's pieces that need no server: its messages, its loopback address, its token.
#include <gtest/gtest.h>

#include <cstring>

#include "server/grpc/serving_warmup.h"

namespace chronoserve::server {
namespace {

ModelSpec Spec(int max_batch_size) {
  ModelSpec spec;
  spec.name = "m";
  spec.version = 3;
  spec.max_batch_size = max_batch_size;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {3, -1}}, {"INPUT__1", DataType::kInt64, {2}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  WarmupSpec w;
  w.input_dims["INPUT__0"] = {3, 9};
  spec.warmups.push_back(w);
  return spec;
}

bool AllZero(const std::string& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

TEST(ServingWarmupMessageTest, BatchedMessageHasTheItemsAndRandomNonZeroData) {
  const inference::ModelInferRequest m = SyntheticInferMessage(Spec(8), 5, 42);
  EXPECT_EQ(m.model_name(), "m");
  EXPECT_EQ(m.model_version(), "3");
  ASSERT_EQ(m.inputs_size(), 2);
  EXPECT_EQ(m.inputs(0).name(), "INPUT__0");
  EXPECT_EQ(m.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(m.inputs(0).shape().begin(), m.inputs(0).shape().end()),
            (std::vector<int64_t>{5, 3, 9}));  // the variable dim from the model's warm-up entry
  EXPECT_EQ(m.inputs(1).datatype(), "INT64");
  EXPECT_EQ(std::vector<int64_t>(m.inputs(1).shape().begin(), m.inputs(1).shape().end()),
            (std::vector<int64_t>{5, 2}));
  ASSERT_EQ(m.raw_input_contents_size(), 2);
  EXPECT_EQ(m.raw_input_contents(0).size(), 5u * 3 * 9 * 4);
  EXPECT_EQ(m.raw_input_contents(1).size(), 5u * 2 * 8);
  EXPECT_FALSE(AllZero(m.raw_input_contents(0)));
  EXPECT_FALSE(AllZero(m.raw_input_contents(1)));
  EXPECT_EQ(m.outputs_size(), 0);  // all outputs returned
  EXPECT_NE(SyntheticInferMessage(Spec(8), 5, 43).raw_input_contents(0), m.raw_input_contents(0));
}

TEST(ServingWarmupMessageTest, NonBatchingModelIgnoresItemsAndVariableDimsDefaultToOne) {
  ModelSpec spec = Spec(0);
  spec.warmups.clear();
  const inference::ModelInferRequest m = SyntheticInferMessage(spec, 7, 1);
  ASSERT_EQ(m.inputs_size(), 2);
  EXPECT_EQ(std::vector<int64_t>(m.inputs(0).shape().begin(), m.inputs(0).shape().end()),
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(m.raw_input_contents(0).size(), 3u * 4);
}

TEST(ServingWarmupMessageTest, LoopbackTargetOfEveryListenAddress) {
  EXPECT_EQ(LoopbackTarget("0.0.0.0", 8001), "127.0.0.1:8001");
  EXPECT_EQ(LoopbackTarget("", 8001), "127.0.0.1:8001");
  EXPECT_EQ(LoopbackTarget("::", 9), "[::1]:9");
  EXPECT_EQ(LoopbackTarget("::1", 9), "[::1]:9");
  EXPECT_EQ(LoopbackTarget("127.0.0.1", 7), "127.0.0.1:7");
  EXPECT_EQ(LoopbackTarget("10.1.2.3", 7), "10.1.2.3:7");
  EXPECT_EQ(LoopbackTarget("localhost", 7), "localhost:7");
}

// What --allow-shared-memory warns about: listening where other machines reach the port.
TEST(ServingWarmupMessageTest, OnlyLoopbackHostsAreLoopback) {
  for (const char* local : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(local)) << local;
  }
  for (const char* remote : {"0.0.0.0", "", "::", "[::]", "10.1.2.3", "128.0.0.1", "example.com", "127.0.0"}) {
    EXPECT_FALSE(IsLoopbackHost(remote)) << remote;
  }
}

TEST(ServingWarmupMessageTest, TokensAre32HexDigitsAndDiffer) {
  const std::string a = NewServingWarmupToken();
  const std::string b = NewServingWarmupToken();
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace chronoserve::server
