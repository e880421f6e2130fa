// chronobench reads answers as views (proto/response_view.proto, client/response_view.h): the same
// timing a ModelInferResponse carries, decoded from the map's wire entries; a reused view never
// keeps a value of the answer before; every InferParameter kind read from its bytes; malformed
// bytes and mistyped spans refused, as InferenceClient::DecodeTiming refuses them.
#include "client/response_view.h"

#include <gtest/gtest.h>

#include "client/inference_client.h"
#include "server/grpc/infer_dispatcher.h"
#include "tests/server/timing_samples.h"

namespace chronoserve::client {
namespace {

RequestTiming Timing(int64_t base, bool flags) { return testing::SampleTiming(base, flags); }
void ExpectSame(const RequestTiming& a, const RequestTiming& b) { testing::ExpectSameTiming(a, b); }

std::string Answer(const RequestTiming& timing, const std::string& output) {
  inference::ModelInferResponse response;
  response.set_model_name("mlp");
  response.set_id("42");
  auto* out = response.add_outputs();
  out->set_name("OUTPUT__0");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(static_cast<int64_t>(output.size() / 4));
  response.add_raw_output_contents(output);
  server::AddTimingParams(timing, &response);
  return response.SerializeAsString();
}

TEST(ResponseViewTest, AViewDecodesWhatTheMessageDecodes) {
  for (bool flags : {false, true}) {
    const RequestTiming sent = Timing(987654, flags);
    const std::string wire = Answer(sent, std::string(64, '\x3'));
    view::ModelInferResponseView v;
    ASSERT_TRUE(v.ParseFromString(wire));
    EXPECT_EQ(v.parameters_size(), static_cast<int>(TimingParamFields().size()));
    EXPECT_EQ(v.id(), "42");
    ASSERT_EQ(v.outputs_size(), 1);
    EXPECT_EQ(v.outputs(0).shape(1), 16);
    EXPECT_EQ(v.raw_output_contents(0), std::string(64, '\x3'));
    auto got = DecodeTiming(v);
    ASSERT_TRUE(got.has_value());
    ExpectSame(*got, sent);

    inference::ModelInferResponse message;
    ASSERT_TRUE(message.ParseFromString(wire));
    auto reference = InferenceClient::DecodeTiming(message);
    ASSERT_TRUE(reference.has_value());
    ExpectSame(*got, *reference);
  }
}

TEST(ResponseViewTest, AReusedViewKeepsNothingOfTheAnswerBefore) {
  view::ModelInferResponseView v;
  ASSERT_TRUE(v.ParseFromString(Answer(Timing(1000, true), std::string(32, '\x1'))));
  const RequestTiming second = Timing(2'000'000, false);
  ASSERT_TRUE(v.ParseFromString(Answer(second, std::string(8, '\x2'))));
  EXPECT_EQ(v.parameters_size(), static_cast<int>(TimingParamFields().size()));
  EXPECT_EQ(v.raw_output_contents(0), std::string(8, '\x2'));
  auto got = DecodeTiming(v);
  ASSERT_TRUE(got.has_value());
  ExpectSame(*got, second);

  inference::ModelInferResponse untimed;  // --request-timing off
  untimed.set_model_name("mlp");
  ASSERT_TRUE(v.ParseFromString(untimed.SerializeAsString()));
  EXPECT_EQ(v.parameters_size(), 0);
  EXPECT_FALSE(DecodeTiming(v).has_value());
}

TEST(ResponseViewTest, AMistypedSpanOrMalformedValueIsRefused) {
  inference::ModelInferResponse response;
  server::AddTimingParams(Timing(1000, true), &response);
  (*response.mutable_parameters())["timing.compute_ns"].set_string_param("12");
  view::ModelInferResponseView v;
  ASSERT_TRUE(v.ParseFromString(response.SerializeAsString()));
  EXPECT_FALSE(DecodeTiming(v).has_value());

  server::AddTimingParams(Timing(1000, true), &response);
  ASSERT_TRUE(v.ParseFromString(response.SerializeAsString()));
  ASSERT_TRUE(DecodeTiming(v).has_value());
  for (auto& entry : *v.mutable_parameters()) {
    if (entry.key() == "timing.queue_ns") entry.set_value("\x10");  // an int64 tag without its varint
  }
  EXPECT_FALSE(DecodeTiming(v).has_value());

  // A flag of another type is refused, not read as false.
  server::AddTimingParams(Timing(1000, true), &response);
  (*response.mutable_parameters())["timing.cuda_graph"].set_int64_param(1);
  ASSERT_TRUE(v.ParseFromString(response.SerializeAsString()));
  EXPECT_FALSE(DecodeTiming(v).has_value());
}

TEST(ResponseViewTest, EveryParameterKindIsReadFromItsBytes) {
  inference::InferParameter p;
  p.set_bool_param(true);
  auto v = ParseParameterValue(p.SerializeAsString());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kBool);
  EXPECT_TRUE(v->bool_value);

  p.set_int64_param(-1234567890123);
  v = ParseParameterValue(p.SerializeAsString());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kInt64);
  EXPECT_EQ(v->int64_value, -1234567890123);

  p.set_string_param("cuda_event");
  const std::string string_wire = p.SerializeAsString();
  v = ParseParameterValue(string_wire);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kString);
  EXPECT_EQ(v->string_value, "cuda_event");

  p.set_double_param(2.5);
  v = ParseParameterValue(p.SerializeAsString());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kDouble);
  EXPECT_EQ(v->double_value, 2.5);

  p.set_uint64_param(18000000000000000000ull);
  v = ParseParameterValue(p.SerializeAsString());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kUint64);
  EXPECT_EQ(v->uint64_value, 18000000000000000000ull);

  v = ParseParameterValue("");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, ParameterValue::Kind::kNone);
  EXPECT_FALSE(ParseParameterValue(string_wire.substr(0, string_wire.size() - 2)).has_value()) << "truncated";
  EXPECT_FALSE(ParseParameterValue("\x12").has_value()) << "an int64 tag with the wrong wire type";
}

TEST(ResponseViewTest, FindsAnInt64ParameterByKey) {
  inference::ModelInferResponse response;
  (*response.mutable_parameters())["error_code"].set_int64_param(4);
  (*response.mutable_parameters())["note"].set_string_param("deadline");
  view::ModelInferResponseView v;
  ASSERT_TRUE(v.ParseFromString(response.SerializeAsString()));
  EXPECT_EQ(FindInt64Parameter(v.parameters(), "error_code"), std::optional<int64_t>(4));
  EXPECT_EQ(FindInt64Parameter(v.parameters(), "note"), std::nullopt) << "a string";
  EXPECT_EQ(FindInt64Parameter(v.parameters(), "absent"), std::nullopt);
}

}  // namespace
}  // namespace chronoserve::client
