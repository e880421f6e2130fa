// ModelControl: loading and unloading models while the server runs (Triton's model control,
// --model-control-mode explicit). The gRPC service answers RepositoryModelLoad / Unload through this
// interface; the server's ModelController (server/model_controller.h) implements it. A load or an
// unload takes seconds (weights, warm-up, a drain), so each is answered through `done`, called once,
// from the implementation's own thread (or at once, for a request refused outright).
#ifndef CHRONOSERVE_SERVER_CORE_MODEL_CONTROL_H_
#define CHRONOSERVE_SERVER_CORE_MODEL_CONTROL_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace chronoserve::server {

// What a load request replaces of what the repository holds (Triton's load parameters).
struct LoadOverrides {
  // The model's configuration, as Triton's model_config.proto in protobuf's JSON form, used in place
  // of its config.pbtxt for this load (a later load without it reads config.pbtxt again).
  std::optional<std::string> config;
  // Model files sent in the request ("file:<path>" parameters): path under the model directory ->
  // contents. When any is given the model is loaded from these files alone (with `config`, which
  // they need), not from the repository's directory, which need not exist.
  std::map<std::string, std::string> files;
  bool operator==(const LoadOverrides& other) const { return config == other.config && files == other.files; }
};

class ModelControl {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~ModelControl() = default;

  // Loads `model` from the repository, or reloads it when it is loaded: the runtime serving it goes
  // on serving until the new one is READY, then the new one takes its requests; a failed reload
  // leaves the old one serving (`done` gets the error).
  // `overrides` by value: its files (a model's weights, maybe gigabytes) move into the load's job.
  virtual void Load(const std::string& model, LoadOverrides overrides, Done done) = 0;
  void Load(const std::string& model, Done done) { Load(model, LoadOverrides{}, std::move(done)); }
  // Takes `model` out of service, runs the requests it had queued, stops its workers, then `done`.
  // OK for a model that is not loaded (nothing to do); NOT_FOUND for a name the server has never
  // known and the repository does not hold.
  virtual void Unload(const std::string& model, Done done) = 0;
  // The model directories of the repository, sorted (RepositoryIndex lists those not loaded too).
  virtual std::vector<std::string> RepositoryModels() const = 0;
  // The repository's path (--model-repository), the one repository_name a request may give.
  virtual const std::string& Repository() const = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_MODEL_CONTROL_H_
