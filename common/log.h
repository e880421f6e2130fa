// Minimal leveled logging to stderr: CS_LOG(INFO) << "..."; CS_VLOG(1) << "...".
// INFO, WARNING and ERROR always print; CS_VLOG(n) prints when n <= SetLogVerbosity's level
// (the server's --log-verbose). Thread-safe: each message is written with one call.
#ifndef CHRONOSERVE_COMMON_LOG_H_
#define CHRONOSERVE_COMMON_LOG_H_

#include <sstream>

namespace chronoserve {

enum class LogLevel { kInfo, kWarning, kError, kVerbose };

void SetLogVerbosity(int level);
int LogVerbosity();

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
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
