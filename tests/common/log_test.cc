// common/log: both line formats, INFO / WARNING / ERROR turned off and on, verbose messages by the
// verbosity alone. stderr is captured (gtest) while each message is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/log.h"
#include "tests/common/log_defaults.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { testing::RestoreLogDefaults(); }
};

TEST_F(LogTest, DefaultFormatIsLevelDateTimeMicrosFileLine) {
  ::testing::internal::CaptureStderr();
  CS_LOG(WARNING) << "queue of model 'mlp' is 90% full";
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(text, MatchesRegex("W[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} log_test\\.cc:[0-9]+\\] "
                                 "queue of model 'mlp' is 90% full\n"));
}

TEST_F(LogTest, Iso8601FormatIsTritonsWithTheProcessId) {
  SetLogFormat(LogFormat::kIso8601);
  ::testing::internal::CaptureStderr();
  CS_LOG(ERROR) << "model 'mlp' failed";
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(text, MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z E " + std::to_string(getpid()) +
                                 " log_test\\.cc:[0-9]+\\] model 'mlp' failed\n"));
}

TEST_F(LogTest, EachLevelCanBeTurnedOffAndOnAgain) {
  SetLogLevelEnabled(LogLevel::kInfo, false);
  SetLogLevelEnabled(LogLevel::kError, false);
  EXPECT_FALSE(LogLevelEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogLevelEnabled(LogLevel::kWarning));
  EXPECT_FALSE(LogLevelEnabled(LogLevel::kError));
  ::testing::internal::CaptureStderr();
  CS_LOG(INFO) << "info-1";
  CS_LOG(WARNING) << "warning-1";
  CS_LOG(ERROR) << "error-1";
  SetLogLevelEnabled(LogLevel::kInfo, true);
  SetLogLevelEnabled(LogLevel::kWarning, false);
  CS_LOG(INFO) << "info-2";
  CS_LOG(WARNING) << "warning-2";
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(text, ::testing::Not(HasSubstr("info-1")));
  EXPECT_THAT(text, HasSubstr("warning-1"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("error-1")));
  EXPECT_THAT(text, HasSubstr("info-2"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("warning-2")));
}

TEST_F(LogTest, VerboseMessagesFollowTheVerbosityOnly) {
  SetLogLevelEnabled(LogLevel::kVerbose, false);  // ignored: verbosity governs them
  EXPECT_TRUE(LogLevelEnabled(LogLevel::kVerbose));
  SetLogVerbosity(2);
  ::testing::internal::CaptureStderr();
  CS_VLOG(1) << "level-1";
  CS_VLOG(2) << "level-2";
  CS_VLOG(3) << "level-3";
  SetLogVerbosity(0);
  CS_VLOG(1) << "level-1-off";
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(text, HasSubstr("level-1"));
  EXPECT_THAT(text, HasSubstr("level-2"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("level-3")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("level-1-off")));
  EXPECT_THAT(text, MatchesRegex("(V[0-9]{4} [^\n]*\n){2}"));
}

TEST_F(LogTest, FormatNamesAreTritons) {
  LogFormat format = LogFormat::kDefault;
  ASSERT_TRUE(ParseLogFormat("ISO8601", &format));
  EXPECT_EQ(format, LogFormat::kIso8601);
  EXPECT_STREQ(LogFormatName(format), "ISO8601");
  ASSERT_TRUE(ParseLogFormat("default", &format));
  EXPECT_EQ(format, LogFormat::kDefault);
  EXPECT_STREQ(LogFormatName(format), "default");
  EXPECT_FALSE(ParseLogFormat("iso8601", &format));
  EXPECT_FALSE(ParseLogFormat("json", &format));
  EXPECT_EQ(format, LogFormat::kDefault) << "unchanged by a name that is not a format";
}

}  // namespace
}  // namespace chronoserve
