#include "client/chronobench/bench_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/dtype.h"
#include "common/otlp/tracing_config.h"

namespace chronoserve::client::bench {

const char* LoadModeName(LoadMode mode) {
  switch (mode) {
    case LoadMode::kConcurrency: return "concurrency";
    case LoadMode::kRate: return "rate";
    case LoadMode::kIdleGap: return "idle_gap";
  }
  return "unknown";
}

absl::StatusOr<std::vector<double>> ParseRange(absl::string_view flag, absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " '", text, "': ", why, " (expected START[:END[:STEP]])"));
  };
  if (parts.empty() || parts.size() > 3) return bad("wrong number of fields");
  double v[3] = {0, 0, 1};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(parts[i]), &v[i]) || !std::isfinite(v[i])) {
      return bad(absl::StrCat("'", parts[i], "' is not a number"));
    }
  }
  if (parts.size() == 1) v[1] = v[0];
  if (v[0] < 0) return bad("negative start");
  if (v[1] < v[0]) return bad("END is below START");
  if (v[2] <= 0) return bad("STEP must be positive");
  std::vector<double> values;
  // START + k × STEP may land a rounding error past END: END stays in the range. The slack is at
  // most half a step, so a STEP finer than the rounding adds no point past END either.
  const double slack = std::min(1e-12 * std::max(1.0, v[1]), 0.5 * v[2]);
  for (int64_t k = 0;; ++k) {
    const double x = v[0] + static_cast<double>(k) * v[2];
    if (x > v[1] + slack) break;
    if (values.size() >= 1000) return bad("more than 1000 points");
    // START + k × STEP gathers binary error (0 + 3 × 0.1 is 0.30000000000000004): each point is
    // taken at the 15 significant digits the console and the CSV print, so the JSON and the pacer
    // have the same value.
    double point = x;
    if (!absl::SimpleAtod(absl::StrFormat("%.15g", x), &point)) point = x;
    values.push_back(point);
  }
  return values;
}

absl::StatusOr<std::vector<int64_t>> ParseIntRange(absl::string_view flag, absl::string_view text, int64_t max) {
  // Checked before the cast (a double beyond int64 has no defined conversion) and bounded by int
  // (concurrency is split over the workers as int).
  const double kMax = static_cast<double>(std::min<int64_t>(max, std::numeric_limits<int32_t>::max()));
  auto values = ParseRange(flag, text);
  if (!values.ok()) return values.status();
  std::vector<int64_t> out;
  for (double x : *values) {
    if (x != std::floor(x) || x < 1 || x > kMax) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " '", text, "': values must be integers from 1 to ",
                                                     static_cast<int64_t>(kMax)));
    }
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

absl::StatusOr<std::vector<double>> ParsePercentiles(absl::string_view text) {
  std::vector<double> out;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    double x = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(p), &x) || !(x > 0 && x <= 100)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--percentiles '", text, "': '", p, "' is not in (0, 100]"));
    }
    out.push_back(x);
  }
  if (out.empty()) return absl::InvalidArgumentError("--percentiles is empty");
  return out;
}

std::string ExactNumber(double value) { return absl::StrFormat("%.15g", value); }

const char* SharedMemoryKindName(SharedMemoryKind kind) {
  switch (kind) {
    case SharedMemoryKind::kNone: return "none";
    case SharedMemoryKind::kSystem: return "system";
    case SharedMemoryKind::kCuda: return "cuda";
  }
  return "none";
}

std::string PercentileKey(double percentile) {
  // 15 significant digits: two different --percentiles never share a key (%g's 6 made 99.99999
  // "p100" and 50.0000001 "p50").
  return absl::StrCat("p", absl::StrReplaceAll(ExactNumber(percentile), {{".", "_"}}));
}

absl::Status ValidateOptions(const BenchOptions& o) {
  if (o.target.model.empty()) return absl::InvalidArgumentError("-m/--model is required");
  if (o.target.connections < 1) return absl::InvalidArgumentError("--connections must be >= 1");
  if (o.target.timeout_ms < 0) return absl::InvalidArgumentError("--timeout-ms must be >= 0");
  if (o.load.threads < 0) return absl::InvalidArgumentError("--threads must be >= 0 (0 = min(cores, 8))");
  // The flags' range parser refuses these already; options built in code come through here too.
  if (o.load.mode == LoadMode::kConcurrency) {
    for (int64_t c : o.load.concurrency) {
      if (c < 1) return absl::InvalidArgumentError(absl::StrCat("--concurrency-range: ", c, " is not >= 1"));
    }
  }
  for (int64_t b : o.load.batch_sizes) {
    if (b < 1) return absl::InvalidArgumentError(absl::StrCat("-b/--batch-size: ", b, " is not >= 1"));
  }
  // Bounded so that every period, schedule time and stall limit derived from them fits int64 ns
  // (1e-11/s or an idle gap of 1e13 ms overflowed llround).
  if (o.load.mode == LoadMode::kRate) {
    for (double r : o.load.rates) {
      if (!(r >= kMinRatePerS && r <= kMaxRatePerS)) {
        return absl::InvalidArgumentError(absl::StrCat("--request-rate-range: ", ExactNumber(r),
                                                       " is not a rate from ", ExactNumber(kMinRatePerS), " to ",
                                                       ExactNumber(kMaxRatePerS), " requests/s"));
      }
    }
  }
  if (o.load.mode == LoadMode::kIdleGap) {
    for (double gap_ms : o.load.idle_gaps_ms) {
      if (!(gap_ms >= 0 && gap_ms <= kMaxIdleGapMs)) {
        return absl::InvalidArgumentError(absl::StrCat("--idle-gap-range: ", ExactNumber(gap_ms),
                                                       " ms is not an idle gap from 0 to ", ExactNumber(kMaxIdleGapMs),
                                                       " ms (a day)"));
      }
    }
  }
  if (o.load.batch_sweep && o.load.mode == LoadMode::kRate) {
    return absl::InvalidArgumentError(
        "--batch-range needs a closed loop (--concurrency-range) or --idle-gap-range: throughput "
        "saturation is only visible when the client is not the limit");
  }
  if (o.load.batch_sweep && o.load.mode == LoadMode::kConcurrency && o.load.concurrency.size() > 1) {
    return absl::InvalidArgumentError(
        "--batch-range sweeps batch size at one concurrency; give --concurrency-range a single value");
  }
  if (o.load.batch_sweep && o.load.mode == LoadMode::kIdleGap && o.load.idle_gaps_ms.size() > 1) {
    return absl::InvalidArgumentError(
        "--batch-range sweeps batch size at one idle gap; give --idle-gap-range a single value");
  }
  // Every element takes a byte at least, whatever the input's datatype (RequestFactory checks the
  // bytes once the model says it): a count past that, or past int64, is refused here as a bad flag.
  for (const auto& [name, dims] : o.input.shapes) {
    const int64_t elements = ElementCount(dims);  // -1: a negative dim or past int64
    if (elements < 0 || elements > kMaxRequestBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shape ", name, ":", absl::StrJoin(dims, ","), ": ",
          elements < 0 ? "a negative dim, or more elements than int64 holds" : absl::StrCat(elements, " elements"),
          "; a request carries at most ", kMaxRequestBytes, " bytes (protobuf's 2 GiB message limit)"));
    }
  }
  if (o.measurement.interval_ms < 1) return absl::InvalidArgumentError("--measurement-interval must be >= 1");
  if (o.measurement.max_trials < 1) return absl::InvalidArgumentError("--max-trials must be >= 1");
  // One request an idle gap apart from the last answer: a window no longer than the gap holds one
  // request at best and often none, so the point ran its whole warm-up to fail with no figures.
  if (o.load.mode == LoadMode::kIdleGap && !o.load.idle_gaps_ms.empty() && o.measurement.window_min_requests == 0) {
    const double longest_ms = *std::max_element(o.load.idle_gaps_ms.begin(), o.load.idle_gaps_ms.end());
    if (longest_ms >= static_cast<double>(o.measurement.interval_ms)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--idle-gap-range: a gap of ", ExactNumber(longest_ms), " ms is no shorter than the windows of ",
          o.measurement.interval_ms, " ms (-p/--measurement-interval): a window would hold one request at "
          "most, often none; give --measurement-request-count N (each window then waits for N requests, "
          "e.g. 10) or a -p well above the longest gap"));
    }
  }
  // Written as !(x > 0): NaN compares false with everything, so it fails here too.
  if (!(o.measurement.stability_percentage > 0) || !std::isfinite(o.measurement.stability_percentage)) {
    return absl::InvalidArgumentError("-s/--stability-percentage must be a finite number > 0");
  }
  if (o.shared_memory.output_byte_size < 0) {
    return absl::InvalidArgumentError("--output-shared-memory-size must be >= 0");
  }
  if (o.shared_memory.output_byte_size > 0 && o.shared_memory.kind == SharedMemoryKind::kNone) {
    return absl::InvalidArgumentError("--output-shared-memory-size needs --shared-memory system or cuda");
  }
  if (o.shared_memory.preload && o.shared_memory.kind == SharedMemoryKind::kNone) {
    return absl::InvalidArgumentError("--shared-memory-preload needs --shared-memory system or cuda");
  }
  if (o.shared_memory.cuda_device != 0 && o.shared_memory.kind != SharedMemoryKind::kCuda) {
    return absl::InvalidArgumentError("--shared-memory-device needs --shared-memory cuda");
  }
  if (!(o.trace.traceparent_rate >= 0 && o.trace.traceparent_rate <= 1)) {  // NaN included
    return absl::InvalidArgumentError("--traceparent-rate must be a number in [0, 1]");
  }
  if (!o.trace.otlp_endpoint.empty() && !o.trace.trace_file.empty()) {
    return absl::InvalidArgumentError("--trace-file and --otlp-endpoint both name where client spans go; give one");
  }
  if (!o.trace.otlp_endpoint.empty()) {
    const otlp::EnvLookup no_env = [](const char*) { return std::optional<std::string>(); };
    if (auto config = otlp::ResolveTracingConfig(o.trace.otlp_endpoint, "", no_env); !config.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--otlp-endpoint: ", config.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace chronoserve::client::bench
