// The timing.* response parameters on the wire: AddTimingParams (server) and
// InferenceClient::DecodeTiming (client) agree on every field, and a stream slot's response reused
// with ClearKeepingTimingParams never carries a stale value or a stale error code, and neither does
// a unary response reused through ResponsePool.
#include <gtest/gtest.h>

#include "client/inference_client.h"
#include "common/timing.h"
#include "server/grpc/infer_dispatcher.h"
#include "server/grpc/response_pool.h"
#include "tests/server/timing_samples.h"

namespace chronoserve::server {
namespace {

RequestTiming Timing(int64_t base, bool flags) { return testing::SampleTiming(base, flags); }
void ExpectSame(const RequestTiming& a, const RequestTiming& b) { testing::ExpectSameTiming(a, b); }

TEST(TimingParamsTest, ClientDecodesEveryFieldTheServerWrites) {
  for (bool flags : {false, true}) {
    inference::ModelInferResponse response;
    const RequestTiming sent = Timing(123456, flags);
    AddTimingParams(sent, &response);
    EXPECT_EQ(response.parameters_size(), static_cast<int>(TimingParamFields().size()));
    EXPECT_EQ(response.parameters().at("timing.clock").string_param(), flags ? "cuda_event" : "host");
    inference::ModelInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(response.SerializeAsString()));
    auto got = client::InferenceClient::DecodeTiming(parsed);
    ASSERT_TRUE(got.has_value());
    ExpectSame(*got, sent);
  }
}

TEST(TimingParamsTest, ClientRejectsAMistypedSpanAndAResponseWithoutTiming) {
  inference::ModelInferResponse response;
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(response).has_value());
  AddTimingParams(Timing(1000, true), &response);
  (*response.mutable_parameters())["timing.compute_ns"].set_string_param("12");
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(response).has_value());
  // A flag or the clock of another type is refused too, not read as false or "host".
  AddTimingParams(Timing(1000, true), &response);
  ASSERT_TRUE(client::InferenceClient::DecodeTiming(response).has_value());
  (*response.mutable_parameters())["timing.cold"].set_int64_param(1);
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(response).has_value());
  AddTimingParams(Timing(1000, true), &response);
  (*response.mutable_parameters())["timing.clock"].set_bool_param(true);
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(response).has_value());
}

TEST(TimingParamsTest, ReusedStreamResponseKeepsOnlyTimingEntriesAndTheyAreAllOverwritten) {
  inference::ModelStreamInferResponse slot;
  inference::ModelInferResponse* r = slot.mutable_infer_response();
  r->set_model_name("m");
  r->add_outputs()->set_name("OUTPUT__0");
  r->add_raw_output_contents("abcd");
  AddTimingParams(Timing(1000, true), r);

  ClearKeepingTimingParams(&slot);
  EXPECT_TRUE(slot.error_message().empty());
  EXPECT_TRUE(slot.infer_response().model_name().empty());
  EXPECT_EQ(slot.infer_response().outputs_size(), 0);
  EXPECT_EQ(slot.infer_response().raw_output_contents_size(), 0);
  EXPECT_EQ(slot.infer_response().parameters_size(), static_cast<int>(TimingParamFields().size()));

  const RequestTiming next = Timing(777000, false);
  AddTimingParams(next, slot.mutable_infer_response());
  EXPECT_EQ(slot.infer_response().parameters_size(), static_cast<int>(TimingParamFields().size()));
  auto got = client::InferenceClient::DecodeTiming(slot.infer_response());
  ASSERT_TRUE(got.has_value());
  ExpectSame(*got, next);
}

TEST(TimingParamsTest, ReusedStreamResponseDropsAnErrorCodeAndEverythingWithIt) {
  inference::ModelStreamInferResponse slot;
  AddTimingParams(Timing(1000, true), slot.mutable_infer_response());
  (*slot.mutable_infer_response()->mutable_parameters())["error_code"].set_int64_param(4);
  slot.set_error_message("deadline");
  ClearKeepingTimingParams(&slot);
  EXPECT_TRUE(slot.error_message().empty());
  EXPECT_EQ(slot.infer_response().parameters_size(), 0);
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(slot.infer_response()).has_value());
}

TEST(ResponsePoolTest, AGivenBackResponseComesBackClearedWithOnlyItsTimingEntries) {
  ResponsePool pool(4);
  auto first = pool.Take();
  inference::ModelInferResponse* raw = first.get();
  first->set_model_name("mlp");
  first->set_id("request-1");
  first->add_outputs()->set_name("OUTPUT__0");
  first->add_raw_output_contents(std::string(256, '\x5'));
  AddTimingParams(Timing(1000, true), first.get());
  pool.Give(std::move(first));
  EXPECT_EQ(pool.kept(), 1u);

  auto again = pool.Take();
  EXPECT_EQ(again.get(), raw) << "the same message, reused";
  EXPECT_EQ(pool.kept(), 0u);
  EXPECT_TRUE(again->model_name().empty());
  EXPECT_TRUE(again->id().empty());
  EXPECT_EQ(again->outputs_size(), 0);
  EXPECT_EQ(again->raw_output_contents_size(), 0);
  EXPECT_EQ(again->parameters_size(), static_cast<int>(TimingParamFields().size()));
  const RequestTiming next = Timing(555000, false);
  AddTimingParams(next, again.get());
  EXPECT_EQ(again->parameters_size(), static_cast<int>(TimingParamFields().size()));
  auto got = client::InferenceClient::DecodeTiming(*again);
  ASSERT_TRUE(got.has_value());
  ExpectSame(*got, next);
}

TEST(ResponsePoolTest, AResponseWithOtherParametersIsClearedWhole) {
  ResponsePool pool(4);
  auto response = pool.Take();
  AddTimingParams(Timing(1000, true), response.get());
  (*response->mutable_parameters())["error_code"].set_int64_param(4);
  pool.Give(std::move(response));
  auto again = pool.Take();
  EXPECT_EQ(again->parameters_size(), 0);
  EXPECT_FALSE(client::InferenceClient::DecodeTiming(*again).has_value());
}

TEST(ResponsePoolTest, KeepsAtMostItsCapacityAndNoLargeOutputBuffers) {
  ResponsePool pool(2);
  std::vector<std::unique_ptr<inference::ModelInferResponse>> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(pool.Take());
  for (auto& r : taken) pool.Give(std::move(r));
  EXPECT_EQ(pool.kept(), 2u) << "the third is freed";

  ResponsePool small(2);
  auto large = small.Take();
  large->add_raw_output_contents(std::string(ResponsePool::kMaxKeptOutputBytes + 1, '\x7'));
  small.Give(std::move(large));
  EXPECT_EQ(small.kept(), 0u) << "a response that held more output bytes than kMaxKeptOutputBytes is freed";
  small.Give(nullptr);
  EXPECT_EQ(small.kept(), 0u);
}

}  // namespace
}  // namespace chronoserve::server
