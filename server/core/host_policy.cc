#include "server/core/host_policy.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cpu_set.h"

namespace chronoserve::server {

absl::StatusOr<HostPolicies> ParseHostPolicies(const std::vector<std::string>& flags) {
  HostPolicies policies;
  for (const std::string& flag : flags) {
    auto bad = [&flag](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--host-policy '", flag, "': ", why,
                                                     " (expected NAME,SETTING=VALUE[,...] with cpu-cores=CPULIST "
                                                     "or nice=N, e.g. gpu_0,cpu-cores=2-3,nice=-10)"));
    };
    std::vector<absl::string_view> parts = absl::StrSplit(flag, ',');
    const absl::string_view name = absl::StripAsciiWhitespace(parts[0]);
    if (name.empty() || name.find('=') != absl::string_view::npos) return bad("no policy name before the first ','");
    if (parts.size() < 2) return bad("no setting");
    HostPolicy& policy = policies[std::string(name)];
    // The CPU list may itself hold commas ("cpu-cores=0-3,8"): items without '=' continue it.
    std::string key;
    std::string value;
    auto apply = [&]() -> absl::Status {
      if (key.empty()) return absl::OkStatus();
      if (key == "nice") {
        if (policy.nice.has_value()) return bad("nice given twice for one policy");
        int nice = 0;
        if (!absl::SimpleAtoi(value, &nice) || nice < -20 || nice > 19) {
          return bad(absl::StrCat("nice '", value, "' is not a whole number from -20 to 19"));
        }
        policy.nice = nice;
        return absl::OkStatus();
      }
      if (key != "cpu-cores") {
        return bad(key == "numa-node" ? "numa-node is not supported (give its CPUs as cpu-cores)"
                                      : absl::StrCat("unknown setting '", key, "'"));
      }
      if (!policy.cpu_cores.empty()) return bad("cpu-cores given twice for one policy");
      auto cpus = ParseCpuList(value);
      if (!cpus.ok()) return bad(cpus.status().message());
      policy.cpu_cores = *std::move(cpus);
      return absl::OkStatus();
    };
    for (size_t i = 1; i < parts.size(); ++i) {
      const absl::string_view part = absl::StripAsciiWhitespace(parts[i]);
      const size_t eq = part.find('=');
      if (eq == absl::string_view::npos) {
        if (key.empty()) return bad(absl::StrCat("'", part, "' is not SETTING=VALUE"));
        absl::StrAppend(&value, ",", part);
        continue;
      }
      if (absl::Status s = apply(); !s.ok()) return s;
      key = std::string(absl::StripAsciiWhitespace(part.substr(0, eq)));
      value = std::string(part.substr(eq + 1));
    }
    if (absl::Status s = apply(); !s.ok()) return s;
  }
  return policies;
}

std::string DefaultHostPolicyName(int gpu) { return gpu < 0 ? "cpu" : absl::StrCat("gpu_", gpu); }

absl::StatusOr<HostPolicy> WorkerHostPolicy(const HostPolicies& policies, const std::string& configured,
                                            int gpu, const std::string& model) {
  if (!configured.empty()) {
    auto it = policies.find(configured);
    if (it == policies.end()) {
      return absl::FailedPreconditionError(absl::StrCat("model '", model, "': instance_group host_policy '",
                                                        configured, "' names no --host-policy given to the server"));
    }
    return it->second;
  }
  auto it = policies.find(DefaultHostPolicyName(gpu));
  return it == policies.end() ? HostPolicy{} : it->second;
}

}  // namespace chronoserve::server
