// FindNamedModel (FindNamedVersions for every version): the lookup every RPC that names a model
// makes (ModelInfer, ModelStreamInfer, ModelMetadata, ModelConfig, ModelStatistics): the name is
// checked first, so a malformed one is INVALID_ARGUMENT on each of them alike, then ModelRegistry
// answers (NOT_FOUND, UNAVAILABLE, a version that is no number INVALID_ARGUMENT).
#ifndef CHRONOSERVE_SERVER_GRPC_MODEL_LOOKUP_H_
#define CHRONOSERVE_SERVER_GRPC_MODEL_LOOKUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/repository/model_config_loader.h"
#include "server/scheduler/model_registry.h"

namespace chronoserve::server {

// INVALID_ARGUMENT for a name that is empty, longer than 255 bytes or not a single path component
// (ValidateModelName); otherwise registry.Find(name, version, ticket).
inline absl::StatusOr<std::shared_ptr<ModelRuntime>> FindNamedModel(const ModelRegistry& registry,
                                                                    const std::string& name,
                                                                    const std::string& version,
                                                                    AdmissionTicket* ticket = nullptr) {
  if (absl::Status valid = ValidateModelName(name); !valid.ok()) return valid;
  return registry.Find(name, version, ticket);
}

// The same check of the name, then registry.FindVersions(name, version) (ModelStatistics).
inline absl::StatusOr<std::vector<std::shared_ptr<ModelRuntime>>> FindNamedVersions(const ModelRegistry& registry,
                                                                                   const std::string& name,
                                                                                   const std::string& version) {
  if (absl::Status valid = ValidateModelName(name); !valid.ok()) return valid;
  return registry.FindVersions(name, version);
}

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_MODEL_LOOKUP_H_
