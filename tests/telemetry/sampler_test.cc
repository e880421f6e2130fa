// Sampler (OTEL_TRACES_SAMPLER rules), from flags and from the environment: a bad value from the
// environment becomes a warning with the default sampler, never a failed start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
