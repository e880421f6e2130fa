#include "server/telemetry/sampler.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server::telemetry {

absl::StatusOr<Sampler> Sampler::Create(const std::string& name, const std::string& arg) {
  const std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  double ratio = 1.0;
  if (!arg.empty()) {
    if (!absl::SimpleAtod(arg, &ratio) || !(ratio >= 0.0 && ratio <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("OTEL_TRACES_SAMPLER_ARG '", arg, "' is not a ratio in [0, 1]"));
    }
  }
  if (n.empty() || n == "parentbased_always_on") return Sampler(Root::kAlwaysOn, true, 1.0);
  if (n == "always_on") return Sampler(Root::kAlwaysOn, false, 1.0);
  if (n == "always_off") return Sampler(Root::kAlwaysOff, false, 0.0);
  if (n == "traceidratio") return Sampler(Root::kRatio, false, ratio);
  if (n == "parentbased_always_off") return Sampler(Root::kAlwaysOff, true, 0.0);
  if (n == "parentbased_traceidratio") return Sampler(Root::kRatio, true, ratio);
  return absl::InvalidArgumentError(absl::StrCat(
      "OTEL_TRACES_SAMPLER '", name,
      "' is not one of always_on, always_off, traceidratio, parentbased_always_on, "
      "parentbased_always_off, parentbased_traceidratio"));
}

Sampler Sampler::FromEnvironment(const std::string& name, const std::string& arg,
                                 std::vector<std::string>* warnings) {
  std::string use_name = name, use_arg = arg;
  if (absl::StatusOr<Sampler> s = Create(name, ""); !s.ok()) {
    warnings->push_back(absl::StrCat(s.status().message(), "; ignored: using parentbased_always_on, the default"));
    use_name.clear();
  }
  // The ratio matters only to the *traceidratio samplers; the others ignore it, as the SDKs do.
  const bool takes_ratio = absl::EndsWith(absl::AsciiStrToLower(absl::StripAsciiWhitespace(use_name)), "traceidratio");
  if (absl::StatusOr<Sampler> s = Create("traceidratio", arg); !s.ok()) {
    if (takes_ratio) warnings->push_back(absl::StrCat(s.status().message(), "; ignored, as if unset (ratio 1.0)"));
    use_arg.clear();
  }
  return *Create(use_name, use_arg);
}

bool Sampler::ShouldSample(const TraceParent* parent, const TraceId& trace_id) const {
  if (parent_based_ && parent != nullptr) return parent->sampled();
  return RootDecision(trace_id);
}

bool Sampler::RootDecision(const TraceId& trace_id) const {
  switch (root_) {
    case Root::kAlwaysOn:
      return true;
    case Root::kAlwaysOff:
      return false;
    case Root::kRatio:
      break;
  }
  if (ratio_ >= 1.0) return true;
  if (ratio_ <= 0.0) return false;
  // OpenTelemetry's TraceIdRatioBased: the trace id's 7 rightmost bytes are its randomness R (the
  // 56 bits W3C Trace Context level 2 makes random); the ratio gives the rejection threshold
  // T = 2^56 - round(ratio * 2^56), and R >= T samples. The same trace id gets the same decision
  // in every process using this rule, and a higher ratio samples every trace a lower one does.
  return TraceRandomness(trace_id) >= RejectionThreshold(ratio_);
}

uint64_t TraceRandomness(const TraceId& trace_id) {
  uint64_t r = 0;
  for (int i = 9; i < 16; ++i) r = r << 8 | trace_id[i];
  return r;
}

uint64_t RejectionThreshold(double ratio) {
  constexpr uint64_t kMax = uint64_t{1} << 56;
  if (!(ratio > 0.0)) return kMax;
  if (ratio >= 1.0) return 0;
  // ratio * 2^56 is exact in a double; rounding it (not 1 - ratio) keeps small ratios exact.
  const auto kept = static_cast<uint64_t>(std::llround(std::ldexp(ratio, 56)));
  return kMax - std::min(kept, kMax);
}

std::string Sampler::Description() const {
  const char* root = root_ == Root::kAlwaysOn ? "always_on" : root_ == Root::kAlwaysOff ? "always_off" : "traceidratio";
  std::string out = absl::StrCat(parent_based_ ? "parentbased_" : "", root);
  if (root_ == Root::kRatio) absl::StrAppend(&out, "{", ratio_, "}");
  return out;
}

Sampler Sampler::WithRootRate(int64_t n) const {
  if (n == 1) return Sampler(Root::kAlwaysOn, parent_based_, 1.0);
  if (n <= 0) return Sampler(Root::kAlwaysOff, parent_based_, 0.0);
  return Sampler(Root::kRatio, parent_based_, 1.0 / static_cast<double>(n));
}

int64_t Sampler::RootRate() const {
  switch (root_) {
    case Root::kAlwaysOn:
      return 1;
    case Root::kAlwaysOff:
      return 0;
    case Root::kRatio:
      break;
  }
  if (ratio_ <= 0.0) return 0;
  const double n = 1.0 / ratio_;
  return n >= 9.0e18 ? std::numeric_limits<int64_t>::max() : std::llround(n);
}

}  // namespace chronoserve::server::telemetry
