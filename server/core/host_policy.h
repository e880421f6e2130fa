// Host policies (Triton's --host-policy): named sets of CPUs that a model's workers are pinned to,
// so the thread that feeds a GPU keeps a core of its own while gRPC's threads and other processes
// (a load generator on the same host) run elsewhere, and (our own setting) the workers' nice value,
// so other threads rarely preempt them. docs/MODEL_REPOSITORY.md, "Host policies".
//
//   chronoserve --host-policy gpu_0,cpu-cores=14-15 ...        # every worker on GPU 0
//   chronoserve --host-policy gpu_0,nice=-10 ...               # not pinned, scheduled first
//   instance_group [ { count: 1 kind: KIND_GPU host_policy: "fast" } ]   # a policy by name
//
// A worker without instance_group.host_policy takes Triton's default name for its device: "gpu_<id>"
// or "cpu"; when no --host-policy has that name it is not pinned.
#ifndef CHRONOSERVE_SERVER_CORE_HOST_POLICY_H_
#define CHRONOSERVE_SERVER_CORE_HOST_POLICY_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chronoserve::server {

struct HostPolicy {
  std::vector<int> cpu_cores;  // sorted; empty = not pinned
  std::optional<int> nice;     // the worker thread's nice value (-20..19); none = the process's
};

using HostPolicies = std::map<std::string, HostPolicy>;

// Parses --host-policy values, each "NAME,SETTING=VALUE[,SETTING=VALUE...]" (Triton's form; one
// policy may be given over several flags). Settings: cpu-cores=CPULIST ("0-3,8") and nice=N
// (-20..19). Errors name the flag value: no name, no setting, an unknown setting (numa-node
// included: memory binding is not done), a setting given twice for one policy, a bad CPU list or
// nice value.
absl::StatusOr<HostPolicies> ParseHostPolicies(const std::vector<std::string>& flags);

// Triton's default policy name for a worker on `gpu` (-1 = the CPU): "gpu_<id>" or "cpu".
std::string DefaultHostPolicyName(int gpu);

// The policy of a worker of `model` on `gpu` (none found: an empty one, not pinned, nice unchanged).
// `configured` is its instance_group's host_policy; when set it must name a policy (else
// FailedPrecondition naming the model and the policy); when empty the device's default name is
// looked up.
absl::StatusOr<HostPolicy> WorkerHostPolicy(const HostPolicies& policies, const std::string& configured,
                                            int gpu, const std::string& model);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_HOST_POLICY_H_
