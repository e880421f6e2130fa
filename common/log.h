// Minimal leveled logging to stderr: CS_LOG(INFO) << "..."; CS_VLOG(1) << "...".
// INFO, WARNING and ERROR print unless turned off (SetLogLevelEnabled: the server's --log-info,
// --log-warning, --log-error and Triton's LogSettings RPC); CS_VLOG(n) prints when n <= the
// verbosity (--log-verbose). Two line formats (SetLogFormat, --log-format):
//   default  I1205 02:48:39.123456 file.cc:42] message        (UTC, microseconds)
//   ISO8601  2026-12-05T02:48:39Z I 4242 file.cc:42] message  (UTC, seconds, process id)
// Every setting may change while other threads log (relaxed atomics); each message is written
// with one call.
#ifndef CHRONOSERVE_COMMON_LOG_H_
#define CHRONOSERVE_COMMON_LOG_H_

#include <sstream>
#include <string>

namespace chronoserve {

enum class LogLevel { kInfo, kWarning, kError, kVerbose };
enum class LogFormat { kDefault, kIso8601 };

void SetLogVerbosity(int level);
int LogVerbosity();
// kInfo, kWarning or kError (kVerbose is governed by the verbosity alone; setting it is ignored).
void SetLogLevelEnabled(LogLevel level, bool enabled);
bool LogLevelEnabled(LogLevel level);
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// "default" / "ISO8601" (Triton's spellings); ParseLogFormat is false for anything else.
const char* LogFormatName(LogFormat format);
bool ParseLogFormat(const std::string& name, LogFormat* format);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  const bool enabled_;
  std::ostringstream stream_;
};

// Swallows the stream when a verbose message is filtered out.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace chronoserve

#define CS_LOG_LEVEL_INFO ::chronoserve::LogLevel::kInfo
#define CS_LOG_LEVEL_WARNING ::chronoserve::LogLevel::kWarning
#define CS_LOG_LEVEL_ERROR ::chronoserve::LogLevel::kError
#define CS_LOG(severity) \
  ::chronoserve::LogMessage(CS_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()
#define CS_VLOG(n)                                       \
  !((n) <= ::chronoserve::LogVerbosity())                \
      ? (void)0                                          \
      : ::chronoserve::LogVoidify() &                    \
            ::chronoserve::LogMessage(::chronoserve::LogLevel::kVerbose, __FILE__, __LINE__).stream()

#endif  // CHRONOSERVE_COMMON_LOG_H_
