#include "server/telemetry/trace_control.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text_excerpt.h"

namespace chronoserve::server::telemetry {
namespace {

constexpr const char* kKeys[] = {"trace_level", "trace_rate", "trace_count", "trace_mode", "trace_file", "log_frequency"};

// One key's change: absent (not named), cleared (named with no values) or set.
template <typename T>
struct Change {
  bool named = false;
  std::optional<T> value;  // named and empty: cleared
};

struct Changes {
  Change<bool> level;
  Change<int64_t> rate;
  Change<int64_t> count;
};

// The values as a client sent them, for an error message: the first 4, each cut to 64 bytes.
std::string Quoted(const std::vector<std::string>& values) {
  constexpr size_t kShown = 4;
  std::vector<std::string> shown;
  for (size_t i = 0; i < values.size() && i < kShown; ++i) shown.push_back(absl::StrCat("'", Excerpt(values[i]), "'"));
  if (values.size() > kShown) shown.push_back(absl::StrCat("... (", values.size(), " values)"));
  return absl::StrCat("[", absl::StrJoin(shown, ", "), "]");
}

// A whole number of decimal digits (a leading '-' when `min` < 0), within [min, max]: no sign,
// space or base prefix that SimpleAtoi would take.
bool ParseWhole(const std::string& text, int64_t min, int64_t max, int64_t* n) {
  const size_t digits_from = !text.empty() && text[0] == '-' && min < 0 ? 1 : 0;
  if (text.size() == digits_from || text.size() > 20) return false;
  for (size_t i = digits_from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return absl::SimpleAtoi(text, n) && *n >= min && *n <= max;
}

absl::Status CheckLevel(const std::vector<std::string>& values, Change<bool>* change) {
  change->named = true;
  if (values.empty()) return absl::OkStatus();
  bool off = false, timestamps = false;
  for (const std::string& v : values) {
    if (v == "OFF") {
      off = true;
    } else if (v == "TIMESTAMPS") {
      timestamps = true;
    } else if (v == "TENSORS") {
      return absl::InvalidArgumentError(
          "trace setting 'trace_level' TENSORS is not served: chronoserve's spans carry each request's timestamps "
          "and sizes, not its tensors' contents; use TIMESTAMPS or OFF");
    } else {
      return absl::InvalidArgumentError(absl::StrCat("trace setting 'trace_level' is ", Quoted(values),
                                                     "; it takes OFF or TIMESTAMPS"));
    }
  }
  if (off && timestamps) {
    return absl::InvalidArgumentError(absl::StrCat("trace setting 'trace_level' is ", Quoted(values),
                                                   "; it takes OFF or TIMESTAMPS, not both"));
  }
  change->value = timestamps;
  return absl::OkStatus();
}

// Triton's trace_rate and trace_count are uint32: the same bound here.
constexpr int64_t kMaxTraceNumber = 4294967295;

absl::Status CheckNumber(const char* key, const std::vector<std::string>& values, int64_t min, const char* meaning,
                         Change<int64_t>* change) {
  change->named = true;
  if (values.empty()) return absl::OkStatus();
  int64_t n = 0;
  if (values.size() != 1 || !ParseWhole(values[0], min, kMaxTraceNumber, &n)) {
    return absl::InvalidArgumentError(absl::StrCat("trace setting '", key, "' is ", Quoted(values),
                                                   "; it takes one whole number from ", min, " to ", kMaxTraceNumber,
                                                   " (", meaning, ")"));
  }
  change->value = n;
  return absl::OkStatus();
}

// The read-only keys: accepted when they name the value they have (or no value).
absl::Status CheckFixed(const std::string& key, const std::vector<std::string>& values, const std::string& value,
                        const char* why) {
  if (values.empty() || (values.size() == 1 && values[0] == value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("trace setting '", key, "' is ", Quoted(values), "; it can only be '",
                                                 value, "': ", why));
}

// Why trace_file cannot change, for a refusal.
enum class FileFixed { kCollector, kNoDirectory, kStartFile };

// trace_file's change, when it may change (`dir` set: --trace-file-dir): one plain file name, made
// a path in `dir`, server-wide only; `*file` is set when it differs from `current` (which is also
// accepted as itself). No values: no change (the key only reads).
absl::Status CheckFile(const std::vector<std::string>& values, const std::string& model, const std::string& current,
                       const std::string& dir, std::optional<FileFixed> fixed, std::optional<std::string>* file) {
  if (fixed.has_value()) {
    const char* why = "";
    switch (*fixed) {
      case FileFixed::kCollector:
        why = "chronoserve sends its spans to the OTLP collector, not to a file (start it with --trace-file instead "
              "of a collector to write them to one)";
        break;
      case FileFixed::kNoDirectory:
        why = "a client may name a trace file only on a server started with --trace-file-dir DIR, and then only a "
              "file name in DIR (a path a client names could be any file on the server's disk)";
        break;
      case FileFixed::kStartFile:
        why = "the spans go to the file given at start (--trace-file), for the server's whole run";
        break;
    }
    return CheckFixed("trace_file", values, current, why);
  }
  if (values.empty() || (values.size() == 1 && values[0] == current)) return absl::OkStatus();
  const std::string where = absl::StrCat("a file name, created in --trace-file-dir '", dir, "'");
  if (values.size() != 1 || values[0].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace setting 'trace_file' is ", Quoted(values), "; it takes one ", where));
  }
  const std::string& name = values[0];
  // Control characters too: the name goes into the server's log, where a newline would forge a line.
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (name.find('/') != std::string::npos || name == "." || name == ".." || control || name.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace setting 'trace_file' is ", Quoted(values), "; it takes ", where,
        ", not a path (at most 255 bytes, no '/' or control character, not . or ..)"));
  }
  if (!model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("trace setting 'trace_file' is server-wide: every model's spans go "
                                                   "to one file; send it without a model_name (it was sent for '",
                                                   Excerpt(model), "')"));
  }
  const std::string path = absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/", name);
  if (path != current) *file = path;
  return absl::OkStatus();
}

// Whether `changes` would change anything, so that a server with no trace destination refuses it:
// any of trace_level, trace_rate and trace_count (no values sets one back to its start value), or a
// trace_file other than `current`. trace_mode, log_frequency and a bare trace_file only read.
bool AsksForAChange(const TraceSettingsMap& changes, const std::string& current) {
  for (const auto& [key, values] : changes) {
    if (key == "trace_level" || key == "trace_rate" || key == "trace_count") return true;
    if (key == "trace_file" && !values.empty() && !(values.size() == 1 && values[0] == current)) return true;
  }
  return false;
}

absl::Status Check(const std::string& key, const std::vector<std::string>& values, const std::string& trace_file,
                   Changes* changes) {
  if (key == "trace_level") return CheckLevel(values, &changes->level);
  if (key == "trace_rate") return CheckNumber("trace_rate", values, 0, "one new trace in N; 0: none", &changes->rate);
  if (key == "trace_count") {
    return CheckNumber("trace_count", values, -1, "traces left to record; -1: no limit", &changes->count);
  }
  if (key == "trace_mode") return CheckFixed(key, values, "opentelemetry", "chronoserve sends OpenTelemetry spans");
  if (key == "log_frequency") {
    return CheckFixed(key, values, "0",
                      trace_file.empty() ? "chronoserve sends its spans to the OTLP collector, not to files"
                                         : "every span goes to the one trace_file, never split over files");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown trace setting '", Excerpt(key), "'; the settings are ",
                                                 absl::StrJoin(kKeys, ", ")));
}

}  // namespace

TraceControl::TraceControl(Sampler sampler, bool collector, std::string trace_file, TraceFileOpener open_file,
                           std::string file_dir)
    : start_on_(collector),
      open_file_(std::move(open_file)),
      file_dir_(std::move(file_dir)),
      start_sampler_(sampler),
      exporting_(collector),
      trace_file_(std::move(trace_file)) {
  global_.on = collector;
  global_.sampler = sampler;
  global_.remaining = std::make_unique<std::atomic<int64_t>>(-1);
}

bool TraceControl::TakeOne(std::atomic<int64_t>* remaining) {
  int64_t left = remaining->load(std::memory_order_relaxed);
  while (left != -1) {
    if (left <= 0) return false;
    if (remaining->compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
  }
  return true;
}

TraceControl::Effective TraceControl::EffectiveFor(const std::string& model) const {
  const Settings* own = nullptr;
  if (!model.empty() && !models_.empty()) {
    auto it = models_.find(model);
    if (it != models_.end()) own = &it->second;
  }
  if (own == nullptr) return {*global_.on, &*global_.sampler, global_.remaining.get()};
  return {own->on ? *own->on : *global_.on, own->sampler ? &*own->sampler : &*global_.sampler,
          (own->remaining ? own->remaining : global_.remaining).get()};
}

bool TraceControl::ShouldTrace(const std::string& model, const TraceParent* parent, const TraceId& trace_id) {
  absl::ReaderMutexLock lock(&mu_);
  const Effective e = EffectiveFor(model);
  return e.on && e.sampler->ShouldSample(parent, trace_id) && TakeOne(e.remaining);
}

TraceSettingsMap TraceControl::Describe(const std::string& model) const {
  const Effective e = EffectiveFor(model);
  return {{"trace_level", {e.on && exporting_ ? "TIMESTAMPS" : "OFF"}},
          {"trace_rate", {absl::StrCat(e.sampler->RootRate())}},
          {"trace_count", {absl::StrCat(e.remaining->load(std::memory_order_relaxed))}},
          {"trace_mode", {"opentelemetry"}},
          {"trace_file", {trace_file_}},
          {"log_frequency", {"0"}}};
}

absl::StatusOr<TraceSettingsMap> TraceControl::Update(const std::string& model, const TraceSettingsMap& changes) {
  absl::MutexLock file_lock(&file_mu_);  // the file checked below is the one replaced
  bool exporting;
  std::string current_file;
  {
    absl::ReaderMutexLock lock(&mu_);
    exporting = exporting_;
    current_file = trace_file_;
  }
  // A collector's spans stay with it; a file's (or none yet) may move to another file in
  // --trace-file-dir.
  std::optional<FileFixed> file_fixed;
  if (exporting && current_file.empty()) {
    file_fixed = FileFixed::kCollector;
  } else if (open_file_ == nullptr) {
    file_fixed = current_file.empty() ? FileFixed::kNoDirectory : FileFixed::kStartFile;
  } else if (file_dir_.empty()) {
    file_fixed = FileFixed::kNoDirectory;
  }
  const bool file_changeable = !file_fixed.has_value();
  auto off = [&] {
    return absl::FailedPreconditionError(absl::StrCat(
        "tracing is off: the server was started without a trace collector (--otlp-endpoint, or "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT) or --trace-file, so its trace "
        "settings can be read, not changed",
        file_changeable ? ", until a request names a trace_file in --trace-file-dir to write the spans to "
                          "(server-wide, with or before trace_level TIMESTAMPS)"
        : open_file_ != nullptr
            ? " (start it with --trace-file-dir DIR to let a request name a trace_file in DIR that turns tracing on)"
            : " (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turned it off)"));
  };
  const bool asks_change = AsksForAChange(changes, current_file);
  if (!exporting && !file_changeable && asks_change) return off();
  Changes parsed;
  std::optional<std::string> new_file;
  for (const auto& [key, values] : changes) {
    absl::Status s = key == "trace_file" ? CheckFile(values, model, current_file, file_dir_, file_fixed, &new_file)
                                         : Check(key, values, current_file, &parsed);
    if (!s.ok()) return s;
  }
  if (!exporting && !new_file && asks_change) return off();
  if (new_file) {
    if (absl::Status opened = open_file_(*new_file); !opened.ok()) {
      return absl::Status(opened.code(), absl::StrCat("trace setting 'trace_file': ", opened.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (new_file) {
    exporting_ = true;
    trace_file_ = *new_file;
  }
  const bool server_wide = model.empty();
  Settings& target = server_wide ? global_ : models_[model];
  if (parsed.level.named) {
    if (parsed.level.value) {
      target.on = *parsed.level.value;
    } else {
      target.on = server_wide ? std::optional<bool>(start_on_) : std::nullopt;
    }
  }
  if (parsed.rate.named) {
    if (parsed.rate.value) {
      target.sampler = start_sampler_.WithRootRate(*parsed.rate.value);
    } else {
      target.sampler = server_wide ? std::optional<Sampler>(start_sampler_) : std::nullopt;
    }
  }
  if (parsed.count.named) {
    if (parsed.count.value) {
      target.remaining = std::make_unique<std::atomic<int64_t>>(*parsed.count.value);
    } else {
      target.remaining = server_wide ? std::make_unique<std::atomic<int64_t>>(-1) : nullptr;
    }
  }
  if (!server_wide && !target.on && !target.sampler && !target.remaining) models_.erase(model);
  return Describe(model);
}

}  // namespace chronoserve::server::telemetry
