// Rendering a ProfileReport: human-readable tables (PrintReport) and the JSON document written by
// `chronoserve-profile --json FILE` (ReportToJson; schema "chronoserve.profile/v2", every duration
// in microseconds; a figure that was not measured is null). Pure functions of the report; thread-safe.
#ifndef CHRONOSERVE_TOOLS_PROFILE_PROFILE_REPORT_H_
#define CHRONOSERVE_TOOLS_PROFILE_PROFILE_REPORT_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "tools/profile/model_profiler.h"

namespace chronoserve::profile {

inline constexpr char kProfileSchema[] = "chronoserve.profile/v2";

void PrintReport(const ProfileReport& report, std::ostream& out);

// The whole report as JSON text (pretty-printed).
std::string ReportToJson(const ProfileReport& report);

// Writes ReportToJson to `path`; errors name the file.
absl::Status WriteJson(const ProfileReport& report, const std::string& path);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_PROFILE_REPORT_H_
