#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace chronoserve {
namespace {
std::atomic<int> g_verbosity{0};
std::atomic<bool> g_info{true};
std::atomic<bool> g_warning{true};
std::atomic<bool> g_error{true};
std::atomic<LogFormat> g_format{LogFormat::kDefault};

std::atomic<bool>* EnabledFlag(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return &g_info;
    case LogLevel::kWarning: return &g_warning;
    case LogLevel::kError: return &g_error;
    case LogLevel::kVerbose: return nullptr;
  }
  return nullptr;
}

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

void SetLogVerbosity(int level) { g_verbosity.store(level, std::memory_order_relaxed); }
int LogVerbosity() { return g_verbosity.load(std::memory_order_relaxed); }

void SetLogLevelEnabled(LogLevel level, bool enabled) {
  if (std::atomic<bool>* flag = EnabledFlag(level)) flag->store(enabled, std::memory_order_relaxed);
}

bool LogLevelEnabled(LogLevel level) {
  const std::atomic<bool>* flag = EnabledFlag(level);
  return flag == nullptr || flag->load(std::memory_order_relaxed);
}

void SetLogFormat(LogFormat format) { g_format.store(format, std::memory_order_relaxed); }
LogFormat GetLogFormat() { return g_format.load(std::memory_order_relaxed); }

const char* LogFormatName(LogFormat format) { return format == LogFormat::kIso8601 ? "ISO8601" : "default"; }

bool ParseLogFormat(const std::string& name, LogFormat* format) {
  if (name == "default") {
    *format = LogFormat::kDefault;
  } else if (name == "ISO8601") {
    *format = LogFormat::kIso8601;
  } else {
    return false;
  }
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : enabled_(LogLevelEnabled(level)) {
  if (!enabled_) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  std::tm tm_utc;
  gmtime_r(&secs, &tm_utc);
  const char* base = std::strrchr(file, '/');
  const char* name = base ? base + 1 : file;
  char stamp[32];
  char prefix[128];
  if (GetLogFormat() == LogFormat::kIso8601) {
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
    std::snprintf(prefix, sizeof(prefix), "%s %s %d %s:%d] ", stamp, LevelLetter(level), static_cast<int>(getpid()),
                  name, line);
  } else {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
    std::strftime(stamp, sizeof(stamp), "%m%d %H:%M:%S", &tm_utc);
    std::snprintf(prefix, sizeof(prefix), "%s%s.%06lld %s:%d] ", LevelLetter(level), stamp,
                  static_cast<long long>(micros), name, line);
  }
  stream_ << prefix;
}

LogMessage::~LogMessage() {
  if (!enabled_) return;
  stream_ << '\n';
  const std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace chronoserve
