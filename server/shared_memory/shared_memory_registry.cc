#include "server/shared_memory/shared_memory_registry.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::server {
namespace {

absl::Status AlreadyExists(const std::string& name, const SharedMemoryRegion& existing) {
  return absl::AlreadyExistsError(absl::StrCat("shared-memory region '", name,
                                               "' is already registered (key '", existing.key(),
                                               "'); unregister it first or pick another name"));
}

}  // namespace

absl::Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return absl::InvalidArgumentError("a shared-memory region needs a name");
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory region '", name, "': the key is empty"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (auto it = regions_.find(name); it != regions_.end()) return AlreadyExists(name, *it->second);
  }
  // The system calls run outside the lock; a concurrent Register of the same name is settled below.
  ASSIGN_OR_RETURN(std::unique_ptr<SharedMemoryRegion> region,
                   SharedMemoryRegion::Map(name, key, offset, byte_size, pinner_));
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = regions_.emplace(name, std::move(region));
  if (!inserted) return AlreadyExists(name, *it->second);
  return absl::OkStatus();
}

void SharedMemoryRegistry::Unregister(const std::string& name) {
  // Released after the lock: the last reference unmaps, which need not block other callers.
  std::vector<std::shared_ptr<const SharedMemoryRegion>> released;
  absl::MutexLock lock(&mu_);
  if (name.empty()) {
    for (auto& [n, region] : regions_) released.push_back(std::move(region));
    regions_.clear();
  } else if (auto it = regions_.find(name); it != regions_.end()) {
    released.push_back(std::move(it->second));
    regions_.erase(it);
  }
}

absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> SharedMemoryRegistry::Status(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  if (name.empty()) {
    for (const auto& [n, region] : regions_) out.push_back(region);
    return out;
  }
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("no shared-memory region '", name, "' is registered"));
  }
  out.push_back(it->second);
  return out;
}

absl::StatusOr<SharedMemorySpan> SharedMemoryRegistry::Find(const std::string& name, uint64_t offset,
                                                            uint64_t byte_size) const {
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(name);
    if (it == regions_.end()) {
      return absl::NotFoundError(absl::StrCat("shared-memory region '", name,
                                              "' is not registered (SystemSharedMemoryRegister it first)"));
    }
    region = it->second;
  }
  RETURN_IF_ERROR(region->CheckStillBacked());
  if (offset > region->byte_size() || byte_size > region->byte_size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory region '", name, "': offset ", offset, " + byte_size ", byte_size,
        " does not fit in its ", region->byte_size(), " bytes"));
  }
  SharedMemorySpan span;
  span.data = region->data() + offset;
  span.byte_size = static_cast<size_t>(byte_size);
  span.region = std::move(region);
  return span;
}

size_t SharedMemoryRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return regions_.size();
}

}  // namespace chronoserve::server
