// RestoreLogDefaults: the process's log settings as at start (common/log.h), for the TearDown of a
// test that changes them.
#ifndef CHRONOSERVE_TESTS_COMMON_LOG_DEFAULTS_H_
#define CHRONOSERVE_TESTS_COMMON_LOG_DEFAULTS_H_

#include "common/log.h"

namespace chronoserve::testing {

inline void RestoreLogDefaults() {
  SetLogVerbosity(0);
  SetLogLevelEnabled(LogLevel::kInfo, true);
  SetLogLevelEnabled(LogLevel::kWarning, true);
  SetLogLevelEnabled(LogLevel::kError, true);
  SetLogFormat(LogFormat::kDefault);
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_COMMON_LOG_DEFAULTS_H_
