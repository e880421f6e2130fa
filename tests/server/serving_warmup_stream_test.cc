// The serving warm-up's stream (server/grpc/serving_warmup.h) with more messages than a stream may
// have in flight (StreamOptions::max_in_flight) and responses larger than the client's HTTP/2
// receive window can hold: it must read responses while it sends, or both ends block until the
// call's deadline. Real gRPC on 127.0.0.1 (tests/server/scheduling_harness.h), a fake instance
// whose outputs are as large as its input; the warm-up's own deadline bounds every call.
#include <gtest/gtest.h>

#include "server/grpc/serving_warmup.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"

namespace chronoserve {
namespace {

TEST(ServingWarmupStreamTest, MoreMessagesThanAStreamHoldsWithLargeResponsesFinishWellBeforeTheDeadline) {
  const server::StreamOptions stream_options;  // the server's default bound
  testing::ServiceHarness harness(stream_options);
  ASSERT_TRUE(harness.ok());
  // 64 KiB in, 2 x 64 KiB out per request: 1024 unanswered responses are 128 MiB, far beyond the
  // 16 MiB the client lets the server send ahead of its reads.
  server::ModelSpec spec = testing::GatedSpec("large", 1, 0);
  constexpr int64_t kFloats = 16384;
  spec.inputs[0].dims = {kFloats};
  for (auto& out : spec.outputs) out.dims = {kFloats};
  testing::Gate gate;  // never armed: nothing is held
  auto runtime = testing::StartGatedModel(spec, 1, &gate);
  ASSERT_NE(runtime, nullptr);
  harness.registry().Add(runtime);

  const int requests = stream_options.max_in_flight + 476;
  const absl::Duration deadline = absl::Seconds(60);
  const absl::Time start = absl::Now();
  const server::ServingWarmupReport report = server::RunServingWarmup(
      harness.address(), {spec}, harness.dispatcher().serving_warmup_token(), requests, deadline);
  const absl::Duration took = absl::Now() - start;

  EXPECT_EQ(report.sent, 2 * requests) << "unary calls, then one stream";
  EXPECT_EQ(report.failed, 0) << report.first_error;
  EXPECT_LT(took, deadline / 2) << "the stream waited for its deadline";
  EXPECT_EQ(runtime->stats().Snapshot().inference_count, 0u) << "the warm-up is counted nowhere";
}

// The warm-up writes a window of messages before it reads: a stream byte budget smaller than one
// answer (2 MiB against 1 MiB) would stop the server reading after the first while the client,
// which reads only after its window, blocks writing once the server's receive window is full. The
// server's own warm-up stream is exempt from the budget (StreamOptions::max_unsent_bytes).
TEST(ServingWarmupStreamTest, TheWarmupStreamIsNotHeldByTheStreamByteBudget) {
  server::StreamOptions stream_options;
  stream_options.max_unsent_bytes = uint64_t{1} << 20;
  testing::ServiceHarness harness(stream_options);
  ASSERT_TRUE(harness.ok());
  server::ModelSpec spec = testing::GatedSpec("huge", 1, 0);
  constexpr int64_t kFloats = 262144;  // 1 MiB in, 2 x 1 MiB out
  spec.inputs[0].dims = {kFloats};
  for (auto& out : spec.outputs) out.dims = {kFloats};
  testing::Gate gate;  // never armed
  auto runtime = testing::StartGatedModel(spec, 1, &gate);
  ASSERT_NE(runtime, nullptr);
  harness.registry().Add(runtime);

  const int requests = 64;  // 64 MiB written before the first read (the window is 256)
  const absl::Duration deadline = absl::Seconds(30);
  const absl::Time start = absl::Now();
  const server::ServingWarmupReport report = server::RunServingWarmup(
      harness.address(), {spec}, harness.dispatcher().serving_warmup_token(), requests, deadline);
  const absl::Duration took = absl::Now() - start;

  EXPECT_EQ(report.sent, 2 * requests);
  EXPECT_EQ(report.failed, 0) << report.first_error;
  EXPECT_LT(took, deadline / 2) << "the stream waited for its deadline";
}

}  // namespace
}  // namespace chronoserve
