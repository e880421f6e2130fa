// Sampler (OTEL_TRACES_SAMPLER rules), from flags and from the environment: a bad value from the
// environment becomes a warning with the default sampler, never a failed start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/sampler.h"
#include "server/telemetry/telemetry.h"

namespace chronoserve::server::telemetry {
namespace {

TraceParent Parent(bool sampled) {
  auto p = ParseTraceparent(sampled ? "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                                    : "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  return *p;
}

TEST(SamplerTest, DefaultIsParentBasedAlwaysOn) {
  auto s = Sampler::Create("", "");
  ASSERT_TRUE(s.ok());
  const TraceParent yes = Parent(true), no = Parent(false);
  EXPECT_TRUE(s->ShouldSample(nullptr, NewTraceId()));
  EXPECT_TRUE(s->ShouldSample(&yes, yes.trace_id));
  EXPECT_FALSE(s->ShouldSample(&no, no.trace_id));
}

TEST(SamplerTest, NonParentBasedIgnoresTheCaller) {
  const TraceParent no = Parent(false);
  EXPECT_TRUE(Sampler::Create("always_on", "")->ShouldSample(&no, no.trace_id));
  EXPECT_FALSE(Sampler::Create("always_off", "")->ShouldSample(nullptr, NewTraceId()));
}

TEST(SamplerTest, RatioSamplesAboutThatFractionOfNewTraces) {
  auto s = Sampler::Create("parentbased_traceidratio", "0.25");
  ASSERT_TRUE(s.ok());
  int sampled = 0;
  constexpr int kTraces = 20000;
  for (int i = 0; i < kTraces; ++i) sampled += s->ShouldSample(nullptr, NewTraceId()) ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(sampled) / kTraces, 0.25, 0.02);
  const TraceParent yes = Parent(true);
  EXPECT_TRUE(s->ShouldSample(&yes, yes.trace_id));  // the caller decides
  // The decision is a function of the trace id: stable across calls.
  const TraceId id = NewTraceId();
  EXPECT_EQ(s->ShouldSample(nullptr, id), s->ShouldSample(nullptr, id));
  EXPECT_FALSE(Sampler::Create("traceidratio", "0")->ShouldSample(nullptr, NewTraceId()));
}

// OpenTelemetry's TraceIdRatioBased rule: R = the trace id's 7 rightmost bytes, sampled when
// R >= 2^56 - ratio * 2^56. The 9 leftmost bytes (W3C level 2 promises no randomness there) play
// no part.
TraceId IdWithRandomness(uint64_t r, uint8_t left_fill) {
  TraceId id;
  for (int i = 0; i < 9; ++i) id[i] = left_fill;
  for (int i = 15; i >= 9; --i, r >>= 8) id[i] = static_cast<uint8_t>(r & 0xff);
  return id;
}

TEST(SamplerTest, RatioDecidesOnTheTraceIdsRightmost56Bits) {
  constexpr uint64_t kHalf = uint64_t{1} << 55;
  EXPECT_EQ(TraceRandomness(IdWithRandomness(0x12345678abcdefULL, 0xa5)), 0x12345678abcdefULL);
  EXPECT_EQ(RejectionThreshold(0.5), kHalf);
  EXPECT_EQ(RejectionThreshold(0.25), 3 * (kHalf >> 1));
  EXPECT_EQ(RejectionThreshold(1.0), 0u);
  EXPECT_EQ(RejectionThreshold(0.0), uint64_t{1} << 56);
  EXPECT_EQ(RejectionThreshold(std::ldexp(1.0, -56)), (uint64_t{1} << 56) - 1);  // the spec's least ratio
  auto s = Sampler::Create("traceidratio", "0.5");
  ASSERT_TRUE(s.ok());
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0x7f}, uint8_t{0xff}}) {
    SCOPED_TRACE(static_cast<int>(fill));
    EXPECT_FALSE(s->ShouldSample(nullptr, IdWithRandomness(kHalf - 1, fill)));
    EXPECT_TRUE(s->ShouldSample(nullptr, IdWithRandomness(kHalf, fill)));
    EXPECT_TRUE(s->ShouldSample(nullptr, IdWithRandomness((uint64_t{1} << 56) - 1, fill)));
    EXPECT_FALSE(s->ShouldSample(nullptr, IdWithRandomness(1, fill)));
  }
  // A higher ratio samples every trace a lower one does.
  auto low = Sampler::Create("traceidratio", "0.1"), high = Sampler::Create("traceidratio", "0.3");
  for (int i = 0; i < 2000; ++i) {
    const TraceId id = NewTraceId();
    if (low->ShouldSample(nullptr, id)) EXPECT_TRUE(high->ShouldSample(nullptr, id));
  }
}

TEST(SamplerTest, RejectsBadConfig) {
  EXPECT_FALSE(Sampler::Create("sometimes", "").ok());
  EXPECT_FALSE(Sampler::Create("traceidratio", "1.5").ok());
  EXPECT_FALSE(Sampler::Create("traceidratio", "half").ok());
}

// From the environment a bad value is a warning and is ignored, as the SDK rules ask; the start never fails.
TEST(SamplerTest, FromEnvironmentWarnsAndIgnoresBadValues) {
  struct Row {
    std::string name, arg, used;
    std::vector<std::string> warnings;
  };
  const std::vector<Row> rows = {
      {"", "", "parentbased_always_on", {}},
      {"traceidratio", "0.5", "traceidratio{0.5}", {}},
      {"sometimes", "", "parentbased_always_on", {"OTEL_TRACES_SAMPLER 'sometimes' is not one of"}},
      {"traceidratio", "1.5", "traceidratio{1}", {"OTEL_TRACES_SAMPLER_ARG '1.5' is not a ratio in [0, 1]"}},
      {"parentbased_traceidratio", "half", "parentbased_traceidratio{1}", {"OTEL_TRACES_SAMPLER_ARG 'half'"}},
      {"sometimes", "-1", "parentbased_always_on", {"OTEL_TRACES_SAMPLER 'sometimes'"}},
      {"always_on", "abc", "always_on", {}},  // takes no ratio: the value is not read
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat("OTEL_TRACES_SAMPLER='", row.name, "' OTEL_TRACES_SAMPLER_ARG='", row.arg, "'"));
    std::vector<std::string> warnings;
    const Sampler s = Sampler::FromEnvironment(row.name, row.arg, &warnings);
    EXPECT_EQ(s.Description(), row.used);
    ASSERT_EQ(warnings.size(), row.warnings.size()) << ::testing::PrintToString(warnings);
    for (size_t i = 0; i < warnings.size(); ++i) {
      EXPECT_THAT(warnings[i], ::testing::HasSubstr(row.warnings[i]));
      EXPECT_THAT(warnings[i], ::testing::HasSubstr("ignored"));
    }
  }
  std::vector<std::string> warnings;
  const TraceParent no = Parent(false);
  EXPECT_TRUE(Sampler::FromEnvironment("sometimes", "", &warnings).ShouldSample(nullptr, NewTraceId()));
  EXPECT_FALSE(Sampler::FromEnvironment("sometimes", "", &warnings).ShouldSample(&no, no.trace_id));
}

// The server's wiring: a bad sampler from the environment starts tracing with the default sampler
// and a warning for Start to log, where it used to fail the start (exit 2).
TEST(SamplerTest, TelemetryStartsWithTheDefaultSamplerAndAWarningForABadOne) {
  TelemetryOptions options;
  options.metrics.enabled = false;
  options.gpu.enabled = false;
  options.tracing.enabled = true;
  options.tracing.exporter.endpoint = "127.0.0.1:1";  // nothing is exported in this test
  options.tracing.sampler = "sometimes";
  options.tracing.sampler_arg = "0.5";
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  EXPECT_EQ((*telemetry)->tracing().sampler, "parentbased_always_on");
  ASSERT_EQ((*telemetry)->tracing().warnings.size(), 1u) << ::testing::PrintToString((*telemetry)->tracing().warnings);
  EXPECT_THAT((*telemetry)->tracing().warnings[0], ::testing::HasSubstr("OTEL_TRACES_SAMPLER 'sometimes'"));

  options.tracing.sampler = "parentbased_traceidratio";
  options.tracing.sampler_arg = "0.25";
  auto good = Telemetry::Create(options);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)->tracing().sampler, "parentbased_traceidratio{0.25}");
  EXPECT_TRUE((*good)->tracing().warnings.empty());
}

}  // namespace
}  // namespace chronoserve::server::telemetry
