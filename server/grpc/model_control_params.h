// The parameters of Triton's model control requests: RepositoryModelLoad's "config" (a
// string_param: the model configuration as JSON) and "file:<path>" (bytes_param: a model file, which
// needs "config" beside it, as in Triton), RepositoryModelUnload's "unload_dependents" (a bool_param;
// it concerns ensembles, which chronoserve does not serve, so it has no effect). Anything else is
// refused, naming it.
#ifndef CHRONOSERVE_SERVER_GRPC_MODEL_CONTROL_PARAMS_H_
#define CHRONOSERVE_SERVER_GRPC_MODEL_CONTROL_PARAMS_H_

#include <string>

#include "absl/status/status.h"
#include "proto/inference.pb.h"
#include "server/core/model_control.h"

namespace chronoserve::server {

using ModelControlParameters = google::protobuf::Map<std::string, inference::ModelRepositoryParameter>;

// OK when every parameter is one the request (`unload` or a load) takes, of the right type, with
// file paths under the model directory (CheckOverridePath); else INVALID_ARGUMENT "cannot `what`
// model 'm': ..." naming the parameter and what it takes.
absl::Status CheckModelControlParameters(const char* what, const std::string& model,
                                         const ModelControlParameters& params, bool unload);

// A load's parameters, checked, as the overrides the model controller takes.
LoadOverrides LoadOverridesFrom(const ModelControlParameters& params);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_MODEL_CONTROL_PARAMS_H_
