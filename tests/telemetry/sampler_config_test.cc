// Sampler (OTEL_TRACES_SAMPLER rules) and TracingConfig resolution from flags and OTEL_* variables.
#include <gtest/gtest.h>

#include <map>

#include "server/telemetry/request_tracer.h"
#include "server/telemetry/sampler.h"
#include "common/otlp/tracing_config.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::EnvLookup;
using otlp::ResolveTracingConfig;
using otlp::TracingConfig;

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

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(TracingConfigTest, DisabledWithoutEndpoint) {
  auto c = ResolveTracingConfig("", "0.1.0", Env({}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled);
  EXPECT_EQ(c->exporter.resource.service_name, "chronoserve");
  EXPECT_EQ(c->processor.max_queue_size, 2048u);
  EXPECT_EQ(c->processor.max_export_batch_size, 512u);
  EXPECT_EQ(c->processor.schedule_delay, absl::Seconds(5));
  EXPECT_EQ(c->processor.export_timeout, absl::Seconds(30));
}

TEST(TracingConfigTest, FlagBeatsEnvironment) {
  auto c = ResolveTracingConfig("collector:4317", "0.1.0",
                                Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4317"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->exporter.endpoint, "collector:4317");
  EXPECT_FALSE(c->exporter.use_tls);
}

TEST(TracingConfigTest, ReadsTheStandardVariables) {
  auto c = ResolveTracingConfig("", "0.1.0",
                                Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://jaeger.example:4317/"},
                                     {"OTEL_SERVICE_NAME", "inference-a"},
                                     {"OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored, deployment.environment=lab"},
                                     {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                                     {"OTEL_TRACES_SAMPLER_ARG", "0.1"},
                                     {"OTEL_BSP_MAX_QUEUE_SIZE", "100"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->exporter.endpoint, "jaeger.example:4317");
  EXPECT_TRUE(c->exporter.use_tls);
  EXPECT_EQ(c->exporter.resource.service_name, "inference-a");  // OTEL_SERVICE_NAME wins
  ASSERT_EQ(c->exporter.resource.attributes.size(), 1u);
  EXPECT_EQ(c->exporter.resource.attributes[0].first, "deployment.environment");
  EXPECT_EQ(c->sampler, "parentbased_traceidratio");
  EXPECT_EQ(c->sampler_arg, "0.1");
  EXPECT_EQ(c->processor.max_queue_size, 100u);
  EXPECT_EQ(c->processor.max_export_batch_size, 100u);  // never above the queue
}

TEST(TracingConfigTest, SdkDisabledAndBadValues) {
  auto c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "h:1"}, {"OTEL_SDK_DISABLED", "true"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled);
  EXPECT_FALSE(ResolveTracingConfig("no-port", "", Env({})).ok());
  EXPECT_FALSE(ResolveTracingConfig("h:99999", "", Env({})).ok());
  EXPECT_FALSE(ResolveTracingConfig("http://h:4317/v1/traces", "", Env({})).ok());
  EXPECT_FALSE(ResolveTracingConfig("", "", Env({{"OTEL_BSP_SCHEDULE_DELAY", "-5"}})).ok());
}

}  // namespace
}  // namespace chronoserve::server::telemetry
