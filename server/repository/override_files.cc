#include "server/repository/override_files.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/remove_tree.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {
namespace fs = std::filesystem;

absl::Status CheckOverridePath(const std::string& path) {
  auto bad = [&path](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("model file path '", Excerpt(path), "' ", why));
  };
  if (path.empty()) return bad("is empty (name a file under the model directory, e.g. 'file:1/model.pt')");
  if (path.size() > 4096) return bad("is longer than 4096 bytes");
  if (path.find('\0') != std::string::npos) return bad("holds a NUL byte");
  if (path.find('\\') != std::string::npos) return bad("holds a backslash (separate directories with '/')");
  if (path.front() == '/') return bad("is absolute; it must lie under the model directory (e.g. '1/model.pt')");
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty()) return bad("has an empty component ('//' or a trailing '/')");
    if (part == "." || part == "..") return bad("has a '.' or '..' component; it must lie under the model directory");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OverrideDirectory>> OverrideDirectory::Write(
    const std::string& model, const std::map<std::string, std::string>& files) {
  std::error_code error;
  const fs::path base = fs::temp_directory_path(error);
  if (error) {
    return absl::InternalError(absl::StrCat("no temporary directory for model '", model, "'s files: ", error.message()));
  }
  std::string pattern = (base / "chronoserve-load-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    const int e = errno;
    return absl::InternalError(absl::StrCat("cannot make a directory for model '", model, "'s files under ",
                                            base.string(), ": ", std::strerror(e)));
  }
  // Owned from here: an error below removes what was written.
  std::unique_ptr<OverrideDirectory> dir(new OverrideDirectory(pattern, (fs::path(pattern) / model).string()));
  for (const auto& [path, contents] : files) {
    if (absl::Status s = CheckOverridePath(path); !s.ok()) return s;
    const fs::path target = fs::path(dir->model_dir_) / path;
    fs::create_directories(target.parent_path(), error);
    if (error || fs::is_directory(target)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model '", model, "': file '", path, "' cannot be written: another file sent with it takes its place or "
          "its directory's (", error ? error.message() : "a directory of that name", ")"));
    }
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) {
      return absl::InternalError(absl::StrCat("model '", model, "': writing file '", path, "' (", contents.size(),
                                              " bytes) under ", dir->root_, " failed"));
    }
  }
  return dir;
}

OverrideDirectory::~OverrideDirectory() {
  // Not fs::remove_all: see common/remove_tree.h.
  if (!RemoveTree(root_)) {
    CS_LOG(WARNING) << "the directory of a load's override files, " << root_ << ", was not removed: "
                    << std::strerror(errno);
  }
}

}  // namespace chronoserve::server
