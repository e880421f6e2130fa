// Triton's ModelConfig RPC: the configuration a loaded model is served with, as Triton's
// model_config.proto ModelConfig (perf_analyzer and tritonclient's get_model_config read it at
// start-up). Built from the model's ModelSpec, so it carries what the server acts on, defaults the
// loader filled in included; fields chronoserve does not implement are absent. Instance groups
// report where their workers were actually loaded, as Triton does (KIND_AUTO resolved). Pure
// functions, called inline on a gRPC callback thread (InferenceService::ModelConfig).
#ifndef CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_
#define CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/inference.pb.h"
#include "proto/model_config.pb.h"
#include "server/core/model_spec.h"
#include "server/scheduler/model_registry.h"

namespace chronoserve::server {

// One worker of a loaded model: the instance group it serves (index into spec.instance_groups), the
// GPU its instance runs on (-1 = the CPU) and the --host-policy that pins it ("" = none).
struct LoadedWorker {
  int group = 0;
  int gpu = -1;
  std::string host_policy;
};

// The workers of `runtime` in order, each GPU read from its instance; empty when the runtime has no
// WorkerOrigin per worker (one not loaded by the ModelManager): its groups are reported as configured.
std::vector<LoadedWorker> LoadedWorkers(const ModelRuntime& runtime);

// The served configuration of `spec` in Triton's message. Each instance group with workers in
// `workers` reports their placement: kind KIND_GPU with `gpus` the GPU of every count-th worker
// (the listed or visible GPUs, in order) or KIND_CPU with none, and host_policy the policy its
// workers share (when they differ, or a group has no worker here: as configured).
config::ModelConfig ModelConfigFromSpec(const ModelSpec& spec, const std::vector<LoadedWorker>& workers = {});

// Answers one ModelConfig request, with Triton's errors: a version that is not an integer >= 0 is
// INVALID_ARGUMENT; an unknown model or a version not served is NOT_FOUND; a model still loading
// (or that failed to load) is UNAVAILABLE with the reason.
absl::Status AnswerModelConfig(const ModelRegistry& registry, const inference::ModelConfigRequest& request,
                               inference::ModelConfigResponse* response);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_
