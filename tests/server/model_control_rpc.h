// RepositoryModelLoad / RepositoryModelUnload through a raw stub, each call with the tests' deadline
// (model control's tests on the CPU, the GPU and with telemetry).
#ifndef CHRONOSERVE_TESTS_SERVER_MODEL_CONTROL_RPC_H_
#define CHRONOSERVE_TESTS_SERVER_MODEL_CONTROL_RPC_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "proto/inference.grpc.pb.h"
#include "tests/server/test_client.h"

namespace chronoserve::testing {

// RepositoryModelLoad of `model`, with a string `parameter` ("{}") and a `repository_name` when given.
inline grpc::Status LoadModel(inference::GRPCInferenceService::Stub* stub, const std::string& model,
                              const std::string& parameter = "", const std::string& repository = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(TestDeadline());
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(model);
  request.set_repository_name(repository);
  if (!parameter.empty()) (*request.mutable_parameters())[parameter].set_string_param("{}");
  inference::RepositoryModelLoadResponse response;
  return stub->RepositoryModelLoad(&ctx, request, &response);
}

// RepositoryModelLoad of `model` with Triton's "config" parameter: `config_json` as its string_param.
inline grpc::Status LoadModelWithConfig(inference::GRPCInferenceService::Stub* stub, const std::string& model,
                                        const std::string& config_json) {
  grpc::ClientContext ctx;
  ctx.set_deadline(TestDeadline());
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(model);
  (*request.mutable_parameters())["config"].set_string_param(config_json);
  inference::RepositoryModelLoadResponse response;
  return stub->RepositoryModelLoad(&ctx, request, &response);
}

// RepositoryModelUnload of `model`, with a bool `parameter` (true) when given.
inline grpc::Status UnloadModel(inference::GRPCInferenceService::Stub* stub, const std::string& model,
                                const std::string& parameter = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(TestDeadline());
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(model);
  if (!parameter.empty()) (*request.mutable_parameters())[parameter].set_bool_param(true);
  inference::RepositoryModelUnloadResponse response;
  return stub->RepositoryModelUnload(&ctx, request, &response);
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_MODEL_CONTROL_RPC_H_
