// TracingConfig resolution from flags and OTEL_* variables: environment problems become warnings
// with tracing (or the one setting) off, never a failed start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/otlp/tracing_config.h"
#include "server/telemetry/request_spans.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/telemetry.h"
#include "tests/telemetry/otlp_test_receiver.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::EnvLookup;
using otlp::ResolveTracingConfig;
using otlp::TracingConfig;

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

// --trace-file: spans go to the file, not with --otlp-endpoint; an endpoint in the environment is
// ignored with a warning; OTEL_SDK_DISABLED turns it off as it turns off an endpoint.
TEST(TracingConfigTest, ATraceFileTakesTheSpansInPlaceOfACollector) {
  auto c = ResolveTracingConfig("", "0.1.0", Env({}), "chronoserve", "/tmp/spans.jsonl");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->file, "/tmp/spans.jsonl");
  EXPECT_EQ(c->exporter.endpoint, "");
  EXPECT_TRUE(c->warnings.empty());

  auto both = ResolveTracingConfig("collector:4317", "0.1.0", Env({}), "chronoserve", "/tmp/spans.jsonl");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(both.status().message(),
            "--trace-file '/tmp/spans.jsonl' and --otlp-endpoint 'collector:4317' both name where spans go; give one");

  auto env = ResolveTracingConfig("", "0.1.0", Env({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://otel:4317"},
                                                    {"OTEL_SERVICE_NAME", "svc"}}),
                                  "chronoserve", "/tmp/spans.jsonl");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->file, "/tmp/spans.jsonl");
  EXPECT_EQ(env->exporter.resource.service_name, "svc") << "the resource variables still apply";
  EXPECT_THAT(env->warnings, ::testing::ElementsAre("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT='http://otel:4317' is "
                                                    "ignored: --trace-file '/tmp/spans.jsonl' takes the spans"));

  auto off = ResolveTracingConfig("", "0.1.0", Env({{"OTEL_SDK_DISABLED", "true"}}), "chronoserve", "/tmp/spans.jsonl");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->enabled);
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
  // A malformed --otlp-endpoint is an error: the user typed it.
  EXPECT_FALSE(ResolveTracingConfig("no-port", "", Env({})).ok());
  EXPECT_FALSE(ResolveTracingConfig("h:99999", "", Env({})).ok());
  EXPECT_FALSE(ResolveTracingConfig("http://h:4317/v1/traces", "", Env({})).ok());
  // The port is digits alone; an IPv6 host goes in brackets (gRPC would read ::1:4317 as an address
  // on its default port).
  for (const char* bad : {"::1:4317", "h:+4317", "h: 4317", "h:4317 ", "h:004317", "[::1:4317", ":4317", "[]:4317"}) {
    const auto refused = ResolveTracingConfig(bad, "", Env({}));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("an IPv6 host in brackets")) << bad;
  }
  for (const char* good : {"[::1]:4317", "http://[fe80::1]:4317/", "collector.example:4317", "10.0.0.7:65535"}) {
    const auto accepted = ResolveTracingConfig(good, "", Env({}));
    ASSERT_TRUE(accepted.ok()) << good << ": " << accepted.status();
  }
  EXPECT_EQ(ResolveTracingConfig("[::1]:4317", "", Env({}))->exporter.endpoint, "[::1]:4317");
  // Even when the environment disables tracing: the flag is still wrong.
  EXPECT_FALSE(ResolveTracingConfig("no-port", "", Env({{"OTEL_SDK_DISABLED", "true"}})).ok());
  EXPECT_FALSE(ResolveTracingConfig("no-port", "", Env({{"OTEL_TRACES_EXPORTER", "none"}})).ok());
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_SDK_DISABLED", "true"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->enabled) << "a good flag with tracing disabled: off";
  // A bad OTEL_BSP_* value keeps its default, with a warning.
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_BSP_SCHEDULE_DELAY", "-5"}, {"OTEL_BSP_MAX_QUEUE_SIZE", "64"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->processor.schedule_delay, absl::Seconds(5));
  EXPECT_EQ(c->processor.max_queue_size, 64u);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_BSP_SCHEDULE_DELAY='-5'"));
  // 0 is a value, as the spec's Duration and Timeout types say: no delay, no export time limit; the
  // sizes stay positive.
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_BSP_SCHEDULE_DELAY", "0"}, {"OTEL_BSP_EXPORT_TIMEOUT", "0"},
                                                      {"OTEL_BSP_MAX_QUEUE_SIZE", "0"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->processor.schedule_delay, absl::ZeroDuration());
  EXPECT_EQ(c->processor.export_timeout, absl::InfiniteDuration());
  EXPECT_EQ(c->processor.max_queue_size, 2048u);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_BSP_MAX_QUEUE_SIZE='0' is not a positive integer"));
  // OTEL_SDK_DISABLED is a Boolean: anything but true (any case) is false, with a warning.
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_SDK_DISABLED", "yes"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_SDK_DISABLED='yes' is not true or false; read as false"));
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_SDK_DISABLED", "FALSE"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled);
  EXPECT_TRUE(c->warnings.empty());
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_SDK_DISABLED", "True"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->enabled);
}

// With no destination at start (tracing may be turned on later by TraceSetting's trace_file), the
// settings' problems are kept apart, to be logged when it is; disabled, there is nothing to keep.
TEST(TracingConfigTest, SettingWarningsAreKeptForTracingTurnedOnLater) {
  auto off = ResolveTracingConfig("", "", Env({{"OTEL_BSP_SCHEDULE_DELAY", "-5"}}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->enabled);
  EXPECT_TRUE(off->warnings.empty());
  ASSERT_EQ(off->setting_warnings.size(), 1u);
  EXPECT_THAT(off->setting_warnings[0], ::testing::HasSubstr("OTEL_BSP_SCHEDULE_DELAY='-5'"));
  auto disabled = ResolveTracingConfig("", "", Env({{"OTEL_BSP_SCHEDULE_DELAY", "-5"}, {"OTEL_SDK_DISABLED", "true"}}));
  ASSERT_TRUE(disabled.ok());
  EXPECT_TRUE(disabled->setting_warnings.empty());
  auto small = ResolveTracingConfig("", "", Env({{"OTEL_BSP_MAX_QUEUE_SIZE", "4"}}));
  ASSERT_TRUE(small.ok());
  RequireQueueSize(16, &*small);
  EXPECT_TRUE(small->warnings.empty());
  ASSERT_EQ(small->setting_warnings.size(), 1u);
  EXPECT_THAT(small->setting_warnings[0], ::testing::HasSubstr("OTEL_BSP_MAX_QUEUE_SIZE=4 cannot hold"));
  // An environment whose endpoint turns tracing off (another exporter, another protocol, an endpoint
  // that is none) keeps them too: a trace_file may still turn tracing on.
  for (const std::map<std::string, std::string>& off_env : std::vector<std::map<std::string, std::string>>{
           {{"OTEL_TRACES_EXPORTER", "console"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"}},
           {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318"}},
           {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317/v1/traces"}}}) {
    std::map<std::string, std::string> env = off_env;
    env["OTEL_BSP_MAX_QUEUE_SIZE"] = "abc";
    auto c = ResolveTracingConfig("", "", Env(env));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE(c->enabled) << env.begin()->first;
    ASSERT_EQ(c->setting_warnings.size(), 1u) << env.begin()->first;
    EXPECT_THAT(c->setting_warnings[0], ::testing::HasSubstr("OTEL_BSP_MAX_QUEUE_SIZE"));
  }
}

TEST(TracingConfigTest, AnotherOtlpProtocolInTheEnvironmentTurnsTracingOffWithAWarning) {
  // Set up for http/protobuf: the traces endpoint carries a path, the protocol says so.
  auto c = ResolveTracingConfig("", "0.1.0",
                                Env({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://otel:4318/v1/traces"},
                                     {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}}));
  ASSERT_TRUE(c.ok()) << c.status();  // the server still starts
  EXPECT_FALSE(c->enabled);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_EXPORTER_OTLP_PROTOCOL='http/protobuf'"));
  // The traces-specific protocol wins over the general one.
  c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"},
                                        {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                                        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json'"));
  c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"},
                                        {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
                                        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->exporter.endpoint, "otel:4317");
  EXPECT_TRUE(c->warnings.empty());
  // The --otlp-endpoint flag is OTLP/gRPC whatever the environment says.
  c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enabled);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(TracingConfigTest, AnEnvironmentEndpointNotUsableForGrpcTurnsTracingOffWithAWarning) {
  for (const char* var : {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}) {
    for (const char* endpoint : {"http://otel:4318/v1/traces", "otel", "otel:99999"}) {
      auto c = ResolveTracingConfig("", "", Env({{var, endpoint}}));
      ASSERT_TRUE(c.ok()) << var << "=" << endpoint << ": " << c.status();
      EXPECT_FALSE(c->enabled) << var << "=" << endpoint;
      ASSERT_EQ(c->warnings.size(), 1u) << var << "=" << endpoint;
      EXPECT_THAT(c->warnings[0], ::testing::HasSubstr(absl::StrCat(var, "='", endpoint, "'")));
    }
  }
  // Protocol grpc, stated: as if unset.
  auto c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel:4317/"},
                                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enabled);
  EXPECT_TRUE(c->exporter.use_tls);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(TracingConfigTest, ResourceAttributesArePercentDecodedAndTheLastOfAKeyWins) {
  auto c = ResolveTracingConfig(
      "collector:4317", "0.1.0",
      Env({{"OTEL_RESOURCE_ATTRIBUTES",
            "team=infer%2Cml, note=a%3Db%20c, service.version=2.0-rc%2B1, team=ml%2Fgpu, service.name=svc%20a"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->exporter.resource.service_name, "svc a");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"team", "ml/gpu"}, {"note", "a=b c"}, {"service.version", "2.0-rc+1"}};
  EXPECT_EQ(c->exporter.resource.attributes, want);
}

TEST(TracingConfigTest, MalformedResourceAttributesAreDiscardedWholeWithAWarning) {
  for (const char* value : {"team=ml,lonely", "team=ml,bad=%zz", "team=ml,=v", "team=ml,cut=50%"}) {
    auto c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_RESOURCE_ATTRIBUTES", value}}));
    ASSERT_TRUE(c.ok()) << value;
    EXPECT_TRUE(c->enabled) << value;
    EXPECT_TRUE(c->exporter.resource.attributes.empty()) << value;
    EXPECT_EQ(c->exporter.resource.service_name, "chronoserve") << value;
    ASSERT_EQ(c->warnings.size(), 1u) << value;
    EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_RESOURCE_ATTRIBUTES"));
  }
}


using Headers = std::vector<std::pair<std::string, std::string>>;

TEST(TracingConfigTest, HeadersAreParsedPercentDecodedAndLowerCased) {
  const struct {
    std::map<std::string, std::string> env;
    Headers want;
  } cases[] = {
      {{{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret"}}, {{"api-key", "s3cret"}}},
      {{{"OTEL_EXPORTER_OTLP_HEADERS", " Authorization = Basic%20dXNlcjpwYXNz , X-Tenant=a%2Cb%3Dc "}},
       {{"authorization", "Basic dXNlcjpwYXNz"}, {"x-tenant", "a,b=c"}}},
      {{{"OTEL_EXPORTER_OTLP_HEADERS", "k=1,K=2,,other="}}, {{"k", "2"}, {"other", ""}}},
      // The traces-specific variable wins, whole (no merge).
      {{{"OTEL_EXPORTER_OTLP_HEADERS", "generic=1,shared=g"}, {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "shared=t"}},
       {{"shared", "t"}}},
      {{{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "only=traces"}}, {{"only", "traces"}}},
      {{}, {}},
  };
  for (const auto& c : cases) {
    std::map<std::string, std::string> env = c.env;
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "collector:4317";
    auto config = ResolveTracingConfig("", "", Env(env));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->exporter.headers, c.want) << ::testing::PrintToString(c.env);
    EXPECT_TRUE(config->warnings.empty()) << ::testing::PrintToString(config->warnings);
  }
}

TEST(TracingConfigTest, MalformedHeadersAreDiscardedWholeWithAWarningThatHidesValues) {
  for (const char* value : {"novalue", "=v", "ok=1,bad%zz=2", "ok=1,v=%4", "sp ace=1", "grpc-timeout=1S",
                            "key-bin=AAEC", "nl=a%0Ab", "ok=1,=secret-token",
                            "authorization Bearer secret-token", "ok=1,secret-token"}) {
    auto c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_EXPORTER_OTLP_HEADERS", value}}));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->exporter.headers.empty()) << value;
    ASSERT_EQ(c->warnings.size(), 1u) << value;
    EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("OTEL_EXPORTER_OTLP_HEADERS ignored")) << value;
    EXPECT_THAT(c->warnings[0], ::testing::Not(::testing::HasSubstr("secret-token")));
  }
}

TEST(TracingConfigTest, TimeoutIsTheExportAttemptsDeadline) {
  const struct {
    std::map<std::string, std::string> env;
    absl::Duration want;
    bool warns;
  } cases[] = {
      {{}, absl::Seconds(10), false},  // the spec's default
      {{{"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}}, absl::Milliseconds(2500), false},
      {{{"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}, {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "750"}},
       absl::Milliseconds(750), false},
      {{{"OTEL_EXPORTER_OTLP_TIMEOUT", "0"}}, absl::InfiniteDuration(), false},  // the spec's Timeout: no limit
      {{{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-3"}}, absl::Seconds(10), true},
      {{{"OTEL_EXPORTER_OTLP_TIMEOUT", "5s"}}, absl::Seconds(10), true},
  };
  for (const auto& c : cases) {
    auto config = ResolveTracingConfig("collector:4317", "", Env(c.env));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->exporter.timeout, c.want) << ::testing::PrintToString(c.env);
    EXPECT_EQ(config->warnings.size(), c.warns ? 1u : 0u) << ::testing::PrintToString(c.env);
  }
}

// OTEL_TRACES_EXPORTER names the exporters wanted: without otlp among them, an endpoint from the
// environment is not used (it may be meant for another SDK's exporter); the flag still is.
TEST(TracingConfigTest, TracesExporterWithoutOtlpTurnsEnvironmentTracingOff) {
  for (const char* exporters : {"console", "zipkin,logging"}) {
    auto c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"},
                                               {"OTEL_TRACES_EXPORTER", exporters}}));
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE(c->enabled) << exporters;
    ASSERT_EQ(c->warnings.size(), 1u) << exporters;
    EXPECT_THAT(c->warnings[0], ::testing::HasSubstr(absl::StrCat("OTEL_TRACES_EXPORTER='", exporters,
                                                                  "' does not list otlp")));
  }
  for (const char* exporters : {"otlp", "console, OTLP"}) {
    auto c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317"},
                                               {"OTEL_TRACES_EXPORTER", exporters}}));
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->enabled) << exporters;
    EXPECT_TRUE(c->warnings.empty()) << exporters;
  }
  auto flag = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_TRACES_EXPORTER", "console"}}));
  ASSERT_TRUE(flag.ok());
  EXPECT_TRUE(flag->enabled) << "--otlp-endpoint is always OTLP/gRPC";
}

TEST(TracingConfigTest, CertificateVariablesAreNamedInAWarningAndChangeNothing) {
  for (const char* name : {"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                           "OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"}) {
    for (const char* endpoint : {"http://collector:4317", "https://collector:4317"}) {
      auto c = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", endpoint}, {name, "/etc/ca.pem"}}));
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_TRUE(c->enabled);
      EXPECT_EQ(c->exporter.use_tls, absl::StartsWith(endpoint, "https://")) << name << " " << endpoint;
      ASSERT_EQ(c->warnings.size(), 1u) << name;
      EXPECT_THAT(c->warnings[0], ::testing::HasSubstr(absl::StrCat(name, "='/etc/ca.pem' is ignored")));
      EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("system's root certificates"));
    }
  }
  // Only when tracing is on.
  auto off = ResolveTracingConfig("", "", Env({{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"}}));
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->warnings.empty());
}

// The spec: an endpoint from the environment without http:// or https:// gets TLS unless
// OTEL_EXPORTER_OTLP_[TRACES_]INSECURE is true (so headers holding credentials never go out in the
// clear by default); a scheme decides alone; --otlp-endpoint HOST:PORT stays plaintext.
TEST(TracingConfigTest, ASchemelessEnvironmentEndpointUsesTlsUnlessInsecure) {
  const struct {
    std::map<std::string, std::string> env;
    bool tls;
    const char* warning;  // nullptr: none
  } cases[] = {
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}}, true, nullptr},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "true"}}, false, nullptr},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "TRUE"}}, false, nullptr},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "false"}}, true, nullptr},
      // The traces-specific variable wins.
      {{{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4317"},
        {"OTEL_EXPORTER_OTLP_INSECURE", "false"},
        {"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true"}},
       false,
       nullptr},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "yes"}},
       true,
       "OTEL_EXPORTER_OTLP_INSECURE='yes' is not true or false; using false (TLS)"},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "false"}},
       false,
       "OTEL_EXPORTER_OTLP_INSECURE='false' has no effect: OTEL_EXPORTER_OTLP_ENDPOINT names its scheme"},
      {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"}, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true"}},
       true,
       "OTEL_EXPORTER_OTLP_TRACES_INSECURE='true' has no effect"},
  };
  for (const auto& c : cases) {
    auto config = ResolveTracingConfig("", "", Env(c.env));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_TRUE(config->enabled) << ::testing::PrintToString(c.env);
    EXPECT_EQ(config->exporter.endpoint, "collector:4317");
    EXPECT_EQ(config->exporter.use_tls, c.tls) << ::testing::PrintToString(c.env);
    if (c.warning == nullptr) {
      EXPECT_TRUE(config->warnings.empty()) << ::testing::PrintToString(config->warnings);
    } else {
      ASSERT_EQ(config->warnings.size(), 1u) << ::testing::PrintToString(c.env);
      EXPECT_THAT(config->warnings[0], ::testing::HasSubstr(c.warning));
    }
  }
  // The flag: plaintext without a scheme; INSECURE is named as having no effect on it.
  auto flag = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_EXPORTER_OTLP_INSECURE", "false"}}));
  ASSERT_TRUE(flag.ok());
  EXPECT_FALSE(flag->exporter.use_tls);
  ASSERT_EQ(flag->warnings.size(), 1u);
  EXPECT_THAT(flag->warnings[0], ::testing::HasSubstr("has no effect on --otlp-endpoint"));
}

// OTLP's strings are proto3 strings: a value that decodes to bytes that are not UTF-8 would make a
// collector refuse every export carrying the resource. Discarded whole, like a malformed value.
TEST(TracingConfigTest, ResourceValuesThatAreNotUtf8AreDiscardedWithAWarning) {
  for (const char* value : {"team=ml,env=%FF", "team=ml,cut=%C3", "team=ml,surrogate=%ED%A0%80",
                            "team=ml,overlong=%C0%AF", "%FE=x"}) {
    auto c = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_RESOURCE_ATTRIBUTES", value}}));
    ASSERT_TRUE(c.ok()) << value;
    EXPECT_TRUE(c->exporter.resource.attributes.empty()) << value;
    ASSERT_EQ(c->warnings.size(), 1u) << value;
    EXPECT_THAT(c->warnings[0], ::testing::HasSubstr("does not decode to UTF-8")) << value;
  }
  // Well-formed multi-byte text is kept: 2, 3 and 4 bytes.
  auto ok = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_RESOURCE_ATTRIBUTES", "site=Z%C3%BCrich %E2%82%AC %F0%9F%9A%80"}}));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->warnings.empty()) << ::testing::PrintToString(ok->warnings);
  ASSERT_EQ(ok->exporter.resource.attributes.size(), 1u);
  EXPECT_EQ(ok->exporter.resource.attributes[0].second, "Z\xc3\xbcrich \xe2\x82\xac \xf0\x9f\x9a\x80");
  // OTEL_SERVICE_NAME likewise: the default name stays.
  auto name = ResolveTracingConfig("collector:4317", "", Env({{"OTEL_SERVICE_NAME", "svc\xff"}}), "chronoserve");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->exporter.resource.service_name, "chronoserve");
  ASSERT_EQ(name->warnings.size(), 1u);
  EXPECT_THAT(name->warnings[0], ::testing::HasSubstr("OTEL_SERVICE_NAME='svc\\xff' is not UTF-8"));
}

TEST(TracingConfigTest, AQueueSmallerThanOneRequestsSpansIsRaisedWithAWarning) {
  const struct {
    size_t configured, want;
    bool warns;
  } cases[] = {{1, 9, true}, {8, 9, true}, {9, 9, false}, {64, 64, false}};  // 1 + kMaxChildSpans = 9
  for (const auto& c : cases) {
    auto config = ResolveTracingConfig(
        "collector:4317", "", Env({{"OTEL_BSP_MAX_QUEUE_SIZE", std::to_string(c.configured)}}));
    ASSERT_TRUE(config.ok()) << config.status();
    otlp::RequireQueueSize(1 + kMaxChildSpans, &*config);
    EXPECT_EQ(config->processor.max_queue_size, c.want) << c.configured;
    EXPECT_LE(config->processor.max_export_batch_size, config->processor.max_queue_size);
    // The export batch the small queue had capped grows with it (the default batch is 512).
    if (c.warns) EXPECT_EQ(config->processor.max_export_batch_size, c.want) << c.configured;
    ASSERT_EQ(config->warnings.size(), c.warns ? 1u : 0u) << c.configured;
    if (c.warns) {
      EXPECT_THAT(config->warnings[0],
                  ::testing::HasSubstr(absl::StrCat("OTEL_BSP_MAX_QUEUE_SIZE=", c.configured, " ")));
      EXPECT_THAT(config->warnings[0], ::testing::HasSubstr("using 9"));
    }
  }
}

// OTEL_BSP_MAX_QUEUE_SIZE=2 used to drop every request's spans (7, queued together) without a word.
TEST(TracingConfigTest, ATinyQueueStillExportsEveryRequest) {
  auto receiver = chronoserve::testing::OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto config = ResolveTracingConfig((*receiver)->endpoint(), "", Env({{"OTEL_BSP_MAX_QUEUE_SIZE", "2"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  TelemetryOptions options;
  options.metrics.enabled = false;
  options.gpu.enabled = false;
  options.tracing = *config;
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  ASSERT_EQ((*telemetry)->tracing().warnings.size(), 1u);
  EXPECT_THAT((*telemetry)->tracing().warnings[0], ::testing::HasSubstr("OTEL_BSP_MAX_QUEUE_SIZE=2 "));
  ASSERT_TRUE((*telemetry)->Start().ok());
  ModelSpec spec;
  spec.name = "m";
  spec.version = 1;
  InferRequest request;  // a request that ran every stage
  const int64_t now = SteadyClock::Get()->NowNs();
  request.timeline.received_ns = now - 90'000;
  request.timeline.enqueued_ns = now - 80'000;
  BatchTiming batch;
  batch.dequeued_ns = now - 60'000;
  batch.staged_ns = now - 50'000;
  batch.h2d_ns = 5'000;
  batch.compute_ns = 20'000;
  batch.d2h_ns = 3'000;
  batch.gpu_done_ns = now - 20'000;
  batch.batch_size = 1;
  request.timeline.SetBatch(batch, true);
  request.timeline.output_done_ns = now - 10'000;
  (*telemetry)->OnRequestDone(spec, &request, request.timeline.Finalize(now), absl::OkStatus());
  (*telemetry)->Shutdown(absl::Now() + absl::Seconds(30));
  EXPECT_TRUE((*receiver)->WaitForSpans(1 + kMaxChildSpans, absl::Seconds(30)));
  EXPECT_EQ((*receiver)->spans().size(), 1 + kMaxChildSpans);
  const SpanProcessorStats s = (*telemetry)->span_processor()->stats();
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.exported, 1 + kMaxChildSpans);
}

}  // namespace
}  // namespace chronoserve::server::telemetry
