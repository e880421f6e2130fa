// Model files sent in a load request (Triton's "file:<path>" load parameters): each path is checked
// to stay inside the model directory, then the files are written into a fresh temporary directory
// that is loaded in place of the repository's. The directory is removed when the OverrideDirectory
// goes (TorchScript reads the model into memory at load, so nothing reads it afterwards).
//
//   RETURN_IF_ERROR(CheckOverridePath("1/model.pt"));
//   auto dir = OverrideDirectory::Write("m", {{"1/model.pt", bytes}});  // dir->model_dir(): .../m
#ifndef CHRONOSERVE_SERVER_REPOSITORY_OVERRIDE_FILES_H_
#define CHRONOSERVE_SERVER_REPOSITORY_OVERRIDE_FILES_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace chronoserve::server {

// The prefix of a load parameter that carries a model file ("file:1/model.pt").
inline constexpr char kOverrideFilePrefix[] = "file:";

// OK for a relative path of non-empty components, none "." or "..", no NUL, no backslash, at most
// 4096 bytes; INVALID_ARGUMENT saying which rule it breaks otherwise.
absl::Status CheckOverridePath(const std::string& path);

class OverrideDirectory {
 public:
  // A new directory under the system's temporary directory ($TMPDIR, else /tmp) holding `model`/
  // with every file of `files` (path under the model directory -> contents) written in it. The
  // paths must pass CheckOverridePath; two that put a file where the other needs a directory are an
  // error naming both. INTERNAL (with the path and why) when the filesystem refuses.
  static absl::StatusOr<std::unique_ptr<OverrideDirectory>> Write(const std::string& model,
                                                                 const std::map<std::string, std::string>& files);
  ~OverrideDirectory();  // removes the directory and everything in it
  OverrideDirectory(const OverrideDirectory&) = delete;
  OverrideDirectory& operator=(const OverrideDirectory&) = delete;

  // The model directory to load: <temporary directory>/<model>.
  const std::string& model_dir() const { return model_dir_; }

 private:
  OverrideDirectory(std::string root, std::string model_dir)
      : root_(std::move(root)), model_dir_(std::move(model_dir)) {}

  const std::string root_;
  const std::string model_dir_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_REPOSITORY_OVERRIDE_FILES_H_
