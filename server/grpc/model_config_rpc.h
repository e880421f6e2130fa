// Triton's ModelConfig RPC: the configuration a loaded model is served with, as Triton's
// model_config.proto ModelConfig (perf_analyzer and tritonclient's get_model_config read it at
// start-up). Built from the model's ModelSpec, so it carries what the server acts on, defaults the
// loader filled in included; fields chronoserve does not implement are absent. Instance groups
// report where their workers were loaded, as Triton does (KIND_AUTO resolved at load). Pure
// functions, called inline on the thread gRPC hands the call to (InferenceService::AnswerModelConfig).
#ifndef CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_
#define CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_

#include <string>

#include "absl/status/status.h"
#include "proto/inference.pb.h"
#include "proto/model_config.pb.h"
#include "server/core/model_spec.h"
#include "server/scheduler/model_registry.h"

namespace chronoserve::server {

// The served configuration of `spec` in Triton's message. Its instance groups are reported as the
// spec holds them: the ModelManager resolves them at load (ResolveInstanceGroups), so a loaded
// model's groups say KIND_GPU with the GPUs used or KIND_CPU, never KIND_AUTO; host_policy as configured.
// version_policy as configured (spec.version_policy), the same for every version served.
config::ModelConfig ModelConfigFromSpec(const ModelSpec& spec);

// Answers one ModelConfig request, with Triton's errors (ModelRegistry::Find): a version that is not
// an integer >= 0 is INVALID_ARGUMENT; an unknown model, a version not served or a model that failed
// to load (no version named) is NOT_FOUND; a model still loading is UNAVAILABLE; every error that
// concerns a model gives its reason.
absl::Status AnswerModelConfig(const ModelRegistry& registry, const inference::ModelConfigRequest& request,
                               inference::ModelConfigResponse* response);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_MODEL_CONFIG_RPC_H_
