#include "common/traceparent.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chronoserve {
namespace {

constexpr size_t kVersion00Length = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr size_t kMaxTracestateMembers = 32;

absl::string_view TrimOws(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

// Decodes exactly out.size()*2 lower-case hex characters.
template <size_t N>
bool DecodeHex(absl::string_view hex, std::array<uint8_t, N>& out) {
  if (hex.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = LowerHexValue(hex[2 * i]);
    const int lo = LowerHexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
std::string EncodeHex(const std::array<uint8_t, N>& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kDigits[id[i] >> 4];
    out[2 * i + 1] = kDigits[id[i] & 0xf];
  }
  return out;
}

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKeyChar(char c) {
  return IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// simple-key = lcalpha 0*255(keychar); tenant-id = (lcalpha / DIGIT) 0*240(keychar);
// system-id = lcalpha 0*13(keychar).
bool ValidKey(absl::string_view key) {
  const size_t at = key.find('@');
  auto valid_part = [](absl::string_view part, size_t max_len, bool digit_first) {
    if (part.empty() || part.size() > max_len) return false;
    if (!IsLcAlpha(part[0]) && !(digit_first && IsDigit(part[0]))) return false;
    return std::all_of(part.begin() + 1, part.end(), IsKeyChar);
  };
  if (at == absl::string_view::npos) return valid_part(key, 256, false);
  return valid_part(key.substr(0, at), 241, true) && valid_part(key.substr(at + 1), 14, false);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
bool ValidValue(absl::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::all_of(value.begin(), value.end(), [](char c) {
    return c >= 0x20 && c <= 0x7e && c != ',' && c != '=';
  });
}

}  // namespace

absl::StatusOr<TraceParent> ParseTraceparent(absl::string_view header) {
  header = TrimOws(header);
  if (header.size() < kVersion00Length) {
    return absl::InvalidArgumentError(absl::StrCat("traceparent: ", header.size(), " characters, need 55"));
  }
  std::array<uint8_t, 1> version{};
  if (!DecodeHex(header.substr(0, 2), version) || header[2] != '-') {
    return absl::InvalidArgumentError("traceparent: bad version");
  }
  if (version[0] == 0xff) return absl::InvalidArgumentError("traceparent: version ff is invalid");
  if (version[0] == 0 && header.size() != kVersion00Length) {
    return absl::InvalidArgumentError("traceparent: version 00 must be exactly 55 characters");
  }
  // A future version may append fields, always after a '-'.
  if (header.size() > kVersion00Length && header[kVersion00Length] != '-') {
    return absl::InvalidArgumentError("traceparent: trailing data not separated by '-'");
  }
  TraceParent parsed;
  parsed.version = version[0];
  std::array<uint8_t, 1> flags{};
  if (!DecodeHex(header.substr(3, 32), parsed.trace_id) || header[35] != '-' ||
      !DecodeHex(header.substr(36, 16), parsed.parent_id) || header[52] != '-' ||
      !DecodeHex(header.substr(53, 2), flags)) {
    return absl::InvalidArgumentError("traceparent: fields must be lower-case hex separated by '-'");
  }
  if (IsZero(parsed.trace_id)) return absl::InvalidArgumentError("traceparent: all-zero trace-id");
  if (IsZero(parsed.parent_id)) return absl::InvalidArgumentError("traceparent: all-zero parent-id");
  parsed.flags = flags[0];
  return parsed;
}

std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags) {
  const std::array<uint8_t, 1> f{flags};
  return absl::StrCat("00-", EncodeHex(trace_id), "-", EncodeHex(span_id), "-", EncodeHex(f));
}

absl::StatusOr<std::string> NormalizeTracestate(absl::string_view header) {
  std::vector<std::string> members;
  std::set<std::string> keys;
  for (absl::string_view member : absl::StrSplit(header, ',')) {
    member = TrimOws(member);
    if (member.empty()) continue;
    const size_t eq = member.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError("tracestate: a list-member has no '='");
    }
    const absl::string_view key = member.substr(0, eq);
    if (!ValidKey(key)) return absl::InvalidArgumentError(absl::StrCat("tracestate: bad key '", key, "'"));
    if (!ValidValue(member.substr(eq + 1))) {
      return absl::InvalidArgumentError(absl::StrCat("tracestate: bad value for key '", key, "'"));
    }
    if (!keys.emplace(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("tracestate: duplicate key '", key, "'"));
    }
    members.emplace_back(member);
    if (members.size() > kMaxTracestateMembers) {
      return absl::InvalidArgumentError("tracestate: more than 32 list-members");
    }
  }
  return absl::StrJoin(members, ",");
}

std::string ToHex(const TraceId& id) { return EncodeHex(id); }
std::string ToHex(const SpanId& id) { return EncodeHex(id); }
bool IsZero(const TraceId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}
bool IsZero(const SpanId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace chronoserve
