#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace chronoserve {
namespace {
std::atomic<int> g_verbosity{0};

const char* LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kVerbose: return "V";
  }
  return "?";
}
}  // namespace

void SetLogVerbosity(int level) { g_verbosity.store(level); }
int LogVerbosity() { return g_verbosity.load(std::memory_order_relaxed); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm_utc;
  gmtime_r(&secs, &tm_utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%m%d %H:%M:%S", &tm_utc);
  const char* base = std::strrchr(file, '/');
  char prefix[96];
  std::snprintf(prefix, sizeof(prefix), "%s%s.%06lld %s:%d] ", LevelLetter(level), stamp,
                static_cast<long long>(micros), base ? base + 1 : file, line);
  stream_ << prefix;
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace chronoserve
