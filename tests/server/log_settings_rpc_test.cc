// AnswerLogSettings without a server: Triton's keys and types, every setting in the answer, all or
// nothing, and errors that name the setting and what it takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/log.h"
#include "tests/common/log_defaults.h"
#include "server/grpc/log_settings_rpc.h"

namespace chronoserve::server {
namespace {

using ::testing::HasSubstr;
using Value = inference::LogSettingsRequest::SettingValue;

class LogSettingsRpcTest : public ::testing::Test {
 protected:
  void TearDown() override { testing::RestoreLogDefaults(); }
  static Value& Set(inference::LogSettingsRequest* request, const std::string& key) {
    return (*request->mutable_settings())[key];
  }
};

TEST_F(LogSettingsRpcTest, AnEmptyRequestReadsEverySetting) {
  SetLogVerbosity(3);
  SetLogLevelEnabled(LogLevel::kWarning, false);
  inference::LogSettingsResponse response;
  ASSERT_TRUE(AnswerLogSettings({}, &response).ok());
  const auto& s = response.settings();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s.at("log_file").string_param(), "");
  EXPECT_EQ(s.at("log_file").parameter_choice_case(), inference::LogSettingsResponse::SettingValue::kStringParam);
  EXPECT_TRUE(s.at("log_info").bool_param());
  EXPECT_EQ(s.at("log_warning").parameter_choice_case(), inference::LogSettingsResponse::SettingValue::kBoolParam);
  EXPECT_FALSE(s.at("log_warning").bool_param());
  EXPECT_TRUE(s.at("log_error").bool_param());
  EXPECT_EQ(s.at("log_verbose_level").uint32_param(), 3u);
  EXPECT_EQ(s.at("log_format").string_param(), "default");
  EXPECT_EQ(LogVerbosity(), 3) << "reading changes nothing";
}

TEST_F(LogSettingsRpcTest, SettingsChangeTogetherAndTheAnswerHoldsTheNewValues) {
  inference::LogSettingsRequest request;
  Set(&request, "log_verbose_level").set_uint32_param(2);
  Set(&request, "log_format").set_string_param("ISO8601");
  Set(&request, "log_info").set_bool_param(false);
  Set(&request, "log_file").set_string_param("");  // the value it has: accepted
  inference::LogSettingsResponse response;
  ASSERT_TRUE(AnswerLogSettings(request, &response).ok());
  EXPECT_EQ(LogVerbosity(), 2);
  EXPECT_EQ(GetLogFormat(), LogFormat::kIso8601);
  EXPECT_FALSE(LogLevelEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogLevelEnabled(LogLevel::kWarning)) << "a setting not named keeps its value";
  EXPECT_EQ(response.settings().at("log_verbose_level").uint32_param(), 2u);
  EXPECT_EQ(response.settings().at("log_format").string_param(), "ISO8601");
  EXPECT_FALSE(response.settings().at("log_info").bool_param());
  EXPECT_TRUE(response.settings().at("log_warning").bool_param());
}

TEST_F(LogSettingsRpcTest, ABadSettingIsRefusedNamingItAndNothingChanges) {
  struct Row {
    std::string key;
    Value value;
    std::string message;
  };
  Value none;
  Value number;
  number.set_uint32_param(1);
  Value flag;
  flag.set_bool_param(true);
  Value eleven;
  eleven.set_uint32_param(11);
  Value json;
  json.set_string_param("json");
  Value file;
  file.set_string_param("/var/log/cs.log");
  Value long_format;
  long_format.set_string_param(std::string(5000, 'x'));
  const Row rows[] = {
      {"log_level", number,
       "unknown log setting 'log_level'; the settings are log_file, log_info, log_warning, log_error, "
       "log_verbose_level, log_format"},
      {"log_info", number, "log setting 'log_info' takes a bool (bool_param), got an unsigned integer"},
      {"log_verbose_level", flag, "log setting 'log_verbose_level' takes an unsigned integer (uint32_param), got a bool"},
      {"log_format", none, "log setting 'log_format' takes a string (string_param), got no value"},
      {"log_verbose_level", eleven, "log setting 'log_verbose_level' is 11; it takes 0 (off) to 10"},
      {"log_format", json, "log setting 'log_format' is 'json'; it takes \"default\" or \"ISO8601\""},
      {"log_file", file, "log setting 'log_file' cannot be set (asked for '/var/log/cs.log'): chronoserve logs to stderr"},
      // A long value is cut, so that what the setting takes survives gRPC's cut of long messages.
      {"log_format", long_format,
       "log setting 'log_format' is '" + std::string(64, 'x') + "... (5000 bytes)'; it takes \"default\" or \"ISO8601\""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.key);
    inference::LogSettingsRequest request;
    Set(&request, "log_verbose_level").set_uint32_param(4);  // valid, but must not apply either
    Set(&request, "log_warning").set_bool_param(false);
    Set(&request, row.key) = row.value;
    inference::LogSettingsResponse response;
    const absl::Status status = AnswerLogSettings(request, &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(row.message));
    EXPECT_EQ(LogVerbosity(), 0);
    EXPECT_TRUE(LogLevelEnabled(LogLevel::kWarning));
    EXPECT_EQ(GetLogFormat(), LogFormat::kDefault);
  }
}

TEST_F(LogSettingsRpcTest, AChangeIsLoggedWhileInfoIsOn) {
  inference::LogSettingsRequest off;
  Set(&off, "log_info").set_bool_param(false);
  inference::LogSettingsResponse response;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(AnswerLogSettings(off, &response).ok());
  ASSERT_TRUE(AnswerLogSettings(off, &response).ok());  // no change: nothing logged
  inference::LogSettingsRequest on;
  Set(&on, "log_info").set_bool_param(true);
  Set(&on, "log_verbose_level").set_uint32_param(1);
  ASSERT_TRUE(AnswerLogSettings(on, &response).ok());
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(text, HasSubstr("LogSettings: log_info true, log_warning true, log_error true, log_verbose_level 0, "
                              "log_format default -> log_info false,"));
  EXPECT_THAT(text, HasSubstr("-> log_info true, log_warning true, log_error true, log_verbose_level 1, "
                              "log_format default\n"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

}  // namespace
}  // namespace chronoserve::server
