#include "server/grpc/model_control_params.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/text_excerpt.h"
#include "server/repository/override_files.h"

namespace chronoserve::server {

absl::Status CheckModelControlParameters(const char* what, const std::string& model,
                                         const ModelControlParameters& params, bool unload) {
  auto refused = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot ", what, " model '", Excerpt(model), "': ", why));
  };
  const std::string* first_file = nullptr;
  for (const auto& [key, value] : params) {
    if (unload && key == "unload_dependents") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
        return refused("parameter 'unload_dependents' takes a bool_param");
      }
      continue;
    }
    if (!unload && key == "config") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return refused("parameter 'config' takes a string_param (the model configuration as JSON)");
      }
      continue;
    }
    if (!unload && absl::StartsWith(key, kOverrideFilePrefix)) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return refused(absl::StrCat("parameter '", Excerpt(key), "' takes a bytes_param (the file's contents)"));
      }
      if (absl::Status path = CheckOverridePath(key.substr(std::strlen(kOverrideFilePrefix))); !path.ok()) {
        return refused(absl::StrCat("parameter '", Excerpt(key), "': ", path.message()));
      }
      if (first_file == nullptr || key < *first_file) first_file = &key;
      continue;
    }
    return refused(absl::StrCat("parameter '", Excerpt(key), "' is not supported (",
                                unload ? "an unload takes only 'unload_dependents'"
                                       : "a load takes 'config' and 'file:<path>' model files",
                                ")"));
  }
  if (first_file != nullptr && params.count("config") == 0) {
    return refused(absl::StrCat("parameter '", Excerpt(*first_file),
                                "' needs 'config' beside it: model files sent in the request are loaded with the "
                                "configuration sent with them (as JSON), not the repository's config.pbtxt"));
  }
  return absl::OkStatus();
}

LoadOverrides LoadOverridesFrom(const ModelControlParameters& params) {
  LoadOverrides overrides;
  for (const auto& [key, value] : params) {
    if (key == "config") overrides.config = value.string_param();
    if (absl::StartsWith(key, kOverrideFilePrefix)) {
      overrides.files.emplace(key.substr(std::strlen(kOverrideFilePrefix)), value.bytes_param());
    }
  }
  return overrides;
}

}  // namespace chronoserve::server
