// Loading a Triton-layout model repository: <repo>/<name>/config.pbtxt (protobuf text format) and
// <repo>/<name>/<version>/model.pt. Turns each config into a validated ModelSpec; a malformed
// file fails that model only, with the file, line and reason. Pure functions; no threads.
#ifndef CHRONOSERVE_SERVER_REPOSITORY_MODEL_CONFIG_LOADER_H_
#define CHRONOSERVE_SERVER_REPOSITORY_MODEL_CONFIG_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// Parses and validates config text for the model directory `model_dir` (its base name is the model
// name). `source` names the file in messages. `ignored_fields` receives the names of fields that
// the text sets but chronoserve does not implement.
absl::StatusOr<ModelSpec> ParseModelConfig(const std::string& text, const std::string& source,
                                           const std::string& model_name,
                                           std::vector<std::string>* ignored_fields);

// `text` with a colon after each field name that a list follows (`resources [ {...} ]` becomes
// `resources: [ {...} ]`) and without the fields whose list is empty (`shape: [ ]`, the same as no
// such field), outside strings and comments: the form in which protobuf's text parser can skip a
// Triton field that model_config.proto leaves out. ParseModelConfig reads a config that fails to
// parse again through it. With `origin`, sets it to the offset in `text` that each character of the
// result stands for (an added colon: the character after its field name), plus one past the end:
// text.size().
std::string NormalizeListsForSkipping(absl::string_view text, std::vector<size_t>* origin = nullptr);

// Reads <model_dir>/config.pbtxt and picks the versions its version policy serves (`latest`, by
// default the highest one; `latest { num_versions: N }` the N highest; `all`; `specific` those listed
// that exist). Returns one spec per version, ascending, each with its own `version` and `model_path`
// (not checked here: CheckModelFile, when the version loads). Logs ignored fields once, by name. With `config_json` (RepositoryModelLoad's "config" parameter, Triton's model
// configuration in protobuf's JSON form) that configuration is used instead of config.pbtxt, which
// need not exist; its errors name "RepositoryModelLoad's 'config'".
absl::StatusOr<std::vector<ModelSpec>> LoadModelVersions(const std::string& model_dir,
                                                         const std::string* config_json = nullptr);
// LoadModelVersions' highest version (the one a request that names no version gets), its model file
// checked.
absl::StatusOr<ModelSpec> LoadModelDirectory(const std::string& model_dir, const std::string* config_json = nullptr);
// OK when `spec.model_path` is a regular file; else NOT_FOUND naming the model, its version and what
// is there instead: nothing, a directory, a link that leads nowhere or loops.
absl::Status CheckModelFile(const ModelSpec& spec);

// Names of the model directories under `repository` (sorted). Fails if it is not a directory.
absl::StatusOr<std::vector<std::string>> ListModelDirectories(const std::string& repository);
// Whether ListModelDirectories(repository) would list `name` (a directory there, not hidden, not
// __pycache__, UTF-8), without listing the others; false for a name ValidateModelName refuses
// (`../x`, `a/b`), which is looked at nowhere.
bool IsModelDirectory(const std::string& repository, const std::string& name);

// Model names must be a single path component: no '/', '\\', NUL, "." or "..", at most 255 bytes.
absl::Status ValidateModelName(const std::string& name);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_REPOSITORY_MODEL_CONFIG_LOADER_H_
