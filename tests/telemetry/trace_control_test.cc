// TraceControl: Triton's trace settings over the start sampler. What each key reads at start, what a
// change does to the decision (trace_level, trace_rate, trace_count; server-wide and per model),
// clearing, all-or-nothing refusals, and trace_count under concurrent requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "server/telemetry/request_tracer.h"
#include "server/telemetry/trace_control.h"

namespace chronoserve::server::telemetry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Sampler Make(const std::string& name, const std::string& arg = "") {
  auto s = Sampler::Create(name, arg);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// A trace id whose low 8 bytes are `low` (the ratio rule reads the 7 rightmost).
TraceId IdWithLow(uint64_t low) {
  TraceId id{};
  id[0] = 0x4b;
  for (int i = 0; i < 8; ++i) id[15 - i] = static_cast<uint8_t>(low >> (8 * i));
  return id;
}

TraceParent Parent(bool sampled) {
  return *ParseTraceparent(sampled ? "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                                   : "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
}

std::string Get(const absl::StatusOr<TraceSettingsMap>& m, const std::string& key) {
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "?";
  EXPECT_EQ(m->at(key).size(), 1u) << key;
  return m->at(key)[0];
}

TEST(TraceControlTest, StartSettingsReadAsTritonsFromTheSampler) {
  TraceControl c(Make("parentbased_traceidratio", "0.25"), /*collector=*/true);
  const auto s = c.Update("", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->size(), 6u);
  EXPECT_THAT(s->at("trace_level"), ElementsAre("TIMESTAMPS"));
  EXPECT_THAT(s->at("trace_rate"), ElementsAre("4"));
  EXPECT_THAT(s->at("trace_count"), ElementsAre("-1"));
  EXPECT_THAT(s->at("trace_mode"), ElementsAre("opentelemetry"));
  EXPECT_THAT(s->at("trace_file"), ElementsAre(""));
  EXPECT_THAT(s->at("log_frequency"), ElementsAre("0"));
  EXPECT_EQ(Get(TraceControl(Make("always_on"), true).Update("", {}), "trace_rate"), "1");
  EXPECT_EQ(Get(TraceControl(Make("parentbased_always_off"), true).Update("", {}), "trace_rate"), "0");
  EXPECT_EQ(Get(TraceControl(Make("traceidratio", "0.3"), true).Update("", {}), "trace_rate"), "3") << "nearest";
}

TEST(TraceControlTest, WithoutACollectorEverythingReadsOffAndNothingChanges) {
  TraceControl c(Make(""), /*collector=*/false);
  EXPECT_EQ(Get(c.Update("", {}), "trace_level"), "OFF");
  EXPECT_EQ(Get(c.Update("mlp", {}), "trace_level"), "OFF");
  const auto refused = c.Update("", {{"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("tracing is off: the server was started without a trace collector (--otlp-endpoint"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("or --trace-file"));
}

TEST(TraceControlTest, TraceRateSetsNewTracesAndKeepsFollowingSampledCallers) {
  TraceControl c(Make(""), true);  // parentbased_always_on
  // TraceIdRatioBased samples a trace whose 56 rightmost bits are at or above 2^56 - ratio * 2^56.
  const TraceId low = IdWithLow(1), high = IdWithLow(0x00ffffffffffff00ULL);
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, low));
  EXPECT_EQ(Get(c.Update("", {{"trace_rate", {"2"}}}), "trace_rate"), "2");
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, high)) << "at or above half of 2^56: one in two";
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, low));
  ASSERT_TRUE(c.Update("", {{"trace_rate", {"0"}}}).ok());
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, high)) << "0: no new trace";
  const TraceParent yes = Parent(true), no = Parent(false);
  EXPECT_TRUE(c.ShouldTrace("mlp", &yes, yes.trace_id)) << "a sampled caller is still followed";
  EXPECT_FALSE(c.ShouldTrace("mlp", &no, no.trace_id));
  EXPECT_EQ(Get(c.Update("", {{"trace_rate", {}}}), "trace_rate"), "1") << "cleared: the start value";
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, low));
}

TEST(TraceControlTest, TraceLevelOffStopsEveryTraceSampledCallersToo) {
  TraceControl c(Make(""), true);
  const TraceParent yes = Parent(true);
  EXPECT_EQ(Get(c.Update("", {{"trace_level", {"OFF"}}}), "trace_level"), "OFF");
  EXPECT_FALSE(c.ShouldTrace("mlp", &yes, yes.trace_id));
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
  EXPECT_EQ(Get(c.Update("", {{"trace_level", {"TIMESTAMPS"}}}), "trace_level"), "TIMESTAMPS");
  EXPECT_TRUE(c.ShouldTrace("mlp", &yes, yes.trace_id));
}

TEST(TraceControlTest, TraceCountRecordsThatManyTracesThenNone) {
  TraceControl c(Make(""), true);
  EXPECT_EQ(Get(c.Update("", {{"trace_count", {"2"}}}), "trace_count"), "2");
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
  EXPECT_EQ(Get(c.Update("", {}), "trace_count"), "1") << "reads what is left";
  EXPECT_TRUE(c.ShouldTrace("other", nullptr, NewTraceId()));
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
  EXPECT_EQ(Get(c.Update("", {}), "trace_count"), "0");
  EXPECT_EQ(Get(c.Update("", {{"trace_count", {"-1"}}}), "trace_count"), "-1");
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
}

TEST(TraceControlTest, AModelsSettingsOverrideOnlyWhatTheyNameAndClearBackToTheServerWide) {
  TraceControl c(Make(""), true);
  const auto mlp = c.Update("mlp", {{"trace_level", {"OFF"}}});
  EXPECT_EQ(Get(mlp, "trace_level"), "OFF");
  EXPECT_EQ(Get(mlp, "trace_rate"), "1") << "the server-wide value";
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
  EXPECT_TRUE(c.ShouldTrace("resnet", nullptr, NewTraceId())) << "other models keep the server-wide settings";
  EXPECT_EQ(Get(c.Update("", {}), "trace_level"), "TIMESTAMPS");
  ASSERT_TRUE(c.Update("", {{"trace_rate", {"1000"}}}).ok());
  EXPECT_EQ(Get(c.Update("mlp", {}), "trace_rate"), "1000") << "follows a later server-wide change";
  ASSERT_TRUE(c.Update("mlp", {{"trace_count", {"1"}}, {"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"1"}}}).ok());
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, NewTraceId()));
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, NewTraceId())) << "its own count ran out";
  EXPECT_EQ(Get(c.Update("", {}), "trace_count"), "-1") << "the server-wide count untouched";
  const auto cleared = c.Update("mlp", {{"trace_count", {}}, {"trace_level", {}}, {"trace_rate", {}}});
  EXPECT_EQ(Get(cleared, "trace_count"), "-1");
  EXPECT_EQ(Get(cleared, "trace_rate"), "1000");
}

TEST(TraceControlTest, ABadSettingIsRefusedNamingItAndNothingChanges) {
  struct Row {
    std::string key;
    std::vector<std::string> values;
    std::string message;
  };
  const Row rows[] = {
      {"trace_level", {"TENSORS"}, "trace setting 'trace_level' TENSORS is not served"},
      {"trace_level", {"OFF", "TIMESTAMPS"}, "is ['OFF', 'TIMESTAMPS']; it takes OFF or TIMESTAMPS, not both"},
      {"trace_level", {"timestamps"}, "is ['timestamps']; it takes OFF or TIMESTAMPS"},
      {"trace_rate", {"1.5"},
       "trace setting 'trace_rate' is ['1.5']; it takes one whole number from 0 to 4294967295 (one new trace in N"},
      {"trace_rate", {"-1"}, "trace setting 'trace_rate' is ['-1']"},
      {"trace_rate", {" 5"}, "is [' 5']; it takes one whole number"},
      {"trace_rate", {"+3"}, "is ['+3']; it takes one whole number"},
      {"trace_rate", {"0x10"}, "is ['0x10']; it takes one whole number"},
      {"trace_rate", {"4294967296"}, "is ['4294967296']; it takes one whole number from 0 to 4294967295"},
      {"trace_rate", {"2", "3"}, "is ['2', '3']; it takes one whole number"},
      {"trace_rate", std::vector<std::string>(20000, "1"), "is ['1', '1', '1', '1', ... (20000 values)]; it takes"},
      {"trace_rate", {std::string(5000, 'A')},
       "is ['" + std::string(64, 'A') + "... (5000 bytes)']; it takes one whole number"},
      {"trace_count", {"-2"}, "trace setting 'trace_count' is ['-2']; it takes one whole number from -1 to 4294967295"},
      {"trace_file", {"/tmp/trace.json"}, "it can only be '': chronoserve sends its spans to the OTLP collector"},
      {"log_frequency", {"100"}, "trace setting 'log_frequency' is ['100']; it can only be '0'"},
      {"trace_mode", {"triton"}, "it can only be 'opentelemetry'"},
      {"trace_rat", {"2"},
       "unknown trace setting 'trace_rat'; the settings are trace_level, trace_rate, trace_count, trace_mode, "
       "trace_file, log_frequency"},
  };
  TraceControl c(Make(""), true);
  for (const Row& row : rows) {
    SCOPED_TRACE(row.key);
    TraceSettingsMap changes = {{"trace_count", {"5"}}, {"trace_level", {"OFF"}}};  // valid, not to apply either
    changes[row.key] = row.values;
    const auto refused = c.Update("mlp", changes);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr(row.message));
    EXPECT_EQ(Get(c.Update("mlp", {}), "trace_count"), "-1") << "nothing applied";
    EXPECT_EQ(Get(c.Update("mlp", {}), "trace_level"), "TIMESTAMPS");
  }
  // The read-only keys accept the values they have.
  EXPECT_TRUE(c.Update("", {{"trace_file", {""}}, {"log_frequency", {"0"}}, {"trace_mode", {"opentelemetry"}}}).ok());
}

// With --trace-file, trace_file reads its path and accepts only it; settings change as with a collector.
TEST(TraceControlTest, WithATraceFileTraceFileReadsItsPathAndStaysFixed) {
  TraceControl c(Make(""), /*collector=*/true, "/var/log/chronoserve/spans.jsonl");
  EXPECT_EQ(Get(c.Update("", {}), "trace_file"), "/var/log/chronoserve/spans.jsonl");
  EXPECT_EQ(Get(c.Update("mlp", {}), "trace_file"), "/var/log/chronoserve/spans.jsonl");
  EXPECT_EQ(Get(c.Update("", {}), "trace_level"), "TIMESTAMPS");
  EXPECT_TRUE(c.Update("", {{"trace_file", {"/var/log/chronoserve/spans.jsonl"}}, {"log_frequency", {"0"}}}).ok());
  const auto moved = c.Update("", {{"trace_file", {"/tmp/other.jsonl"}}});
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(moved.status().message()),
              HasSubstr("it can only be '/var/log/chronoserve/spans.jsonl': the spans go to the file given at start "
                        "(--trace-file)"));
  const auto split = c.Update("", {{"log_frequency", {"100"}}});
  EXPECT_THAT(std::string(split.status().message()), HasSubstr("every span goes to the one trace_file"));
  EXPECT_EQ(Get(c.Update("mlp", {{"trace_level", {"OFF"}}}), "trace_level"), "OFF");
}

// With an opener (the server's, when its spans go to a file or nowhere yet) and --trace-file-dir,
// trace_file moves the spans to a file named in the directory: opened first, then the rest of the
// request applied, all or nothing. A path, "." or ".." is refused; the current path reads as itself.
TEST(TraceControlTest, TraceFileMovesTheSpansThroughTheOpener) {
  std::vector<std::string> opened;
  absl::Status next = absl::OkStatus();
  TraceControl c(
      Make(""), /*collector=*/true, "/var/log/a.jsonl",
      [&](const std::string& path) {
        if (next.ok()) opened.push_back(path);
        return next;
      },
      "/var/spans");
  auto moved = c.Update("", {{"trace_file", {"b.jsonl"}}, {"trace_count", {"7"}}});
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(Get(moved, "trace_file"), "/var/spans/b.jsonl");
  EXPECT_EQ(Get(moved, "trace_count"), "7");
  EXPECT_THAT(opened, ElementsAre("/var/spans/b.jsonl"));
  EXPECT_TRUE(c.Update("", {{"trace_file", {"b.jsonl"}}}).ok()) << "the same file: nothing to open";
  EXPECT_TRUE(c.Update("", {{"trace_file", {"/var/spans/b.jsonl"}}}).ok()) << "the current path, as read back";
  EXPECT_THAT(opened, ElementsAre("/var/spans/b.jsonl"));

  next = absl::NotFoundError("cannot open '/var/spans/c.jsonl': Permission denied");
  auto failed = c.Update("", {{"trace_file", {"c.jsonl"}}, {"trace_count", {"9"}}});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("trace setting 'trace_file': cannot open '/var/spans/c.jsonl'"));
  EXPECT_EQ(Get(c.Update("", {}), "trace_file"), "/var/spans/b.jsonl") << "nothing applied";
  EXPECT_EQ(Get(c.Update("", {}), "trace_count"), "7");
  next = absl::OkStatus();

  for (const TraceSettingsMap& bad : std::vector<TraceSettingsMap>{{{"trace_file", {""}}},
                                                                   {{"trace_file", {"a", "b"}}},
                                                                   {{"trace_file", {"/etc/passwd"}}},
                                                                   {{"trace_file", {"../x.jsonl"}}},
                                                                   {{"trace_file", {".."}}},
                                                                   {{"trace_file", {"sub/x.jsonl"}}},
                                                                   {{"trace_file", {std::string(256, 'n')}}},
                                                                   {{"trace_file", {"x.jsonl\nI1207 forged log line"}}},
                                                                   {{"trace_file", {"\x1b[2Jx.jsonl"}}}}) {
    const auto refused = c.Update("", bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad.begin()->second.size();
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("a file name, created in --trace-file-dir '/var/spans'"));
  }
  const auto per_model = c.Update("mlp", {{"trace_file", {"m.jsonl"}}});
  EXPECT_EQ(per_model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(per_model.status().message()), HasSubstr("'trace_file' is server-wide"));
  EXPECT_THAT(opened, ElementsAre("/var/spans/b.jsonl"));
}

// Without --trace-file-dir a client names no file, whatever the opener: a path it named could be
// any file on the server's disk. The start file reads as itself.
TEST(TraceControlTest, WithoutATraceFileDirAClientNamesNoFile) {
  std::vector<std::string> opened;
  auto opener = [&](const std::string& path) {
    opened.push_back(path);
    return absl::OkStatus();
  };
  TraceControl with_file(Make(""), /*collector=*/true, "/var/log/a.jsonl", opener);
  const auto moved = with_file.Update("", {{"trace_file", {"/etc/cron.d/x"}}});
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(moved.status().message()),
              HasSubstr("it can only be '/var/log/a.jsonl': a client may name a trace file only on a server started "
                        "with --trace-file-dir DIR"));
  EXPECT_TRUE(with_file.Update("", {{"trace_file", {"/var/log/a.jsonl"}}}).ok());

  TraceControl nowhere(Make(""), /*collector=*/false, "", opener);
  const auto refused = nowhere.Update("", {{"trace_file", {"/tmp/spans.jsonl"}}, {"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("start it with --trace-file-dir DIR"));
  EXPECT_TRUE(opened.empty());
  // Keys that only read are answered, not refused, on a server that traces nowhere.
  EXPECT_TRUE(nowhere.Update("", {{"trace_file", {}}}).ok());
  EXPECT_TRUE(nowhere.Update("", {{"trace_mode", {"opentelemetry"}}, {"log_frequency", {}}}).ok());
  TraceControl disabled(Make(""), /*collector=*/false);
  EXPECT_TRUE(disabled.Update("", {{"trace_file", {}}}).ok()) << "OTEL_SDK_DISABLED: reads still answer";
  EXPECT_EQ(disabled.Update("", {{"trace_rate", {"5"}}}).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Started with no destination but an opener and --trace-file-dir: everything reads OFF and only a
// request that names a trace_file changes anything; then trace_level TIMESTAMPS traces.
TEST(TraceControlTest, WithoutADestinationATraceFileTurnsTracingOn) {
  std::vector<std::string> opened;
  TraceControl c(
      Make(""), /*collector=*/false, "",
      [&](const std::string& path) {
        opened.push_back(path);
        return absl::OkStatus();
      },
      "/tmp/");
  EXPECT_EQ(Get(c.Update("", {}), "trace_level"), "OFF");
  EXPECT_EQ(Get(c.Update("", {}), "trace_file"), "");
  const auto refused = c.Update("", {{"trace_level", {"TIMESTAMPS"}}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("until a request names a trace_file"));
  EXPECT_TRUE(opened.empty());
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, IdWithLow(1)));

  auto file_only = c.Update("", {{"trace_file", {"spans.jsonl"}}});
  ASSERT_TRUE(file_only.ok()) << file_only.status();
  EXPECT_EQ(Get(file_only, "trace_level"), "OFF") << "a file alone does not turn tracing on";
  EXPECT_FALSE(c.ShouldTrace("mlp", nullptr, IdWithLow(1)));
  auto on = c.Update("", {{"trace_level", {"TIMESTAMPS"}}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(Get(on, "trace_level"), "TIMESTAMPS");
  EXPECT_TRUE(c.ShouldTrace("mlp", nullptr, IdWithLow(1)));
  EXPECT_EQ(Get(c.Update("", {{"trace_level", {}}}), "trace_level"), "OFF") << "cleared: back to the start value";
  EXPECT_THAT(opened, ElementsAre("/tmp/spans.jsonl"));
}

TEST(TraceControlTest, ConcurrentRequestsNeverTakeMoreThanTheCount) {
  TraceControl c(Make(""), true);
  ASSERT_TRUE(c.Update("", {{"trace_count", {"1000"}}}).ok());
  std::atomic<int> traced{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 600; ++i) {
        if (c.ShouldTrace("mlp", nullptr, NewTraceId())) traced.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(traced.load(), 1000);
  EXPECT_EQ(Get(c.Update("", {}), "trace_count"), "0");
}

}  // namespace
}  // namespace chronoserve::server::telemetry
