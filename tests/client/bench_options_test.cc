#include "absl/strings/str_join.h"
#include "client/chronobench/bench_flags.h"
#include "client/chronobench/bench_options.h"
#include "client/cuda_shared_memory.h"

#include "common/shape_flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chronoserve::client::bench {
namespace {

using ::testing::HasSubstr;

TEST(BenchOptionsTest, ParsesRanges) {
  EXPECT_EQ(*ParseRange("r", "5"), (std::vector<double>{5}));
  EXPECT_EQ(*ParseRange("r", "1:3"), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(*ParseRange("r", "0:1000:200"), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(*ParseRange("r", "0.5:1.5:0.5"), (std::vector<double>{0.5, 1.0, 1.5}));
  // 3 × 0.1 is 0.30000000000000004 in binary; the point is the 0.3 the console and CSV print.
  EXPECT_EQ(*ParseRange("r", "0.1:0.3:0.1"), (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(ParseRange("r", "0:0.7:0.1")->back(), 0.7);
  // A step finer than END's rounding slack: no point past END (26 points, the last 1.0000000000025,
  // before the slack was bounded by half a step).
  const auto fine = ParseRange("r", "1:1.0000000000005:1e-13");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->size(), 6u);
  EXPECT_LE(fine->back(), 1.0000000000005);
  EXPECT_EQ(*ParseIntRange("c", "1:16:5"), (std::vector<int64_t>{1, 6, 11, 16}));
}

TEST(BenchOptionsTest, RejectsBadRangesNamingTheFlag) {
  for (const char* bad : {"", "a", "3:1", "1:5:0", "1:5:-1", "-1:2", "1:2:3:4"}) {
    auto r = ParseRange("concurrency-range", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--concurrency-range"), std::string::npos) << r.status();
  }
  EXPECT_FALSE(ParseIntRange("c", "0.5:2").ok());
  EXPECT_FALSE(ParseIntRange("c", "0:2").ok());
  // Beyond int64 (no defined conversion), at 2^63, or past int: rejected before any cast.
  for (const char* huge : {"1e20", "9223372036854775807", "1:1e19:1e18", "2147483648"}) {
    auto r = ParseIntRange("concurrency-range", huge);
    ASSERT_FALSE(r.ok()) << huge;
    EXPECT_NE(r.status().message().find("--concurrency-range"), std::string::npos) << r.status();
  }
  EXPECT_EQ(*ParseIntRange("concurrency-range", "2147483647"), (std::vector<int64_t>{2147483647}));
  // A batch sweep has -b's limit, 2^30 samples per request.
  EXPECT_EQ(*ParseIntRange("batch-range", "1073741824", int64_t{1} << 30), (std::vector<int64_t>{1073741824}));
  EXPECT_FALSE(ParseIntRange("batch-range", "1073741825", int64_t{1} << 30).ok());
  auto sweep = ParseBenchFlags({"cb", "-m", "m", "--batch-range", "1:1073741825:1073741824"});
  ASSERT_FALSE(sweep.ok());
  EXPECT_NE(sweep.status().message().find("1073741824"), std::string::npos) << sweep.status();
  auto flags = ParseBenchFlags({"cb", "-m", "m", "--concurrency-range", "1e20"});
  ASSERT_FALSE(flags.ok());
  EXPECT_NE(flags.status().message().find("--concurrency-range"), std::string::npos) << flags.status();
  auto threads = ParseBenchFlags({"cb", "-m", "m", "--threads", "-1"});
  ASSERT_FALSE(threads.ok()) << "a negative count is an error, not the default";
  EXPECT_NE(threads.status().message().find("--threads"), std::string::npos) << threads.status();
  EXPECT_TRUE(ParseBenchFlags({"cb", "-m", "m", "--threads", "0"}).ok());
}

// Integer flags are read in base 10 (CLI11 alone reads "010" as 8 and "0x10" as 16) and checked
// against a range that the message names.
TEST(BenchFlagsTest, IntegerFlagsAreBaseTenAndRanged) {
  auto octal = ParseBenchFlags({"cb", "-m", "m", "--threads", "010", "-p", "0250"});
  ASSERT_TRUE(octal.ok()) << octal.status();
  EXPECT_EQ(octal->load.threads, 10);
  EXPECT_EQ(octal->measurement.interval_ms, 250);
  EXPECT_EQ(octal->load.max_send_poll_us, 100) << "the default";
  auto no_poll = ParseBenchFlags({"cb", "-m", "m", "--max-send-poll-us", "0"});
  ASSERT_TRUE(no_poll.ok()) << no_poll.status();
  EXPECT_EQ(no_poll->load.max_send_poll_us, 0);
  const struct {
    std::vector<std::string> args;
    std::string message;
  } bad[] = {
      {{"--connections", "0x10"}, "--connections: '0x10' is not an integer from 1 to 1024"},
      {{"--connections", "1025"}, "--connections: '1025' is not an integer from 1 to 1024"},
      {{"-b", "0"}, "'0' is not an integer from 1 to 1073741824"},
      {{"--timeout-ms", "-5"}, "--timeout-ms: '-5' is not an integer from 0 to 86400000"},
      {{"-r", "0"}, "'0' is not an integer from 1 to 1000000"},
      {{"--warmup-requests", "ten"}, "--warmup-requests: 'ten' is not an integer from 0 to"},
      {{"--seed", "-1"}, "--seed: '-1' is not an integer from 0 to 9223372036854775807"},
      {{"--max-send-poll-us", "-1"}, "--max-send-poll-us: '-1' is not an integer from 0 to 100000"},
  };
  for (const auto& row : bad) {
    std::vector<std::string> args = {"cb", "-m", "m"};
    args.insert(args.end(), row.args.begin(), row.args.end());
    auto r = ParseBenchFlags(args);
    ASSERT_FALSE(r.ok()) << row.args[0];
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(row.message), std::string::npos) << r.status();
  }
}

// Options built in code, not from flags, meet the same bounds as the flags' range parser sets.
TEST(BenchOptionsTest, ValidateRefusesConcurrencyOrBatchBelowOne) {
  BenchOptions o;
  o.target.model = "m";
  EXPECT_TRUE(ValidateOptions(o).ok());
  o.load.concurrency = {4, 0};
  absl::Status status = ValidateOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--concurrency-range: 0"), std::string::npos) << status;
  o.load.concurrency = {-3};
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.load.concurrency = {2};
  o.load.batch_sizes = {8, 0};
  status = ValidateOptions(o);
  EXPECT_NE(status.message().find("--batch-size: 0"), std::string::npos) << status;
}

TEST(BenchOptionsTest, ParsesShapesAndPercentiles) {
  std::map<std::string, std::vector<int64_t>> shapes;
  ASSERT_TRUE(ParseShapeFlag("INPUT__0:4,20,20", &shapes).ok());
  EXPECT_EQ(shapes["INPUT__0"], (std::vector<int64_t>{4, 20, 20}));
  EXPECT_FALSE(ParseShapeFlag("INPUT__0", &shapes).ok());
  EXPECT_FALSE(ParseShapeFlag("INPUT__0:4,x", &shapes).ok());
  EXPECT_FALSE(ParseShapeFlag("INPUT__0:0", &shapes).ok());
  EXPECT_EQ(*ParsePercentiles("50,99.9"), (std::vector<double>{50, 99.9}));
  EXPECT_FALSE(ParsePercentiles("0").ok());
  EXPECT_FALSE(ParsePercentiles("101").ok());
  EXPECT_EQ(PercentileKey(99.9), "p99_9");
  EXPECT_EQ(PercentileKey(50), "p50");
  EXPECT_EQ(PercentileKey(99.99), "p99_99");
  // Any value --percentiles takes keeps its own key: 6 significant digits made these "p100", "p50".
  EXPECT_EQ(PercentileKey(99.99999), "p99_99999");
  EXPECT_EQ(PercentileKey(50.0000001), "p50_0000001");
  EXPECT_EQ(PercentileKey(*ParsePercentiles("99.9")->begin()), "p99_9") << "no binary noise in the key";
  EXPECT_EQ(PercentileKey(100), "p100");
}

TEST(BenchFlagsTest, DefaultsToClosedLoopConcurrencyOne) {
  auto o = ParseBenchFlags({"chronobench", "-m", "mlp"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->load.mode, LoadMode::kConcurrency);
  EXPECT_EQ(o->load.concurrency, (std::vector<int64_t>{1}));
  EXPECT_EQ(o->load.batch_sizes, (std::vector<int64_t>{1}));
  EXPECT_EQ(o->input.input_data, "random");
  EXPECT_EQ(o->measurement.percentiles, (std::vector<double>{50, 90, 95, 99, 99.9}));
  EXPECT_EQ(o->shared_memory.kind, SharedMemoryKind::kNone);
  EXPECT_FALSE(o->target.streaming);
  EXPECT_TRUE(o->target.connection_affinity);
  auto streaming = ParseBenchFlags({"cb", "-m", "m", "--streaming", "--shared-memory", "system"});
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  EXPECT_TRUE(streaming->target.streaming);
  auto round_robin = ParseBenchFlags({"cb", "-m", "m", "--no-connection-affinity"});
  ASSERT_TRUE(round_robin.ok()) << round_robin.status();
  EXPECT_FALSE(round_robin->target.connection_affinity);
}

TEST(BenchFlagsTest, SharedMemoryFlagsUsePerfAnalyzersNames) {
  auto o = ParseBenchFlags({"cb", "-m", "m", "--shared-memory", "system", "--output-shared-memory-size", "4096"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shared_memory.kind, SharedMemoryKind::kSystem);
  EXPECT_EQ(o->shared_memory.output_byte_size, 4096);
  auto other = ParseBenchFlags({"cb", "-m", "m", "--shared-memory", "gpu"});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("--shared-memory 'gpu': expected none, system or cuda"), std::string::npos)
      << other.status();
}

// --shared-memory cuda needs a build with CUDA: there it is taken (with its device), elsewhere refused
// saying why, before any connection.
TEST(BenchFlagsTest, CudaSharedMemoryIsTakenOnlyWhereThisBuildHasCuda) {
  auto cuda = ParseBenchFlags({"cb", "-m", "m", "--shared-memory", "cuda", "--shared-memory-device", "1",
                               "--output-shared-memory-size", "4096"});
  if (client::CudaSharedMemory::Available()) {
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_EQ(cuda->shared_memory.kind, SharedMemoryKind::kCuda);
    EXPECT_EQ(cuda->shared_memory.cuda_device, 1);
    EXPECT_EQ(cuda->shared_memory.output_byte_size, 4096);
    EXPECT_STREQ(SharedMemoryKindName(cuda->shared_memory.kind), "cuda");
  } else {
    ASSERT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition) << cuda.status();
    EXPECT_NE(cuda.status().message().find("built without CUDA"), std::string::npos) << cuda.status();
    EXPECT_NE(cuda.status().message().find("--shared-memory system"), std::string::npos) << cuda.status();
  }
  auto preload = ParseBenchFlags({"cb", "-m", "m", "--shared-memory", "system", "--shared-memory-preload"});
  ASSERT_TRUE(preload.ok()) << preload.status();
  EXPECT_TRUE(preload->shared_memory.preload);
  auto preload_alone = ParseBenchFlags({"cb", "-m", "m", "--shared-memory-preload"});
  ASSERT_FALSE(preload_alone.ok());
  EXPECT_NE(preload_alone.status().message().find("--shared-memory-preload needs --shared-memory system or cuda"),
            std::string::npos)
      << preload_alone.status();
  // A device without CUDA regions is a mistake, whatever the build.
  auto device = ParseBenchFlags({"cb", "-m", "m", "--shared-memory", "system", "--shared-memory-device", "1"});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("--shared-memory-device needs --shared-memory cuda"), std::string::npos)
      << device.status();
}

TEST(BenchFlagsTest, PicksTheLoadModeFromTheRangeFlag) {
  auto rate = ParseBenchFlags({"cb", "-m", "m", "--request-rate-range", "100:300:100", "--request-distribution",
                               "poisson"});
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->load.mode, LoadMode::kRate);
  EXPECT_EQ(rate->load.distribution, Distribution::kPoisson);
  EXPECT_EQ(rate->load.rates, (std::vector<double>{100, 200, 300}));
  auto gap = ParseBenchFlags({"cb", "-m", "m", "--idle-gap-range", "0:1000:500", "-b", "4"});
  ASSERT_TRUE(gap.ok()) << gap.status();
  EXPECT_EQ(gap->load.mode, LoadMode::kIdleGap);
  EXPECT_EQ(gap->load.idle_gaps_ms, (std::vector<double>{0, 500, 1000}));
  EXPECT_EQ(gap->load.batch_sizes, (std::vector<int64_t>{4}));
  auto batch = ParseBenchFlags({"cb", "-m", "m", "--batch-range", "1:64:21", "--concurrency-range", "2"});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->load.batch_sweep);
  EXPECT_EQ(batch->load.batch_sizes, (std::vector<int64_t>{1, 22, 43, 64}));
}

TEST(BenchFlagsTest, FailsFastOnBadCombinations) {
  const std::vector<std::vector<std::string>> bad = {
      {"cb"},                                                                       // no model
      {"cb", "-m", "m", "--concurrency-range", "1", "--request-rate-range", "10"},  // two modes
      {"cb", "-m", "m", "--request-distribution", "uniform"},
      {"cb", "-m", "m", "--batch-range", "1:8", "--request-rate-range", "10"},
      {"cb", "-m", "m", "--batch-range", "1:8", "--concurrency-range", "1:4"},
      {"cb", "-m", "m", "--traceparent-rate", "1.5"},
      {"cb", "-m", "m", "--otlp-endpoint", "no-port"},
      {"cb", "-m", "m", "-b", "0"},
      {"cb", "-m", "m", "--max-trials", "0"},
      {"cb", "-m", "m", "--no-such-flag"},
      {"cb", "-m", "m", "--output-shared-memory-size", "64"},  // without --shared-memory system or cuda
      {"cb", "-m", "m", "--shared-memory", "system", "--output-shared-memory-size", "-1"},
  };
  for (const auto& args : bad) {
    EXPECT_FALSE(ParseBenchFlags(args).ok()) << args.back();
  }
  // Flags that would be ignored are refused, saying which: Poisson gaps outside open loop, -b beside
  // a batch sweep (even -b 1, the default), a second shape for one input.
  for (const char* mode : {"--concurrency-range", "--idle-gap-range"}) {
    auto poisson = ParseBenchFlags({"cb", "-m", "m", mode, "4", "--request-distribution", "poisson"});
    ASSERT_FALSE(poisson.ok()) << mode;
    EXPECT_THAT(std::string(poisson.status().message()), HasSubstr("only open loop (--request-rate-range)"));
  }
  EXPECT_TRUE(ParseBenchFlags({"cb", "-m", "m", "--concurrency-range", "4", "--request-distribution", "constant"}).ok());
  auto two_sinks = ParseBenchFlags({"cb", "-m", "m", "--otlp-endpoint", "otel:4317", "--trace-file", "/tmp/c.jsonl"});
  ASSERT_FALSE(two_sinks.ok());
  EXPECT_THAT(std::string(two_sinks.status().message()), HasSubstr("--trace-file and --otlp-endpoint both"));
  EXPECT_FALSE(ParseBenchFlags({"cb", "-m", "m", "--trace-file", ""}).ok()) << "an empty path writes nothing";
  auto file = ParseBenchFlags({"cb", "-m", "m", "--trace-file", "/tmp/c.jsonl"});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->trace.trace_file, "/tmp/c.jsonl");
  for (const char* b : {"8", "1"}) {
    auto both = ParseBenchFlags({"cb", "-m", "m", "-b", b, "--batch-range", "1:4"});
    ASSERT_FALSE(both.ok()) << b;
    EXPECT_THAT(std::string(both.status().message()), HasSubstr("-b/--batch-size or --batch-range, not both"));
  }
  // A range flag given an empty value (a script's unset variable) is refused, naming it, not taken as
  // absent: it would have measured another load mode.
  for (const char* flag : {"--concurrency-range", "--request-rate-range", "--idle-gap-range", "--batch-range"}) {
    auto empty = ParseBenchFlags({"cb", "-m", "m", flag, ""});
    ASSERT_FALSE(empty.ok()) << flag;
    EXPECT_THAT(std::string(empty.status().message()), HasSubstr(std::string(flag) + " '': ")) << flag;
  }
  auto empty_second = ParseBenchFlags({"cb", "-m", "m", "--concurrency-range", "4", "--request-rate-range", ""});
  ASSERT_FALSE(empty_second.ok());
  EXPECT_THAT(std::string(empty_second.status().message()), HasSubstr("give one of"));
  auto twice = ParseBenchFlags({"cb", "-m", "m", "--shape", "IN:4,2", "--shape", "IN:8,2"});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("input 'IN' was given a shape already"));
}

// NaN compares false with every bound, so a check written as "x <= 0 is bad" let it through.
TEST(BenchFlagsTest, RejectsNonFiniteFractionsNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"cb", "-m", "m", "-s", "nan"}, "--stability-percentage"},
      {{"cb", "-m", "m", "--stability-percentage", "inf"}, "--stability-percentage"},
      {{"cb", "-m", "m", "--traceparent-rate", "nan"}, "--traceparent-rate"},
      {{"cb", "-m", "m", "--traceparent-rate", "-inf"}, "--traceparent-rate"},
  };
  for (const auto& [args, flag] : bad) {
    auto options = ParseBenchFlags(args);
    ASSERT_FALSE(options.ok()) << args[3] << " " << args[4];
    EXPECT_NE(options.status().message().find(flag), std::string::npos) << options.status();
  }
  auto fine = ParseBenchFlags({"cb", "-m", "m", "-s", "2.5", "--traceparent-rate", "0.25"});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->measurement.stability_percentage, 2.5);
  EXPECT_EQ(fine->trace.traceparent_rate, 0.25);
}

// Rates and idle gaps whose periods or schedule times would overflow int64 ns are refused, naming
// the flag and the range; the bounds themselves are accepted.
TEST(BenchFlagsTest, RatesAndIdleGapsAreBounded) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"cb", "-m", "m", "--request-rate-range", "1e-11"}, "from 0.001 to 1000000000 requests/s"},
      // Just past a bound: the value as given, not rounded onto the bound it passes.
      {{"cb", "-m", "m", "--request-rate-range", "1000000000.5"}, "1000000000.5 is not a rate from 0.001 to 1000000000"},
      {{"cb", "-m", "m", "--idle-gap-range", "86400000.4"}, "86400000.4 ms is not an idle gap from 0 to 86400000 ms"},
      {{"cb", "-m", "m", "--request-rate-range", "0"}, "--request-rate-range"},
      {{"cb", "-m", "m", "--request-rate-range", "1e10"}, "--request-rate-range"},
      {{"cb", "-m", "m", "--request-rate-range", "100:2e9:1e9"}, "--request-rate-range"},
      {{"cb", "-m", "m", "--idle-gap-range", "1e13"}, "from 0 to 86400000 ms (a day)"},
      {{"cb", "-m", "m", "--idle-gap-range", "0:1e8:5e7"}, "--idle-gap-range"},
  };
  for (const auto& [args, text] : bad) {
    auto options = ParseBenchFlags(args);
    ASSERT_FALSE(options.ok()) << args[4];
    EXPECT_NE(options.status().message().find(text), std::string::npos) << options.status();
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cb", "-m", "m", "--request-rate-range", "0.001"},
           {"cb", "-m", "m", "--request-rate-range", "1e9"},
           {"cb", "-m", "m", "--idle-gap-range", "86400000", "--measurement-request-count", "3"}}) {
    EXPECT_TRUE(ParseBenchFlags(args).ok()) << args[4];
  }
}

// An idle gap no shorter than the windows leaves them empty: refused before any request, naming both
// flags and the way out, unless each window waits for a count of requests.
TEST(BenchFlagsTest, AnIdleGapAsLongAsTheWindowsNeedsARequestCount) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cb", "-m", "m", "--idle-gap-range", "0:6000:3000"},  // the default windows: 5000 ms
           {"cb", "-m", "m", "--idle-gap-range", "250", "-p", "250"}}) {
    auto options = ParseBenchFlags(args);
    ASSERT_FALSE(options.ok()) << absl::StrJoin(args, " ");
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    for (const char* text : {"--idle-gap-range", "--measurement-interval", "--measurement-request-count"}) {
      EXPECT_NE(options.status().message().find(text), std::string::npos) << options.status();
    }
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cb", "-m", "m", "--idle-gap-range", "0:4000:2000"},
           {"cb", "-m", "m", "--idle-gap-range", "250", "-p", "251"},
           {"cb", "-m", "m", "--idle-gap-range", "250", "-p", "250", "--measurement-request-count", "5"}}) {
    EXPECT_TRUE(ParseBenchFlags(args).ok()) << absl::StrJoin(args, " ");
  }
}

}  // namespace
}  // namespace chronoserve::client::bench
