#include "common/timing.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/saturating.h"

namespace chronoserve {
namespace {

struct IntField {
  const char* key;  // without the "timing." prefix
  int64_t RequestTiming::*member;
};
constexpr IntField kIntFields[] = {
    {"queue_ns", &RequestTiming::queue_ns},
    {"input_stage_ns", &RequestTiming::input_stage_ns},
    {"h2d_ns", &RequestTiming::h2d_ns},
    {"compute_ns", &RequestTiming::compute_ns},
    {"launch_ns", &RequestTiming::launch_ns},
    {"d2h_ns", &RequestTiming::d2h_ns},
    {"output_stage_ns", &RequestTiming::output_stage_ns},
    {"server_total_ns", &RequestTiming::server_total_ns},
    {"admit_ns", &RequestTiming::admit_ns},
    {"handback_ns", &RequestTiming::handback_ns},
    {"batch_size", &RequestTiming::batch_size},
    {"worker", &RequestTiming::worker},
    {"gpu", &RequestTiming::gpu},
    {"sm_clock_mhz", &RequestTiming::sm_clock_mhz},
    {"idle_before_us", &RequestTiming::idle_before_us},
};
constexpr const char* kColdKey = "cold";
constexpr const char* kClockKey = "clock";  // "cuda_event" or "host"
constexpr const char* kCudaGraphKey = "cuda_graph";
constexpr const char* kExactKey = "exact_device_timing";

// Server-Timing names, in the order they are written.
struct SpanField {
  const char* name;
  int64_t RequestTiming::*member;
};
constexpr SpanField kSpans[] = {
    {"admit", &RequestTiming::admit_ns},
    {"queue", &RequestTiming::queue_ns},
    {"input_stage", &RequestTiming::input_stage_ns},
    {"h2d", &RequestTiming::h2d_ns},
    {"compute", &RequestTiming::compute_ns},
    {"launch", &RequestTiming::launch_ns},
    {"d2h", &RequestTiming::d2h_ns},
    {"output_stage", &RequestTiming::output_stage_ns},
    {"handback", &RequestTiming::handback_ns},
    {"total", &RequestTiming::server_total_ns},
};

}  // namespace

namespace {

// The spans come from the network (a client decodes another process's figures): sums in 128 bits,
// clamped back (ClampToInt64), so no value a server sends overflows them.
__int128 Remainder(const RequestTiming& t) {
  return static_cast<__int128>(t.server_total_ns) - t.queue_ns - t.input_stage_ns - t.h2d_ns - t.compute_ns -
         t.d2h_ns - t.output_stage_ns;
}

}  // namespace

int64_t RequestTiming::remainder_ns() const { return ClampToInt64(Remainder(*this)); }

int64_t RequestTiming::device_gap_ns() const {
  return ClampToInt64(Remainder(*this) - admit_ns - handback_ns);
}

bool RequestTiming::IsConsistent() const {
  for (const auto& span : kSpans) {
    if (this->*span.member < 0) return false;
  }
  const __int128 remainder = Remainder(*this);
  return remainder >= 0 && remainder - admit_ns - handback_ns >= 0;
}

const std::vector<TimingParamField>& TimingParamFields() {
  static const auto* fields = [] {
    auto* out = new std::vector<TimingParamField>();
    for (const auto& field : kIntFields) {
      out->push_back({absl::StrCat(kTimingParamPrefix, field.key), TimingParam::Kind::kInt64, field.member, nullptr});
    }
    using Kind = TimingParam::Kind;
    out->push_back({absl::StrCat(kTimingParamPrefix, kColdKey), Kind::kBool, nullptr, &RequestTiming::cold});
    out->push_back({absl::StrCat(kTimingParamPrefix, kClockKey), Kind::kString, nullptr, &RequestTiming::device_timed});
    out->push_back({absl::StrCat(kTimingParamPrefix, kCudaGraphKey), Kind::kBool, nullptr, &RequestTiming::cuda_graph});
    out->push_back(
        {absl::StrCat(kTimingParamPrefix, kExactKey), Kind::kBool, nullptr, &RequestTiming::exact_device_timing});
    return out;
  }();
  return *fields;
}

std::vector<TimingParam> EncodeTimingParams(const RequestTiming& timing) {
  std::vector<TimingParam> params;
  params.reserve(TimingParamFields().size());
  for (const TimingParamField& field : TimingParamFields()) {
    TimingParam p;
    p.key = field.key;
    p.kind = field.kind;
    switch (field.kind) {
      case TimingParam::Kind::kInt64: p.int_value = timing.*field.int_member; break;
      case TimingParam::Kind::kBool: p.bool_value = timing.*field.bool_member; break;
      case TimingParam::Kind::kString: p.string_value = TimingClockValue(timing.*field.bool_member); break;
    }
    params.push_back(std::move(p));
  }
  return params;
}

absl::StatusOr<RequestTiming> DecodeTimingParams(
    const std::function<std::optional<TimingParam>(const std::string& key)>& lookup) {
  return DecodeTimingParamsByField([&lookup](size_t field) { return lookup(TimingParamFields()[field].key); });
}

int TimingParamFieldIndex(absl::string_view key) {
  static const auto* index = [] {
    auto* out = new absl::flat_hash_map<std::string, int>();
    const auto& fields = TimingParamFields();
    for (size_t i = 0; i < fields.size(); ++i) out->emplace(fields[i].key, static_cast<int>(i));
    return out;
  }();
  auto it = index->find(key);
  return it == index->end() ? -1 : it->second;
}

absl::StatusOr<RequestTiming> DecodeTimingParamsByField(
    const std::function<std::optional<TimingParam>(size_t field)>& lookup) {
  RequestTiming timing;
  bool any = false;
  const auto& fields = TimingParamFields();
  for (size_t i = 0; i < fields.size(); ++i) {
    const TimingParamField& field = fields[i];
    auto p = lookup(i);
    if (!p.has_value()) continue;
    if (p->kind != field.kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          "timing parameter ", field.key, " is not ",
          field.kind == TimingParam::Kind::kInt64 ? "an int64" : field.kind == TimingParam::Kind::kBool ? "a bool" : "a string"));
    }
    switch (field.kind) {
      case TimingParam::Kind::kInt64:
        timing.*field.int_member = p->int_value;
        any = true;
        break;
      case TimingParam::Kind::kBool: timing.*field.bool_member = p->bool_value; break;
      case TimingParam::Kind::kString: timing.*field.bool_member = p->string_value == TimingClockValue(true); break;
    }
  }
  if (!any) return absl::NotFoundError("response carries no timing.* parameters");
  return timing;
}

std::string EncodeServerTiming(const RequestTiming& timing) {
  // Integer formatting, rounded to the microsecond: this runs for every response, and printf's
  // float path showed up in the server's profile under load.
  std::string out;
  out.reserve(160);
  for (const auto& span : kSpans) {
    const int64_t ns = timing.*span.member;
    const int64_t us = (ns >= 0 ? ns + 500 : ns - 500) / 1000;
    const int64_t abs_us = us < 0 ? -us : us;
    const int64_t frac = abs_us % 1000;
    absl::StrAppend(&out, out.empty() ? "" : ", ", span.name, ";dur=", us < 0 ? "-" : "",
                    abs_us / 1000, ".", frac < 100 ? "0" : "", frac < 10 ? "0" : "", frac);
  }
  return out;
}

absl::StatusOr<std::vector<ServerTimingMetric>> ParseServerTiming(absl::string_view header) {
  std::vector<ServerTimingMetric> metrics;
  for (absl::string_view entry : absl::StrSplit(header, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ';');
    ServerTimingMetric metric;
    metric.name = std::string(absl::StripAsciiWhitespace(parts[0]));
    if (metric.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("server-timing entry without a name: '", entry, "'"));
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view param = absl::StripAsciiWhitespace(parts[i]);
      if (absl::ConsumePrefix(&param, "dur=")) {
        if (!absl::SimpleAtod(param, &metric.dur_ms)) {
          return absl::InvalidArgumentError(absl::StrCat("bad dur in server-timing entry '", entry, "'"));
        }
      }
    }
    metrics.push_back(std::move(metric));
  }
  return metrics;
}

}  // namespace chronoserve
