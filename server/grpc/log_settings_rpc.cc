#include "server/grpc/log_settings_rpc.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {
namespace {

using Value = inference::LogSettingsRequest::SettingValue;

using Case = Value::ParameterChoiceCase;

struct Setting {
  const char* key;
  Case takes;
};

constexpr Setting kSettings[] = {
    {"log_file", Value::kStringParam},          {"log_info", Value::kBoolParam},
    {"log_warning", Value::kBoolParam},         {"log_error", Value::kBoolParam},
    {"log_verbose_level", Value::kUint32Param}, {"log_format", Value::kStringParam},
};

// "a bool (bool_param)", or "no value".
std::string CaseName(Case c) {
  switch (c) {
    case Value::kBoolParam: return "a bool (bool_param)";
    case Value::kUint32Param: return "an unsigned integer (uint32_param)";
    case Value::kStringParam: return "a string (string_param)";
    case Value::PARAMETER_CHOICE_NOT_SET: return "no value";
  }
  return "?";
}

std::string KnownKeys() {
  std::vector<std::string> keys;
  for (const Setting& s : kSettings) keys.push_back(s.key);
  return absl::StrJoin(keys, ", ");
}

// The log state a request asks for, checked before any of it is applied.
struct Wanted {
  bool info = LogLevelEnabled(LogLevel::kInfo);
  bool warning = LogLevelEnabled(LogLevel::kWarning);
  bool error = LogLevelEnabled(LogLevel::kError);
  int verbosity = LogVerbosity();
  LogFormat format = GetLogFormat();
};

absl::Status Check(const std::string& key, const Value& value, Wanted* wanted) {
  const Setting* setting = nullptr;
  for (const Setting& s : kSettings) {
    if (key == s.key) setting = &s;
  }
  if (setting == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log setting '", Excerpt(key), "'; the settings are ", KnownKeys()));
  }
  if (value.parameter_choice_case() != setting->takes) {
    return absl::InvalidArgumentError(absl::StrCat("log setting '", key, "' takes ", CaseName(setting->takes),
                                                   ", got ", CaseName(value.parameter_choice_case())));
  }
  if (key == "log_file") {
    if (!value.string_param().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("log setting 'log_file' cannot be set (asked for '",
                                                     Excerpt(value.string_param()),
                                                     "'): chronoserve logs to stderr; redirect it to write a file"));
    }
  } else if (key == "log_info") {
    wanted->info = value.bool_param();
  } else if (key == "log_warning") {
    wanted->warning = value.bool_param();
  } else if (key == "log_error") {
    wanted->error = value.bool_param();
  } else if (key == "log_verbose_level") {
    if (value.uint32_param() > static_cast<uint32_t>(kMaxLogVerbosity)) {
      return absl::InvalidArgumentError(absl::StrCat("log setting 'log_verbose_level' is ", value.uint32_param(),
                                                     "; it takes 0 (off) to ", kMaxLogVerbosity));
    }
    wanted->verbosity = static_cast<int>(value.uint32_param());
  } else if (key == "log_format") {
    if (!ParseLogFormat(value.string_param(), &wanted->format)) {
      return absl::InvalidArgumentError(absl::StrCat("log setting 'log_format' is '", Excerpt(value.string_param()),
                                                     "'; it takes \"default\" or \"ISO8601\""));
    }
  }
  return absl::OkStatus();
}

const char* OnOff(bool on) { return on ? "true" : "false"; }

std::string Describe(const Wanted& w) {
  return absl::StrCat("log_info ", OnOff(w.info), ", log_warning ", OnOff(w.warning), ", log_error ", OnOff(w.error),
                      ", log_verbose_level ", w.verbosity, ", log_format ", LogFormatName(w.format));
}

}  // namespace

absl::Status AnswerLogSettings(const inference::LogSettingsRequest& request, inference::LogSettingsResponse* response) {
  const Wanted before;
  Wanted wanted;
  // In key order, so that the first error named is the same for the same request.
  const std::map<std::string, Value> settings(request.settings().begin(), request.settings().end());
  for (const auto& [key, value] : settings) {
    if (absl::Status s = Check(key, value, &wanted); !s.ok()) return s;
  }
  const std::string was = Describe(before);
  const std::string now = Describe(wanted);
  if (was != now) {
    // Logged while INFO is on: before turning it off, after turning it on.
    if (before.info) CS_LOG(INFO) << "LogSettings: " << was << " -> " << now;
    SetLogLevelEnabled(LogLevel::kInfo, wanted.info);
    SetLogLevelEnabled(LogLevel::kWarning, wanted.warning);
    SetLogLevelEnabled(LogLevel::kError, wanted.error);
    SetLogVerbosity(wanted.verbosity);
    SetLogFormat(wanted.format);
    if (!before.info && wanted.info) CS_LOG(INFO) << "LogSettings: " << was << " -> " << now;
  }
  auto& out = *response->mutable_settings();
  out["log_file"].set_string_param("");
  out["log_info"].set_bool_param(LogLevelEnabled(LogLevel::kInfo));
  out["log_warning"].set_bool_param(LogLevelEnabled(LogLevel::kWarning));
  out["log_error"].set_bool_param(LogLevelEnabled(LogLevel::kError));
  out["log_verbose_level"].set_uint32_param(static_cast<uint32_t>(LogVerbosity()));
  out["log_format"].set_string_param(LogFormatName(GetLogFormat()));
  return absl::OkStatus();
}

}  // namespace chronoserve::server
