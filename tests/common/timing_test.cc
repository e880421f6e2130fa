#include "common/timing.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "common/launch_bound.h"

namespace chronoserve {
namespace {

RequestTiming Sample() {
  RequestTiming t;
  t.queue_ns = 12'000;
  t.input_stage_ns = 3'000;
  t.h2d_ns = 19'000;
  t.compute_ns = 112'000;
  t.launch_ns = 40'000;
  t.d2h_ns = 4'000;
  t.output_stage_ns = 5'000;
  t.server_total_ns = 171'000;
  t.admit_ns = 9'000;
  t.handback_ns = 4'000;
  t.batch_size = 8;
  t.worker = 1;
  t.gpu = 0;
  t.sm_clock_mhz = 1980;
  t.idle_before_us = 250;
  t.cold = true;
  t.device_timed = true;
  return t;
}

// Decodes a response whose parameters are `params` (a key missing = a server without the field).
absl::StatusOr<RequestTiming> DecodeFrom(const std::map<std::string, TimingParam>& params) {
  return DecodeTimingParams([&params](const std::string& key) -> std::optional<TimingParam> {
    auto it = params.find(key);
    if (it == params.end()) return std::nullopt;
    return it->second;
  });
}

TEST(RequestTimingTest, RemainderAndConsistency) {
  RequestTiming t = Sample();
  EXPECT_EQ(t.remainder_ns(), 171'000 - (12'000 + 3'000 + 19'000 + 112'000 + 4'000 + 5'000));
  EXPECT_EQ(t.device_gap_ns(), t.remainder_ns() - 9'000 - 4'000);
  EXPECT_TRUE(t.IsConsistent());
  t.server_total_ns = 100'000;  // stages exceed the total
  EXPECT_FALSE(t.IsConsistent());
  t = Sample();
  t.d2h_ns = -1;
  EXPECT_FALSE(t.IsConsistent());
  t = Sample();
  t.admit_ns = 13'000;  // the stages, admit and handback exceed the total by 1 us
  EXPECT_EQ(t.device_gap_ns(), -1'000);
  EXPECT_FALSE(t.IsConsistent());
  t = Sample();
  t.handback_ns = -1;
  EXPECT_FALSE(t.IsConsistent());
  // Spans a server sent that would wrap a 64-bit sum (to 100 here) are still inconsistent, and
  // the remainder saturates instead of wrapping.
  t = Sample();
  t.server_total_ns = 100;
  t.queue_ns = std::numeric_limits<int64_t>::max();
  t.h2d_ns = std::numeric_limits<int64_t>::max();
  t.compute_ns = 2;
  t.input_stage_ns = t.d2h_ns = t.output_stage_ns = 0;
  EXPECT_FALSE(t.IsConsistent());
  EXPECT_EQ(t.remainder_ns(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.device_gap_ns(), std::numeric_limits<int64_t>::min());
  // The launch-bound rule on figures past 2^62 (launch * 5 would overflow): still 80 %.
  EXPECT_TRUE(IsLaunchBound(true, std::numeric_limits<int64_t>::max() / 2, std::numeric_limits<int64_t>::max() / 2));
  EXPECT_FALSE(IsLaunchBound(true, std::numeric_limits<int64_t>::max() / 4, std::numeric_limits<int64_t>::max() / 2));
}

TEST(RequestTimingTest, AdmitAndHandbackRoundTripAndAreZeroFromOlderServers) {
  const RequestTiming t = Sample();
  std::map<std::string, TimingParam> params;
  for (auto& p : EncodeTimingParams(t)) params[p.key] = p;
  EXPECT_EQ(params.at("timing.admit_ns").int_value, 9'000);
  EXPECT_EQ(params.at("timing.handback_ns").int_value, 4'000);
  auto decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->admit_ns, 9'000);
  EXPECT_EQ(decoded->handback_ns, 4'000);
  EXPECT_EQ(decoded->device_gap_ns(), 3'000);
  params.erase("timing.admit_ns");  // a response from a server without the fields
  params.erase("timing.handback_ns");
  decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->admit_ns, 0);
  EXPECT_EQ(decoded->handback_ns, 0);
  EXPECT_TRUE(decoded->IsConsistent());
}

TEST(RequestTimingTest, ParamsRoundTrip) {
  const RequestTiming t = Sample();
  std::map<std::string, TimingParam> params;
  for (auto& p : EncodeTimingParams(t)) params[p.key] = p;
  EXPECT_EQ(params.at("timing.queue_ns").int_value, 12'000);
  EXPECT_EQ(params.at("timing.server_total_ns").int_value, 171'000);
  EXPECT_EQ(params.at("timing.clock").string_value, "cuda_event");
  EXPECT_TRUE(params.at("timing.cold").bool_value);
  auto decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->compute_ns, t.compute_ns);
  EXPECT_EQ(decoded->launch_ns, t.launch_ns);
  EXPECT_EQ(decoded->batch_size, 8);
  EXPECT_EQ(decoded->sm_clock_mhz, 1980);
  EXPECT_EQ(decoded->idle_before_us, 250);
  EXPECT_TRUE(decoded->cold);
  EXPECT_TRUE(decoded->device_timed);
}

TEST(RequestTimingTest, CudaGraphFlagRoundTripsAndIsFalseFromOlderServers) {
  RequestTiming t = Sample();
  t.cuda_graph = true;
  std::map<std::string, TimingParam> params;
  for (auto& p : EncodeTimingParams(t)) params[p.key] = p;
  ASSERT_EQ(params.at("timing.cuda_graph").kind, TimingParam::Kind::kBool);
  auto decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->cuda_graph);
  params.erase("timing.cuda_graph");  // a response from a server without the field
  decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->cuda_graph);
  EXPECT_EQ(decoded->compute_ns, t.compute_ns);
}

TEST(RequestTimingTest, ExactDeviceTimingFlagRoundTripsAndIsFalseFromOlderServers) {
  RequestTiming t = Sample();
  t.exact_device_timing = true;
  std::map<std::string, TimingParam> params;
  for (auto& p : EncodeTimingParams(t)) params[p.key] = p;
  ASSERT_EQ(params.at("timing.exact_device_timing").kind, TimingParam::Kind::kBool);
  auto decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->exact_device_timing);
  EXPECT_FALSE(decoded->cuda_graph);
  params.erase("timing.exact_device_timing");  // a response from a server without the field
  decoded = DecodeFrom(params);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->exact_device_timing);
}

TEST(RequestTimingTest, DecodeWithoutTimingIsNotFound) {
  auto decoded = DecodeTimingParams([](const std::string&) { return std::nullopt; });
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kNotFound);
}

TEST(ServerTimingTest, EncodesMillisecondsInW3cSyntaxAndParsesBack) {
  const std::string header = EncodeServerTiming(Sample());
  EXPECT_EQ(header,
            "admit;dur=0.009, queue;dur=0.012, input_stage;dur=0.003, h2d;dur=0.019, compute;dur=0.112, "
            "launch;dur=0.040, d2h;dur=0.004, output_stage;dur=0.005, handback;dur=0.004, total;dur=0.171");
  auto metrics = ParseServerTiming(header);
  ASSERT_TRUE(metrics.ok());
  ASSERT_EQ(metrics->size(), 10u);
  EXPECT_EQ((*metrics)[4].name, "compute");
  EXPECT_DOUBLE_EQ((*metrics)[4].dur_ms, 0.112);
  EXPECT_EQ(metrics->back().name, "total");
}

TEST(ServerTimingTest, RoundsToTheMicrosecondAndPadsTheFraction) {
  RequestTiming t;
  t.queue_ns = 1'499;             // 0.001 ms
  t.input_stage_ns = 1'500;       // rounds half up: 0.002
  t.compute_ns = 2'345'678'901;   // 2345.679 ms
  t.server_total_ns = 1'050'000;  // 1.050
  const std::string header = EncodeServerTiming(t);
  EXPECT_EQ(header,
            "admit;dur=0.000, queue;dur=0.001, input_stage;dur=0.002, h2d;dur=0.000, compute;dur=2345.679, "
            "launch;dur=0.000, d2h;dur=0.000, output_stage;dur=0.000, handback;dur=0.000, total;dur=1.050");
  auto metrics = ParseServerTiming(header);
  ASSERT_TRUE(metrics.ok());
  EXPECT_DOUBLE_EQ((*metrics)[4].dur_ms, 2345.679);
}

TEST(ServerTimingTest, ParsesForeignHeadersAndRejectsGarbage) {
  auto metrics = ParseServerTiming("cache;desc=\"hit\", db;dur=53.2,app");
  ASSERT_TRUE(metrics.ok());
  ASSERT_EQ(metrics->size(), 3u);
  EXPECT_EQ((*metrics)[0].dur_ms, 0);
  EXPECT_DOUBLE_EQ((*metrics)[1].dur_ms, 53.2);
  EXPECT_FALSE(ParseServerTiming("db;dur=abc").ok());
  EXPECT_FALSE(ParseServerTiming(";dur=1").ok());
}

}  // namespace
}  // namespace chronoserve
