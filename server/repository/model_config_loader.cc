#include "server/repository/model_config_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/dtype.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/text_excerpt.h"
#include "proto/model_config.pb.h"
#include "server/repository/warmup_config.h"

namespace chronoserve::server {
namespace fs = std::filesystem;
namespace pb = chronoserve::config;

namespace {

// A zero-based line and column, as protobuf's tokenizer counts them.
using TextPosition = std::pair<int, int>;

// The tokenizer's columns count bytes, a tab reaching the next multiple of 8.
constexpr int kTokenizerTabWidth = 8;

int NextColumn(char c, int column) {
  return c == '\t' ? column + kTokenizerTabWidth - column % kTokenizerTabWidth : column + 1;
}

// The offset in `text` of `at`; a column past its line's end gives the line's end.
size_t OffsetOf(absl::string_view text, TextPosition at) {
  size_t i = 0;
  for (int line = 0; line < at.first; ++line) {
    const size_t newline = text.find('\n', i);
    if (newline == absl::string_view::npos) return text.size();
    i = newline + 1;
  }
  for (int column = 0; i < text.size() && text[i] != '\n' && column < at.second; ++i) {
    column = NextColumn(text[i], column);
  }
  return i;
}

TextPosition PositionOf(absl::string_view text, size_t offset) {
  TextPosition at{0, 0};
  for (size_t k = 0; k < std::min(offset, text.size()); ++k) {
    at = text[k] == '\n' ? TextPosition{at.first + 1, 0} : TextPosition{at.first, NextColumn(text[k], at.second)};
  }
  return at;
}

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string source) : source_(std::move(source)) {}
  // Positions the parser reports are in a rewriting of the file (`read`, each of whose characters
  // stands for the one at `origin`'s offset in `file`): errors name the file's own line and column.
  void ReadingARewriting(absl::string_view read, absl::string_view file, const std::vector<size_t>* origin) {
    read_ = read;
    file_ = file;
    origin_ = origin;
  }
  void AddError(int line, int column, const std::string& message) override {
    if (origin_ != nullptr && line >= 0 && column >= 0) {
      const size_t offset = OffsetOf(read_, {line, column});
      std::tie(line, column) = PositionOf(file_, (*origin_)[std::min(offset, origin_->size() - 1)]);
    }
    if (errors_.empty()) first_error_ = {line, column};
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  // Where the first error is (in the file); {-1, -1} with none.
  TextPosition first_error() const { return first_error_; }
  void AddWarning(int line, int column, const std::string& message) override {
    // With unknown fields allowed, the parser reports each one as a warning naming the field.
    // ("Message type \"chronoserve.config.ModelInput\" has no field named \"reshape\"").
    const std::string marker = "has no field named \"";
    if (message.find(marker) != std::string::npos) {
      unknown_.push_back(Quoted(message, marker));
      unknown_in_.push_back(Quoted(message, "Message type \""));
    } else {
      warnings_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
    }
  }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& unknown() const { return unknown_; }
  // The message type (without the package) each unknown() field was found in.
  const std::vector<std::string>& unknown_in() const { return unknown_in_; }

 private:
  std::string source_;
  absl::string_view read_, file_;
  const std::vector<size_t>* origin_ = nullptr;
  TextPosition first_error_{-1, -1};
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  std::vector<std::string> unknown_;
  std::vector<std::string> unknown_in_;

  // The text between `marker` and the next '"', without a "chronoserve.config." prefix.
  static std::string Quoted(const std::string& message, const std::string& marker) {
    auto pos = message.find(marker);
    if (pos == std::string::npos) return "";
    auto start = pos + marker.size();
    std::string type = message.substr(start, message.find('"', start) - start);
    const std::string package = "chronoserve.config.";
    return type.rfind(package, 0) == 0 ? type.substr(package.size()) : type;
  }
};

absl::StatusOr<DataType> ConvertType(pb::DataType type, const std::string& where) {
  switch (type) {
    case pb::TYPE_BOOL: return DataType::kBool;
    case pb::TYPE_UINT8: return DataType::kUint8;
    case pb::TYPE_UINT16: return DataType::kUint16;
    case pb::TYPE_UINT32: return DataType::kUint32;
    case pb::TYPE_UINT64: return DataType::kUint64;
    case pb::TYPE_INT8: return DataType::kInt8;
    case pb::TYPE_INT16: return DataType::kInt16;
    case pb::TYPE_INT32: return DataType::kInt32;
    case pb::TYPE_INT64: return DataType::kInt64;
    case pb::TYPE_FP16: return DataType::kFp16;
    case pb::TYPE_BF16: return DataType::kBf16;
    case pb::TYPE_FP32: return DataType::kFp32;
    case pb::TYPE_FP64: return DataType::kFp64;
    case pb::TYPE_STRING:
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": chronoserve does not serve TYPE_STRING (BYTES) tensors; send text as token ids "
          "(TYPE_INT64 or TYPE_INT32) or raw bytes (TYPE_UINT8)"));
    default:
      return absl::InvalidArgumentError(absl::StrCat(where, ": data_type is missing or TYPE_INVALID"));
  }
}

template <typename PbTensor>
absl::StatusOr<std::vector<TensorSpec>> ConvertTensors(
    const google::protobuf::RepeatedPtrField<PbTensor>& tensors, const char* what,
    const std::string& source) {
  std::vector<TensorSpec> out;
  std::set<std::string> names;
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": at least one ", what, " is required"));
  }
  for (const auto& t : tensors) {
    const std::string where = absl::StrCat(source, ": ", what, " '", t.name(), "'");
    if (t.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": an ", what, " has no name"));
    }
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is declared twice"));
    }
    TensorSpec spec;
    spec.name = t.name();
    ASSIGN_OR_RETURN(spec.dtype, ConvertType(t.data_type(), where));
    if (t.dims().empty()) {  // as Triton: a tensor must have dims (one value per item: dims: [ 1 ])
      return absl::InvalidArgumentError(absl::StrCat(where, ": dims are required (one value per item is dims: [ 1 ])"));
    }
    for (int64_t d : t.dims()) {
      if (d == 0 || d < -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": dims must be positive or -1, got ", d));
      }
      spec.dims.push_back(d);
    }
    // One item (variable dims as 1) must have a byte size int64 can hold: request and output sizes
    // are computed from it.
    std::vector<int64_t> item = spec.dims;
    for (auto& d : item) d = d < 0 ? 1 : d;
    if (!ByteCount(ElementCount(item), spec.dtype).has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dims ", ShapeString(spec.dims), " make one item larger than 2^63 bytes"));
    }
    out.push_back(std::move(spec));
  }
  return out;
}

constexpr int kMaxInstanceCount = 256;
// The warm-up before READY runs every batch size up to max_batch_size (twice each) unless the model's
// warmup_batch_sizes names fewer, so its work grows with the square of the setting: beyond this a
// typo (an extra zero) would hold the model in LOADING for hours.
constexpr int kMaxMaxBatchSize = 65536;

absl::StatusOr<std::vector<InstanceGroupSpec>> ConvertInstanceGroups(const pb::ModelConfig& config,
                                                                     const std::string& source) {
  std::vector<InstanceGroupSpec> groups;
  for (const auto& g : config.instance_group()) {
    InstanceGroupSpec spec;
    spec.name = g.name();
    switch (g.kind()) {
      case pb::ModelInstanceGroup::KIND_AUTO: spec.kind = InstanceKind::kAuto; break;
      case pb::ModelInstanceGroup::KIND_CPU: spec.kind = InstanceKind::kCpu; break;
      case pb::ModelInstanceGroup::KIND_GPU: spec.kind = InstanceKind::kGpu; break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": instance_group kind KIND_MODEL is not supported"));
    }
    spec.count = g.count() == 0 ? 1 : g.count();
    // Each worker is a thread with its own CUDA stream, staging buffers and warm-up: a typo such
    // as 100000 took minutes and gigabytes before the server answered anything.
    if (spec.count < 1 || spec.count > kMaxInstanceCount) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": instance_group count ", g.count(), ": expected 1 to ",
                                                     kMaxInstanceCount, " (workers per group, on each GPU it lists)"));
    }
    for (int gpu : g.gpus()) {
      if (gpu < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": instance_group gpus lists ", gpu, ": expected a CUDA device ordinal (0 or more)"));
      }
      spec.gpus.push_back(gpu);
    }
    if (spec.kind == InstanceKind::kCpu && !spec.gpus.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": KIND_CPU instance_group lists gpus"));
    }
    spec.host_policy = g.host_policy();
    groups.push_back(std::move(spec));
  }
  if (groups.empty()) groups.push_back(InstanceGroupSpec{});
  return groups;
}

// Durations the scheduler turns into int64 nanoseconds: at most a day (like keep_warm_ms).
absl::Status CheckMicroseconds(uint64_t us, const char* field, const std::string& source) {
  constexpr uint64_t kMaxMicroseconds = 86'400'000'000;
  if (us <= kMaxMicroseconds) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, " ", us, ": expected 0 to ",
                                                 kMaxMicroseconds, " (1 day)"));
}

absl::Status ConvertBatching(const pb::ModelConfig& config, const std::string& source,
                             ModelSpec* spec) {
  if (!config.has_dynamic_batching()) return absl::OkStatus();
  const auto& db = config.dynamic_batching();
  // With max_batch_size 0, as in Triton, every request runs alone but the queue policy (size,
  // timeout) still applies.
  DynamicBatchingSpec& out = spec->dynamic_batching;
  out.enabled = true;
  RETURN_IF_ERROR(CheckMicroseconds(db.max_queue_delay_microseconds(),
                                    "dynamic_batching.max_queue_delay_microseconds", source));
  out.max_queue_delay_us = db.max_queue_delay_microseconds();
  for (int size : db.preferred_batch_size()) {
    if (spec->max_batch_size == 0) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": preferred_batch_size ", size,
                                                     " on a model that does not batch (max_batch_size 0)"));
    }
    if (size < 1 || size > spec->max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": preferred_batch_size ", size,
                                                     " is outside 1..max_batch_size (",
                                                     spec->max_batch_size, ")"));
    }
    out.preferred_batch_sizes.push_back(size);
  }
  std::sort(out.preferred_batch_sizes.begin(), out.preferred_batch_sizes.end());
  const auto& qp = db.default_queue_policy();
  out.queue_policy.max_queue_size = qp.max_queue_size();
  RETURN_IF_ERROR(CheckMicroseconds(qp.default_timeout_microseconds(),
                                    "dynamic_batching.default_queue_policy.default_timeout_microseconds", source));
  out.queue_policy.default_timeout_microseconds = qp.default_timeout_microseconds();
  out.queue_policy.timeout_action_delay = qp.timeout_action() == pb::ModelQueuePolicy::DELAY;
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("model name is empty");
  if (name.size() > 255) return absl::InvalidArgumentError("model name is longer than 255 bytes");
  if (name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("model name '", absl::CEscape(name), "' holds a NUL byte"));
  }
  if (!IsUtf8(name)) {
    return absl::InvalidArgumentError(absl::StrCat("model name '", absl::CEscape(name),
                                                   "' is not UTF-8 (a name travels in gRPC strings, Prometheus labels "
                                                   "and traces, which need it)"));
  }
  if (name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model name '", name, "' is not a single path component (no '/', '\\', '.' or '..')"));
  }
  return absl::OkStatus();
}

namespace {
// Fields of Triton's model configuration that model_config.proto leaves out, by the message they
// belong to. Those that change which tensors the model receives, or how requests relate to each
// other, fail the load: served without them the model would get other inputs than under Triton.
// The rest are logged and ignored. A field in neither list is no field of that message in
// Triton's either (e.g. `graph` inside `cuda`, meant as `graphs`): a typo, refused.
using FieldsByMessage = std::map<std::string, std::set<std::string>>;
const FieldsByMessage& RefusedTritonFields() {
  static const FieldsByMessage kRefused = {
      {"ModelConfig", {"batch_input", "batch_output", "sequence_batching"}},
      {"ModelInput", {"reshape"}},
      {"ModelOutput", {"reshape"}},
  };
  return kRefused;
}
const FieldsByMessage& IgnoredTritonFields() {
  static const FieldsByMessage kIgnored = {
      {"ModelConfig",
       {"runtime", "ensemble_scheduling", "cc_model_filenames", "metric_tags", "model_operations",
        "model_repository_agents", "response_cache", "model_metrics"}},
      {"ModelInstanceGroup", {"rate_limiter", "secondary_devices", "profile", "passive"}},
      {"ModelInput", {"format", "is_non_linear_format_io"}},
      {"ModelOutput", {"label_filename", "is_non_linear_format_io"}},
      {"ModelDynamicBatching", {"priority_levels", "default_priority_level", "priority_queue_policy"}},
      {"ModelOptimizationPolicy",
       {"graph", "priority", "execution_accelerators", "input_pinned_memory", "output_pinned_memory",
        "gather_kernel_buffer_threshold", "eager_batching"}},
      {"ModelOptimizationPolicy.Cuda", {"graph_spec"}},
  };
  return kIgnored;
}

// Of those, the message fields whose presence is the setting, whatever their own fields say.
const FieldsByMessage& TritonPresenceFields() {
  static const FieldsByMessage kPresence = {
      {"ModelConfig", {"sequence_batching", "ensemble_scheduling"}},
      {"ModelInput", {"reshape"}},
      {"ModelOutput", {"reshape"}},
  };
  return kPresence;
}

bool Lists(const FieldsByMessage& fields, const std::string& message, const std::string& field) {
  auto it = fields.find(message);
  return it != fields.end() && it->second.count(field) > 0;
}

// `field`'s path in config.pbtxt, from the message type it was found in (`dynamic_batching.priority_levels`).
std::string FieldPath(const std::string& message, const std::string& field) {
  static const std::map<std::string, std::string> kPrefix = {
      {"ModelInstanceGroup", "instance_group."},
      {"ModelInput", "input."},
      {"ModelOutput", "output."},
      {"ModelQueuePolicy", "dynamic_batching.default_queue_policy."},
      {"ModelDynamicBatching", "dynamic_batching."},
      {"ModelOptimizationPolicy", "optimization."},
      {"ModelOptimizationPolicy.Cuda", "optimization.cuda."},
      {"ModelWarmup", "model_warmup."},
      {"ModelWarmup.Input", "model_warmup.inputs."},
      {"ModelVersionPolicy", "version_policy."},
  };
  auto it = kPrefix.find(message);
  return it == kPrefix.end() ? field : it->second + field;
}

absl::Status RefusedField(const std::string& field, const std::string& source) {
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": field '", field, "' is not supported by chronoserve: the model would receive other tensors "
      "(or requests) than under Triton; remove it and do the same inside the model"));
}

absl::Status CheckUnknownFields(const std::vector<std::string>& unknown, const std::vector<std::string>& in,
                                const std::string& source) {
  for (size_t i = 0; i < unknown.size(); ++i) {
    const std::string& field = unknown[i];
    if (Lists(RefusedTritonFields(), in[i], field)) return RefusedField(field, source);
    if (!Lists(IgnoredTritonFields(), in[i], field)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": unknown field '", field, "' in ", in[i],
                                                     ": Triton's model configuration has no such field there (a typo?)"));
    }
  }
  return absl::OkStatus();
}

// Fields model_config.proto declares (Triton's) that chronoserve does not act on, by their path in
// config.pbtxt, when set to something other than their default.
void AppendUnimplementedFields(const pb::ModelConfig& config, std::vector<std::string>* fields) {
  if (std::any_of(config.input().begin(), config.input().end(),
                  [](const pb::ModelInput& in) { return in.optional(); })) {
    fields->push_back("input.optional");
  }
  const auto& db = config.dynamic_batching();
  if (db.preserve_ordering()) fields->push_back("dynamic_batching.preserve_ordering");
  if (db.default_queue_policy().allow_timeout_override()) {
    fields->push_back("dynamic_batching.default_queue_policy.allow_timeout_override");
  }
  const auto& cuda = config.optimization().cuda();
  if (cuda.busy_wait_events()) fields->push_back("optimization.cuda.busy_wait_events");
  if (cuda.output_copy_stream()) fields->push_back("optimization.cuda.output_copy_stream");
}

bool IdentifierChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Skips spaces and '#' comments from `i`.
size_t SkipSpaceAndComments(absl::string_view text, size_t i) {
  while (i < text.size()) {
    if (absl::ascii_isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (text[i] == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

std::string NormalizeListsForSkipping(absl::string_view text, std::vector<size_t>* origin) {
  std::string out;
  out.reserve(text.size() + 32);
  if (origin != nullptr) {
    origin->clear();
    origin->reserve(text.size() + 33);
  }
  // Appends text[from, to), each character's offset noted.
  const auto copy = [&](size_t from, size_t to) {
    out.append(text.data() + from, to - from);
    if (origin != nullptr) {
      for (size_t k = from; k < to; ++k) origin->push_back(k);
    }
  };
  // Appends `c`, which stands where text[at] is.
  const auto put = [&](char c, size_t at) {
    out.push_back(c);
    if (origin != nullptr) origin->push_back(at);
  };
  bool after_colon = false;  // the last character outside spaces, comments and strings was ':'
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') {  // a comment, to the end of its line
      const size_t end = std::min(text.find('\n', i), text.size());
      copy(i, end);
      i = end;
    } else if (c == '"' || c == '\'') {  // a string, with its escapes
      size_t j = i + 1;
      while (j < text.size() && text[j] != c && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      copy(i, j);
      i = j;
      after_colon = false;
    } else if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < text.size() && IdentifierChar(text[j])) ++j;
      // A field name (not a value after ':') followed by a list, with or without its colon.
      const size_t next = SkipSpaceAndComments(text, j);
      size_t list = next;
      if (list < text.size() && text[list] == ':') list = SkipSpaceAndComments(text, list + 1);
      const bool has_list = !after_colon && list < text.size() && text[list] == '[';
      const size_t close = has_list ? SkipSpaceAndComments(text, list + 1) : text.size();
      after_colon = false;
      if (has_list && close < text.size() && text[close] == ']') {
        // An empty list, which the skipper cannot take (`shape: [ ]`): the same as no field at all,
        // so the field goes, with a separator after it; its line breaks stay, so that an error
        // later in the text is reported on its own line.
        size_t end = SkipSpaceAndComments(text, close + 1);
        if (end < text.size() && (text[end] == ',' || text[end] == ';')) ++end;
        for (size_t k = i; k < end; ++k) {
          if (text[k] == '\n') put('\n', k);
        }
        i = end;
        continue;
      }
      copy(i, j);
      if (has_list && list == next) put(':', j);  // `name [` becomes `name: [`
      i = j;
    } else {
      if (!absl::ascii_isspace(static_cast<unsigned char>(c))) after_colon = c == ':';
      put(c, i);
      ++i;
    }
  }
  if (origin != nullptr) origin->push_back(text.size());
  return out;
}

namespace {

absl::Status CheckParsedConfig(const pb::ModelConfig& config, const std::string& source,
                               const std::vector<std::string>& unknown, const std::vector<std::string>& unknown_in,
                               std::vector<std::string>* ignored_fields);

absl::Status ParseConfigProto(const std::string& text, const std::string& source,
                              pb::ModelConfig* config, std::vector<std::string>* ignored_fields) {
  // A UTF-8 byte-order mark, which some Windows editors write, is not text the parser reads.
  absl::string_view body = text;
  absl::ConsumePrefix(&body, "\xEF\xBB\xBF");
  const std::string text_without_bom(body);
  CollectErrors errors(source);
  std::string normalized;  // the text read again, and where each of its characters was
  std::vector<size_t> origin;
  CollectErrors again(source);
  const CollectErrors* read = &errors;  // the reading that parsed
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);
  if (!parser.ParseFromString(text_without_bom, config)) {
    // Triton writes lists of messages without a colon (`resources [ { ... } ]`), and protobuf's text
    // parser takes that form only for fields it knows: skipping one model_config.proto leaves out
    // (rate_limiter's resources, batch_input...), it wants `resources: [`, and it cannot skip an
    // empty list (`reshape: { shape: [ ] }`) at all. Read again with the colons added and the empty
    // lists dropped (the lines kept). If that fails too, the reading that got further is the one
    // whose errors are shown: past the first's error, the second's is the text's real fault (the
    // first's was only Triton's form).
    normalized = NormalizeListsForSkipping(text_without_bom, &origin);
    again.ReadingARewriting(normalized, text_without_bom, &origin);
    google::protobuf::TextFormat::Parser retry;
    retry.RecordErrorsTo(&again);
    retry.AllowUnknownField(true);
    config->Clear();
    if (!retry.ParseFromString(normalized, config)) {
      const CollectErrors& shown = again.first_error() > errors.first_error() ? again : errors;
      return absl::InvalidArgumentError(shown.errors().empty() ? absl::StrCat(source, ": cannot parse")
                                                               : absl::StrJoin(shown.errors(), "; "));
    }
    read = &again;
  }
  return CheckParsedConfig(*config, source, read->unknown(), read->unknown_in(), ignored_fields);
}

// What every configuration read goes through, text or JSON: the fields model_config.proto lacks
// (`unknown`, found in the message types `unknown_in`) refused or ignored as Triton's, those that
// change what the model receives refused, and `ignored_fields` listed.
absl::Status CheckParsedConfig(const pb::ModelConfig& config, const std::string& source,
                               const std::vector<std::string>& unknown, const std::vector<std::string>& unknown_in,
                               std::vector<std::string>* ignored_fields) {
  RETURN_IF_ERROR(CheckUnknownFields(unknown, unknown_in, source));
  // Declared so that their default (false), which Triton's own configs often spell out, loads; set,
  // they would change what the model receives.
  for (const pb::ModelInput& in : config.input()) {
    if (in.is_shape_tensor()) return RefusedField("is_shape_tensor", source);
    if (in.allow_ragged_batch()) return RefusedField("allow_ragged_batch", source);
  }
  for (const pb::ModelOutput& out : config.output()) {
    if (out.is_shape_tensor()) return RefusedField("is_shape_tensor", source);
  }
  if (ignored_fields != nullptr) {
    // Each name once, in the order first seen (the parser reports every occurrence).
    std::vector<std::string> fields;
    for (size_t i = 0; i < unknown.size(); ++i) fields.push_back(FieldPath(unknown_in[i], unknown[i]));
    AppendUnimplementedFields(config, &fields);
    ignored_fields->clear();
    std::set<std::string> seen;
    for (auto& field : fields) {
      if (seen.insert(field).second) ignored_fields->push_back(std::move(field));
    }
  }
  return absl::OkStatus();
}

// "maxBatchSize" -> "max_batch_size": how config.pbtxt and the lists of Triton's fields name a field.
std::string SnakeCase(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (absl::ascii_isupper(c)) {
      out.push_back('_');
      out.push_back(absl::ascii_tolower(c));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// What a walk over a JSON configuration (parsed as google.protobuf.Value) finds: the keys a message
// type has no field for, each with the type it was found in (without the package), as the text
// parser reports them; and the list fields given something other than a list, which protobuf's JSON
// parser would take as a list of one.
struct JsonFieldFindings {
  std::vector<std::string> unknown;
  std::vector<std::string> unknown_in;
  std::vector<std::string> not_lists;
};

// Whether a JSON value says nothing: null, false, 0 (or "0", as protobuf's JSON writes a 64-bit
// zero), "", an enum's *_NONE, [] or {} (or an object of such). Triton writes its configuration
// with every primitive field (ModelConfigToJson prints them at their defaults), so a config it
// exported holds "batch_input": [] and "format": "FORMAT_NONE" for fields chronoserve lacks: those
// are as if absent. An object is printed only when its field was set, so for a field whose
// presence is the setting (TritonPresenceFields: `reshape` to a scalar is {"shape": []}) no object
// says nothing.
bool SaysNothing(const google::protobuf::Value& value, bool presence_matters = false) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNullValue:
    case google::protobuf::Value::KIND_NOT_SET:
      return true;
    case google::protobuf::Value::kBoolValue:
      return !value.bool_value();
    case google::protobuf::Value::kNumberValue:
      return value.number_value() == 0;
    case google::protobuf::Value::kStringValue:
      return value.string_value().empty() || value.string_value() == "0" ||
             absl::EndsWith(value.string_value(), "_NONE");
    case google::protobuf::Value::kListValue:
      return value.list_value().values().empty();
    case google::protobuf::Value::kStructValue:
      if (presence_matters) return false;
      for (const auto& [key, child] : value.struct_value().fields()) {
        if (!SaysNothing(child)) return false;
      }
      return true;
  }
  return false;
}

// Takes out of a JSON configuration the keys that `type` has no field for, at any depth, and notes
// the list fields whose value is not a list. A key of Triton's that chronoserve lacks (refused or
// ignored) whose value says nothing (SaysNothing) is taken out without a note; any other key is
// noted whatever its value (a typo stays a typo, `"dynamic_batchin": {}` included).
void TakeUnknownJsonFields(google::protobuf::Value* value, const google::protobuf::Descriptor* type,
                           JsonFieldFindings* found) {
  if (!value->has_struct_value()) return;
  constexpr absl::string_view kPackage = "chronoserve.config.";
  const std::string type_name(absl::StripPrefix(type->full_name(), kPackage));
  auto* fields = value->mutable_struct_value()->mutable_fields();
  for (auto it = fields->begin(); it != fields->end();) {
    const std::string& key = it->first;
    google::protobuf::Value& child = it->second;
    const google::protobuf::FieldDescriptor* field = type->FindFieldByName(key);
    if (field == nullptr) field = type->FindFieldByCamelcaseName(key);
    if (field == nullptr) {
      const std::string name = SnakeCase(key);
      const bool tritons = Lists(RefusedTritonFields(), type_name, name) || Lists(IgnoredTritonFields(), type_name, name);
      if (!tritons || !SaysNothing(child, Lists(TritonPresenceFields(), type_name, name))) {
        found->unknown.push_back(name);
        found->unknown_in.push_back(type_name);
      }
      it = fields->erase(it);
      continue;
    }
    if (field->is_repeated() && !field->is_map() && !child.has_list_value() && !child.has_null_value()) {
      found->not_lists.push_back(absl::StrCat("'", field->name(), "' in ", type_name));
    }
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
      if (field->is_map()) {
        const google::protobuf::FieldDescriptor* mapped = field->message_type()->map_value();
        if (mapped->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE && child.has_struct_value()) {
          for (auto& [entry_key, entry] : *child.mutable_struct_value()->mutable_fields()) {
            TakeUnknownJsonFields(&entry, mapped->message_type(), found);
          }
        }
      } else if (field->is_repeated()) {
        if (child.has_list_value()) {
          for (google::protobuf::Value& element : *child.mutable_list_value()->mutable_values()) {
            TakeUnknownJsonFields(&element, field->message_type(), found);
          }
        }
      } else {
        TakeUnknownJsonFields(&child, field->message_type(), found);
      }
    }
    ++it;
  }
}

// Reads `json` as strict JSON (RFC 8259, which protobuf's parser is not: it takes trailing commas)
// and refuses a key given twice in one object, which protobuf would refuse naming its own internals
// or, for a map, keep the last of. Builds nothing; the first fault found, on one line.
class StrictJsonCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  const std::string& fault() const { return fault_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  // The configuration passes through google.protobuf.Value, whose numbers are doubles: an integer
  // past 2^53 would reach its field rounded. protobuf's JSON takes 64-bit integers as strings too
  // (and writes them so), which keep every digit.
  bool number_integer(number_integer_t v) override {
    return v >= -kExactInDouble && v <= kExactInDouble ? true : TooLarge(std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return v <= static_cast<number_unsigned_t>(kExactInDouble) ? true : TooLarge(std::to_string(v));
  }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    last_key_ = key;
    if (keys_.back().insert(key).second) return true;
    fault_ = absl::StrCat("key '", key, "' is given twice in one object");
    return false;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& error) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." without
    // the library's tag.
    absl::string_view what = error.what();
    if (const size_t tag_end = what.find("] "); absl::StartsWith(what, "[json.exception.") && tag_end != what.npos) {
      what.remove_prefix(tag_end + 2);
    }
    fault_ = std::string(what);
    return false;
  }

 private:
  static constexpr int64_t kExactInDouble = int64_t{1} << 53;
  bool TooLarge(const std::string& digits) {
    fault_ = absl::StrCat("the integer ", digits, " (at '", last_key_, "') is beyond 2^53, which a JSON number "
                          "cannot carry exactly here; write it as a string, \"", digits, "\", as protobuf's JSON "
                          "writes 64-bit integers");
    return false;
  }

  std::vector<std::set<std::string>> keys_;
  std::string last_key_;
  std::string fault_;
};

// How deep `json`'s arrays and objects nest (outside strings); stops counting past `limit`.
int JsonDepth(absl::string_view json, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size() && deepest <= limit; ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// protobuf's JSON error on one line: a message it follows with the text around the error and a
// line with a caret under the spot becomes "message at '<the text from the spot on>'".
std::string JsonErrorLine(absl::string_view message) {
  const std::vector<absl::string_view> lines = absl::StrSplit(message, '\n');
  if (lines.size() == 3 && absl::EndsWith(absl::StripTrailingAsciiWhitespace(lines[2]), "^")) {
    const size_t at = std::min(lines[2].find('^'), lines[1].size());
    return absl::StrCat(absl::StripSuffix(lines[0], "."), " at '", lines[1].substr(at, 40), "'");
  }
  return absl::StrReplaceAll(message, {{"\n", " "}});
}

// Triton's model configuration as JSON (RepositoryModelLoad's "config" parameter): protobuf's JSON
// form of model_config.proto, field names as in config.pbtxt or in lowerCamelCase. Triton's fields
// that model_config.proto leaves out are refused or ignored as in a config.pbtxt, any other unknown
// key is refused naming it; then the checks a config.pbtxt gets.
absl::Status ParseConfigJson(const std::string& json, const std::string& source, pb::ModelConfig* config,
                             std::vector<std::string>* ignored_fields) {
  // Triton's configuration nests 6 levels at most (model_warmup.inputs.value.dims); protobuf's JSON
  // parser takes time in the square of the depth (200,000 levels: minutes of a CPU), so a deeper
  // text is refused before it is parsed.
  constexpr int kMaxDepth = 32;
  auto not_config = [&source](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a model configuration in JSON (", why, ")"));
  };
  if (JsonDepth(json, kMaxDepth) > kMaxDepth) {
    return not_config(absl::StrCat("its arrays and objects nest more than ", kMaxDepth, " levels deep"));
  }
  StrictJsonCheck strict;
  if (!nlohmann::json::sax_parse(json, &strict) && !strict.fault().empty()) return not_config(strict.fault());
  google::protobuf::Value tree;
  if (const auto read = google::protobuf::util::JsonStringToMessage(json, &tree); !read.ok()) {
    return not_config(JsonErrorLine(std::string(read.message())));
  }
  if (!tree.has_struct_value()) return not_config("a JSON object was expected");
  JsonFieldFindings found;
  TakeUnknownJsonFields(&tree, pb::ModelConfig::descriptor(), &found);
  RETURN_IF_ERROR(CheckUnknownFields(found.unknown, found.unknown_in, source));  // before a value's error in such a field
  if (!found.not_lists.empty()) {
    return not_config(absl::StrCat("field ", found.not_lists.front(), " takes a list (in [ ])"));
  }
  // The rest strictly: an enum name the proto lacks (`"kind": "KIND_FOO"`) is refused, as in config.pbtxt.
  std::string known;
  if (const auto written = google::protobuf::util::MessageToJsonString(tree, &known); !written.ok()) {
    return not_config(JsonErrorLine(std::string(written.message())));
  }
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(known, config); !parsed.ok()) {
    return not_config(JsonErrorLine(std::string(parsed.message())));
  }
  return CheckParsedConfig(*config, source, found.unknown, found.unknown_in, ignored_fields);
}

absl::StatusOr<ModelSpec> SpecFromProto(const pb::ModelConfig& config, const std::string& source,
                                        const std::string& model_name) {
  ModelSpec spec;
  spec.name = config.name().empty() ? model_name : config.name();
  if (spec.name != model_name) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": name '", config.name(),
                                                   "' does not match its directory '", model_name, "'"));
  }
  // As Triton: the platform, the backend or both, and when both they agree.
  const bool torch = (config.platform() == "pytorch_libtorch" || config.platform().empty()) &&
                     (config.backend() == "pytorch" || config.backend().empty());
  if (config.platform() == "ensemble") {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ensembles are not served by chronoserve; serve each step as a model of its own "
        "(platform \"pytorch_libtorch\") and chain them in the client, or script the steps into one model"));
  }
  if (config.model_transaction_policy().decoupled()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": model_transaction_policy.decoupled is true: chronoserve answers every request with exactly "
        "one response and serves no decoupled model; remove it, or set it false, for a model that returns one "
        "result a request"));
  }
  if (!torch) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": platform '", config.platform(), "' / backend '", config.backend(),
        "' is not served; chronoserve serves platform \"pytorch_libtorch\" (backend \"pytorch\")"));
  }
  spec.platform = "pytorch_libtorch";
  if (config.max_batch_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": max_batch_size ", config.max_batch_size(),
                                                   " must be >= 0 (0: the model does not batch)"));
  }
  if (config.max_batch_size() > kMaxMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": max_batch_size ", config.max_batch_size(), " is above ", kMaxMaxBatchSize,
        ", the largest chronoserve serves (the warm-up before READY runs every batch size from 1 to it)"));
  }
  spec.max_batch_size = config.max_batch_size();
  ASSIGN_OR_RETURN(spec.inputs, ConvertTensors(config.input(), "input", source));
  ASSIGN_OR_RETURN(spec.outputs, ConvertTensors(config.output(), "output", source));
  ASSIGN_OR_RETURN(spec.instance_groups, ConvertInstanceGroups(config, source));
  RETURN_IF_ERROR(ConvertBatching(config, source, &spec));
  RETURN_IF_ERROR(ConvertWarmups(config, source, &spec));
  RETURN_IF_ERROR(CheckLargestWarmupBatch(spec, source));  // with the first sample's dims
  spec.cuda_graphs = config.optimization().cuda().graphs();
  for (const auto& [key, value] : config.parameters()) spec.parameters[key] = value.string_value();
  return spec;
}
}  // namespace

absl::StatusOr<ModelSpec> ParseModelConfig(const std::string& text, const std::string& source,
                                           const std::string& model_name,
                                           std::vector<std::string>* ignored_fields) {
  pb::ModelConfig config;
  RETURN_IF_ERROR(ParseConfigProto(text, source, &config, ignored_fields));
  return SpecFromProto(config, source, model_name);
}

namespace {
// The names of `dir`'s subdirectories (symbolic links to directories included), without throwing:
// a dangling link or a link loop is skipped; an entry whose type cannot be read for another reason
// (e.g. no permission) is skipped with a warning naming it.
absl::StatusOr<std::vector<std::string>> SubdirectoryNames(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    const bool is_directory = it->is_directory(type_ec);
    if (type_ec && type_ec != std::errc::too_many_symbolic_link_levels &&
        type_ec != std::errc::no_such_file_or_directory) {
      CS_LOG(WARNING) << "skipping '" << it->path().string() << "': " << type_ec.message();
    }
    if (is_directory && !type_ec) names.push_back(it->path().filename().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list '", dir.string(), "': ", ec.message()));
  return names;
}

// Hidden directories, and Python's byte-code cache beside a script that exported the models, are
// no model's (`name` is not empty: a directory's, or one ValidateModelName passed).
bool MayNameModel(const std::string& name) { return name[0] != '.' && name != "__pycache__"; }
}  // namespace

bool IsModelDirectory(const std::string& repository, const std::string& name) {
  std::error_code ec;
  return ValidateModelName(name).ok() && MayNameModel(name) && fs::is_directory(fs::path(repository) / name, ec);
}

absl::StatusOr<std::vector<std::string>> ListModelDirectories(const std::string& repository) {
  std::error_code ec;
  if (!fs::is_directory(repository, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository '", repository, "' is not a directory"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> subdirectories, SubdirectoryNames(repository));
  std::vector<std::string> names;
  for (auto& name : subdirectories) {
    if (!MayNameModel(name)) continue;
    // A name that is not UTF-8 could be no model's: every answer naming it (the index, metrics) would
    // be unreadable to its reader, the other models' included.
    if (!IsUtf8(name)) {
      CS_LOG(WARNING) << "model repository '" << repository << "': directory '" << absl::CEscape(name)
                      << "' is ignored: a model's name must be UTF-8";
      continue;
    }
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
// The version directories the policy may pick (every one for `latest`, which the caller trims), ascending.
absl::StatusOr<std::vector<int64_t>> PickVersions(const fs::path& dir, const std::string& source,
                                                  const std::vector<int64_t>& specific) {
  std::vector<int64_t> versions;
  // "01", "+1", "0": a number, but not a version's name (Triton ignores names that start with "0")
  std::vector<std::string> not_canonical;
  ASSIGN_OR_RETURN(std::vector<std::string> subdirectories, SubdirectoryNames(dir));
  for (const auto& name : subdirectories) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(name, &v)) {
      // Digits past int64: a version nobody can name in a request (Triton's too are int64).
      if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isdigit(c); })) {
        CS_LOG(WARNING) << source << ": version directory '" << name << "' is ignored: versions are at most "
                        << std::numeric_limits<int64_t>::max();
      }
      continue;
    }
    if (v < 0) continue;
    if (v > 0 && name == std::to_string(v)) {
      versions.push_back(v);
    } else {
      not_canonical.push_back(name);
    }
  }
  std::sort(versions.begin(), versions.end());
  std::vector<int64_t> wanted;
  for (int64_t v : versions) {
    if (specific.empty() || std::find(specific.begin(), specific.end(), v) != specific.end()) wanted.push_back(v);
  }
  if (wanted.empty()) {
    return absl::NotFoundError(absl::StrCat(
        source, ": no numeric version directory (e.g. ", dir.string(), "/1/model.pt) matches the version policy",
        specific.empty() ? "" : absl::StrCat(" (specific versions ", absl::StrJoin(specific, ", "), ")"), "; found ",
        versions.empty() ? "none" : absl::StrJoin(versions, ", "),
        not_canonical.empty()
            ? ""
            : absl::StrCat(" (ignored: ", absl::StrJoin(not_canonical, ", "),
                           ", which must be written as plain decimal numbers from 1, e.g. 1 for 01)")));
  }
  return wanted;
}
}  // namespace

absl::Status CheckModelFile(const ModelSpec& spec) {
  const fs::path model_path(spec.model_path);
  const std::string& name = spec.name;
  const int64_t version = spec.version;
  std::error_code ec;
  if (fs::is_regular_file(model_path, ec)) return absl::OkStatus();
  std::error_code what_ec;
  const fs::file_status link = fs::symlink_status(model_path, what_ec);
  const fs::file_status target = fs::status(model_path, what_ec);
  std::string found = "does not exist";
  if (fs::is_directory(target)) {
    found = "is a directory, not a TorchScript file";
  } else if (fs::exists(target)) {
    found = "is not a regular file";
  } else if (fs::is_symlink(link)) {
    found = absl::StrCat("is a symbolic link that leads to no file (", what_ec.message(), ")");
  }
  return absl::NotFoundError(absl::StrCat("model '", name, "' version ", version, ": model file ",
                                          model_path.string(), " ", found));
}

namespace {
// Why `model_dir`'s config.pbtxt could not be opened (`open_errno`: errno right after the attempt):
// the directory is missing or no directory, it is a model repository given for one of its models,
// or it has no config.pbtxt (chronoserve reads one; it derives none from the model).
absl::Status WhyNoConfig(const std::string& model_dir, const std::string& name, int open_errno) {
  const fs::path dir(model_dir);
  const fs::path config_path = dir / "config.pbtxt";
  std::error_code ec;
  const fs::file_status dir_status = fs::status(dir, ec);
  if (dir_status.type() == fs::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat("model directory '", model_dir, "' does not exist"));
  }
  if (!ec && !fs::is_directory(dir_status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", model_dir, "' is not a directory (a model directory holds config.pbtxt and numbered version directories)"));
  }
  if (open_errno != ENOENT) {
    return absl::NotFoundError(absl::StrCat(config_path.string(), ": cannot open (", std::strerror(open_errno), ")"));
  }
  // A model repository given where one of its models was meant (`chronoserve profile models`).
  std::vector<std::string> models;
  if (absl::StatusOr<std::vector<std::string>> names = ListModelDirectories(model_dir); names.ok()) {
    for (const std::string& sub : *names) {
      std::error_code sub_ec;
      if (fs::exists(dir / sub / "config.pbtxt", sub_ec)) models.push_back(sub);
    }
  }
  if (!models.empty()) {
    return absl::NotFoundError(absl::StrCat("'", model_dir, "' is a model repository, not a model directory: pass one of "
                                            "its models (", absl::StrJoin(models, ", "), ")"));
  }
  return absl::NotFoundError(absl::StrCat(
      "model '", name, "': ", config_path.string(), " does not exist; chronoserve needs a config.pbtxt in every "
      "model directory (it does not derive one from the model, as Triton's auto-complete does)"));
}
}  // namespace

absl::StatusOr<std::vector<ModelSpec>> LoadModelVersions(const std::string& model_dir, const std::string* config_json) {
  const fs::path dir(model_dir);
  // The model is named after its directory, also when that is given as `models/mlp/` or `.`.
  std::error_code ec;
  fs::path named = fs::absolute(dir, ec).lexically_normal();
  if (ec) named = dir.lexically_normal();
  if (named.filename().empty()) named = named.parent_path();
  const std::string name = named.filename().string();
  RETURN_IF_ERROR(ValidateModelName(name));
  // Where the configuration comes from, as messages name it.
  const std::string config_source =
      config_json != nullptr ? std::string("RepositoryModelLoad's 'config'") : (dir / "config.pbtxt").string();
  pb::ModelConfig config;
  std::vector<std::string> ignored;
  if (config_json != nullptr) {
    RETURN_IF_ERROR(ParseConfigJson(*config_json, config_source, &config, &ignored));
  } else {
    std::ifstream in(config_source);
    if (!in) return WhyNoConfig(model_dir, name, errno);
    std::stringstream text;
    text << in.rdbuf();
    RETURN_IF_ERROR(ParseConfigProto(text.str(), config_source, &config, &ignored));
  }
  // The fields ignored are worth a warning only for a config that loads.
  ASSIGN_OR_RETURN(ModelSpec spec, SpecFromProto(config, config_source, name));
  for (const auto& field : ignored) {
    CS_LOG(WARNING) << config_source << ": model '" << name << "': field '" << field
                    << "' is not implemented by chronoserve and is ignored";
  }
  for (const auto& [key, value] : spec.parameters) {
    if (std::find(kModelParameterKeys.begin(), kModelParameterKeys.end(), key) != kModelParameterKeys.end()) continue;
    CS_LOG(WARNING) << config_source << ": model '" << name << "': parameter '" << key
                    << "' is not one of chronoserve's (" << absl::StrJoin(kModelParameterKeys, ", ")
                    << ") and is ignored";
  }
  std::vector<int64_t> specific;
  if (config.version_policy().has_specific()) {
    if (config.version_policy().specific().versions().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(config_source, ": model '", name,
                                                     "': version_policy.specific lists no versions"));
    }
    specific.assign(config.version_policy().specific().versions().begin(),
                    config.version_policy().specific().versions().end());
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> versions, PickVersions(dir, config_source, specific));
  // An empty `version_policy { }` is every version, as Triton: it defaults only a policy that is
  // absent to the latest, and loads all versions for one that is neither specific nor latest.
  const bool every = config.version_policy().has_all() ||
                     (config.has_version_policy() && config.version_policy().policy_choice_case() ==
                                                         pb::ModelVersionPolicy::POLICY_CHOICE_NOT_SET);
  if (every) {
    spec.version_policy.kind = VersionPolicySpec::Kind::kAll;
  } else if (!specific.empty()) {
    spec.version_policy.kind = VersionPolicySpec::Kind::kSpecific;
    spec.version_policy.versions = specific;
  } else {
    if (config.version_policy().has_latest() && config.version_policy().latest().num_versions() == 0) {
      // As Triton, which loads no version then and fails the load.
      return absl::InvalidArgumentError(absl::StrCat(
          config_source, ": version_policy.latest.num_versions is 0: it names no version to serve (at least 1; "
                         "leave version_policy out for the latest version)"));
    }
    const size_t latest = std::max<int64_t>(1, config.version_policy().latest().num_versions());
    spec.version_policy.num_versions = static_cast<int64_t>(latest);
    if (versions.size() > latest) versions.erase(versions.begin(), versions.end() - static_cast<ptrdiff_t>(latest));
  }
  const std::string filename =
      config.default_model_filename().empty() ? "model.pt" : config.default_model_filename();
  // A name in each version directory, as Triton reads it: a path would let a config (a client's, in
  // RepositoryModelLoad) load any file of the server's disk as the model.
  if (filename == "." || filename == ".." || filename.find_first_of(std::string("/\\\0", 3)) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(config_source, ": model '", name, "': default_model_filename '",
                                                   Excerpt(absl::CEscape(filename)),
                                                   "' is not a file name (it names a file in each version "
                                                   "directory: no '/', '\\', '.' or '..')"));
  }
  std::vector<ModelSpec> specs;
  for (int64_t version : versions) {
    const fs::path model_path = dir / std::to_string(version) / filename;
    ModelSpec& one = specs.emplace_back(spec);
    one.version = version;
    one.model_path = model_path.string();
  }
  return specs;
}

absl::StatusOr<ModelSpec> LoadModelDirectory(const std::string& model_dir, const std::string* config_json) {
  ASSIGN_OR_RETURN(std::vector<ModelSpec> specs, LoadModelVersions(model_dir, config_json));
  RETURN_IF_ERROR(CheckModelFile(specs.back()));  // PickVersions returns at least one
  return std::move(specs.back());
}

}  // namespace chronoserve::server
