#include "server/shared_memory/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {
namespace {

std::string Describe(const std::string& name, const std::string& key) {
  return absl::StrCat("shared-memory region '", ClientName(name), "' (key '", ClientName(key), "')");
}

// Closes the descriptor on every path that does not hand it to the region.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int Release() { return std::exchange(fd, -1); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Map(const std::string& name,
                                                                             const std::string& key,
                                                                             uint64_t offset,
                                                                             uint64_t byte_size,
                                                                             const HostMemoryPinner& pinner) {
  const std::string what = Describe(name, key);
  if (byte_size == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": byte_size must be > 0"));
  if (offset > std::numeric_limits<uint64_t>::max() - byte_size ||
      offset + byte_size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offset ", offset, " + byte_size ", byte_size,
                                                   " overflows"));
  }
  Fd fd{::shm_open(key.c_str(), O_RDWR, 0)};
  if (fd.fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(what, ": shm_open failed: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    // Out of descriptors is the server's limit, not the request's mistake: worth retrying after
    // other regions are unregistered.
    if (err == EMFILE || err == ENFILE) return absl::ResourceExhaustedError(message);
    return absl::InvalidArgumentError(message);
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": fstat failed: ", std::strerror(errno)));
  }
  const uint64_t object_bytes = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  if (offset + byte_size > object_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offset ", offset, " + byte_size ", byte_size,
                                                   " = ", offset + byte_size, " bytes exceeds the object's ",
                                                   object_bytes, " bytes"));
  }
  // A client's ftruncate makes an object larger than its filesystem (/dev/shm, often 64 MiB in a
  // container) may have room for; its missing pages would kill the server with SIGBUS at the first
  // request that touches them (MAP_POPULATE skips them silently). Allocating the window now turns
  // that into a refused registration. Data already written is kept. KEEP_SIZE: an object the client
  // shrank since the check above is not grown back with zeros (the check after mapping finds it).
  // A signal may interrupt a large window's allocation (EINTR): tried again, a few times.
  int allocated = -1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    allocated = ::fallocate(fd.fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(byte_size));
    if (allocated == 0 || errno != EINTR) break;
  }
  if (allocated != 0 && errno != EOPNOTSUPP) {
    const int err = errno;
    const std::string message = absl::StrCat(what, ": cannot allocate its ", byte_size, " bytes at offset ", offset,
                                             " (fallocate: ", std::strerror(err), ")");
    if (err == ENOSPC || err == ENOMEM) {
      return absl::ResourceExhaustedError(
          absl::StrCat(message, "; the shared-memory filesystem (/dev/shm) is too small or full"));
    }
    // Interrupted every time: the server's state, not the client's request; worth a retry.
    if (err == EINTR) return absl::UnavailableError(message);
    return absl::InvalidArgumentError(message);
  }
  // mmap wants a page-aligned file offset: map from the page that holds `offset`.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset - offset % page;
  const size_t mapping_bytes = static_cast<size_t>(offset - aligned + byte_size);
  // MAP_POPULATE: registration maps every page (as pinning for the GPU does anyway), so the first
  // request that reads inputs from the region or writes outputs to it pays no page faults.
  void* mapping = ::mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.fd,
                         static_cast<off_t>(aligned));
  if (mapping == MAP_FAILED) {
    const int err = errno;
    // Out of the process's mappings (vm.max_map_count) or of lockable memory: the server's limits,
    // which unregistering other regions frees, not a bad request.
    if (err == ENOMEM || err == EAGAIN) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": mmap of ", mapping_bytes, " bytes failed: ",
                                                       std::strerror(err),
                                                       " (the server's memory or mapping limits; unregister "
                                                       "regions no longer used)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, ": mmap of ", mapping_bytes, " bytes failed: ",
                                                   std::strerror(err)));
  }
  char* data = static_cast<char*>(mapping) + (offset - aligned);
  std::unique_ptr<SharedMemoryRegion> region(
      new SharedMemoryRegion(name, key, offset, byte_size, fd.Release(), mapping, mapping_bytes, data));
  region->watch_ = MappingWatch::Start(mapping, mapping_bytes);
  // Shrunk between the size check and the mapping (the client resized it while registering): refused
  // now rather than failing the first request that names the region.
  if (absl::Status backed = region->CheckStillBacked(); !backed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the object was resized while it was being registered (", backed.message(), ")"));
  }
  if (pinner) region->pin_ = pinner(mapping, mapping_bytes);
  return region;
}

std::unique_ptr<SharedMemoryRegion> SharedMemoryRegion::Device(const std::string& name, int64_t device_id,
                                                               uint64_t byte_size, char* data,
                                                               std::shared_ptr<void> handle) {
  std::unique_ptr<SharedMemoryRegion> region(
      new SharedMemoryRegion(name, "", 0, byte_size, -1, nullptr, 0, data));
  region->kind_ = SharedMemoryKind::kCuda;
  region->device_id_ = device_id;
  region->pin_ = std::move(handle);
  return region;
}

SharedMemoryRegion::SharedMemoryRegion(std::string name, std::string key, uint64_t offset,
                                       uint64_t byte_size, int fd, void* mapping, size_t mapping_bytes,
                                       char* data)
    : name_(std::move(name)),
      key_(std::move(key)),
      offset_(offset),
      byte_size_(byte_size),
      fd_(fd),
      mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      data_(data) {}

SharedMemoryRegion::~SharedMemoryRegion() {
  pin_.reset();  // unpin while the pages are still mapped (a kCuda region: close its IPC handle)
  if (mapping_ == nullptr) return;
  watch_.reset();  // before munmap: the range may be mapped again by anyone after it
  if (::munmap(mapping_, mapping_bytes_) != 0) {
    CS_LOG(WARNING) << Describe(name_, key_) << ": munmap failed: " << std::strerror(errno);
  }
  ::close(fd_);
}

absl::Status SharedMemoryRegion::CheckStillBacked() const {
  if (fd_ < 0) return absl::OkStatus();  // GPU memory: the client's allocation, held by the handle
  if (watch_ != nullptr && watch_->lost()) {
    if (!lost_logged_.exchange(true, std::memory_order_relaxed)) {
      CS_LOG(WARNING) << Describe(name_, key_) << ": the client shrank the object under a request (SIGBUS "
                      << "caught); the requests that name the region fail until it is unregistered and "
                      << "registered again";
    }
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(name_, key_), ": the object shrank while a request read or wrote it; the server now "
        "holds its own zero-filled copy of the window, which no longer reaches the client's object, and "
        "what requests read from it or wrote to it since is lost (a registered object must not be resized: "
        "unregister it, then register it again)"));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(name_, key_), ": fstat failed: ", std::strerror(errno)));
  }
  const uint64_t object_bytes = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  if (offset_ + byte_size_ > object_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(name_, key_), ": the object shrank to ", object_bytes, " bytes after registration; its offset ",
        offset_, " + byte_size ", byte_size_, " need ", offset_ + byte_size_,
        " (a registered object must not be resized: unregister it, then register it again)"));
  }
  return absl::OkStatus();
}

}  // namespace chronoserve::server
