#include "server/shared_memory/shared_memory_registry.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/text_excerpt.h"
#include "common/status_macros.h"
#include "server/shared_memory/region_releaser.h"

namespace chronoserve::server {
namespace {

absl::Status AlreadyExists(const std::string& name, const SharedMemoryRegion& existing) {
  const std::string what = existing.on_device()
                               ? absl::StrCat("CUDA memory on GPU ", existing.device_id())
                               : absl::StrCat("key '", ClientName(existing.key()), "'");
  return absl::AlreadyExistsError(absl::StrCat("shared-memory region '", ClientName(name), "' is already registered (", what,
                                               "); unregister it first or pick another name"));
}

const char* KindName(SharedMemoryKind kind) { return kind == SharedMemoryKind::kCuda ? "CUDA" : "system"; }

// The size of a cudaIpcMemHandle_t (CUDA_IPC_HANDLE_SIZE), which Triton's clients send as raw_handle.
constexpr size_t kCudaIpcHandleBytes = 64;

}  // namespace

// One thread answers every Unregister that waits for CUDA handles to close: each waits for its
// handles, or its deadline, whichever comes first. A region's close wakes the thread; it ends when
// nothing waits (and starts again with the next). So a client that unregisters again and again
// while a request holds a region costs one thread, not one per call.
struct SharedMemoryRegistry::CloseWaiter : std::enable_shared_from_this<CloseWaiter> {
  struct Waiting {
    std::vector<std::pair<std::string, std::shared_ptr<absl::Notification>>> open;
    absl::Time deadline;
    std::function<void()> closed;
  };

  absl::Mutex mu;
  absl::CondVar woken;
  std::vector<Waiting> waiting ABSL_GUARDED_BY(mu);
  bool running ABSL_GUARDED_BY(mu) = false;

  // A region closed: the thread looks again.
  void Wake() {
    absl::MutexLock lock(&mu);
    woken.SignalAll();
  }

  // Adds `w`; starts the thread if none runs. Without a thread to be had, waits here.
  void Add(Waiting w) {
    {
      absl::MutexLock lock(&mu);
      waiting.push_back(std::move(w));
      if (running) {
        woken.SignalAll();
        return;
      }
      running = true;
    }
    try {
      std::thread([self = shared_from_this()] { self->Run(); }).detach();
    } catch (...) {  // no thread to be had (std::system_error), or no memory for one (std::bad_alloc)
      Run();  // waits here, for every call waiting meanwhile, until none does
    }
  }

  void Run() {
    while (true) {
      std::vector<Waiting> done;
      {
        absl::MutexLock lock(&mu);
        const absl::Time now = absl::Now();
        absl::Time next = absl::InfiniteFuture();
        for (auto it = waiting.begin(); it != waiting.end();) {
          const bool all_closed = std::all_of(it->open.begin(), it->open.end(),
                                              [](const auto& o) { return o.second->HasBeenNotified(); });
          if (all_closed || now >= it->deadline) {
            done.push_back(std::move(*it));
            it = waiting.erase(it);
          } else {
            next = std::min(next, it->deadline);
            ++it;
          }
        }
        if (done.empty()) {
          if (waiting.empty()) {
            running = false;
            return;
          }
          woken.WaitWithDeadline(&mu, next);
          continue;
        }
      }
      for (Waiting& w : done) {
        for (const auto& [region_name, watch] : w.open) {
          if (watch->HasBeenNotified()) continue;
          CS_LOG(WARNING) << "CUDA shared-memory region '" << ClientName(region_name) << "' unregistered, but a "
                          << "request still held it " << absl::FormatDuration(kCudaCloseWait)
                          << " later; its IPC handle closes when that request ends: the client must not free "
                             "the memory before then";
        }
        if (w.closed) w.closed();
      }
    }
  }
};

SharedMemoryRegistry::SharedMemoryRegistry() : waiter_(std::make_shared<CloseWaiter>()) { RegionReleaser::Get(); }

SharedMemoryRegistry::SharedMemoryRegistry(HostMemoryPinner pinner, DeviceMemoryOpener opener)
    : pinner_(std::move(pinner)), opener_(std::move(opener)), waiter_(std::make_shared<CloseWaiter>()) {
  RegionReleaser::Get();
}

absl::Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return absl::InvalidArgumentError("a shared-memory region needs a name");
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory region '", ClientName(name), "': the key is empty"));
  }
  // shm_open would stop at the byte and map another object than the key names.
  if (const size_t nul = key.find('\0'); nul != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory region '", ClientName(name), "': the key holds a NUL byte at ",
                                                   nul, "; a POSIX shared-memory name cannot"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (auto it = regions_.find(name); it != regions_.end()) return AlreadyExists(name, *it->second.region);
  }
  // The system calls run outside the lock; a concurrent Register of the same name is settled below.
  ASSIGN_OR_RETURN(std::unique_ptr<SharedMemoryRegion> region,
                   SharedMemoryRegion::Map(name, key, offset, byte_size, pinner_));
  return Insert(name, std::move(region));
}

absl::Status SharedMemoryRegistry::RegisterCuda(const std::string& name, const std::string& raw_handle,
                                                int64_t device_id, uint64_t byte_size) {
  if (!opener_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA shared-memory region '", ClientName(name),
        "': this server has no GPU (or its build has no CUDA); use system shared memory or send tensors in the message"));
  }
  if (name.empty()) return absl::InvalidArgumentError("a CUDA shared-memory region needs a name");
  const std::string what = absl::StrCat("CUDA shared-memory region '", ClientName(name), "'");
  if (raw_handle.size() != kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": raw_handle holds ", raw_handle.size(),
                                                   " bytes, a cudaIpcMemHandle_t has ", kCudaIpcHandleBytes));
  }
  if (byte_size == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": byte_size must be > 0"));
  if (device_id < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": device_id ", device_id, " is negative"));
  {
    absl::MutexLock lock(&mu_);
    if (auto it = regions_.find(name); it != regions_.end()) return AlreadyExists(name, *it->second.region);
  }
  char* data = nullptr;
  absl::StatusOr<std::shared_ptr<void>> handle = opener_(raw_handle, device_id, byte_size, &data);
  if (!handle.ok()) return absl::Status(handle.status().code(), absl::StrCat(what, ": ", handle.status().message()));
  return Insert(name, SharedMemoryRegion::Device(name, device_id, byte_size, data, *std::move(handle)));
}

absl::Status SharedMemoryRegistry::Insert(const std::string& name, std::unique_ptr<SharedMemoryRegion> region) {
  std::shared_ptr<absl::Notification> closed;
  if (region->kind() == SharedMemoryKind::kCuda) closed = std::make_shared<absl::Notification>();
  // Shared before the lock: a region that lost a race for its name is unmapped after it, not under it.
  std::shared_ptr<const SharedMemoryRegion> shared =
      ShareRegion(std::move(region), closed == nullptr ? std::function<void()>() : [closed, waiter = waiter_] {
        closed->Notify();
        waiter->Wake();
      });
  absl::MutexLock lock(&mu_);
  if (auto it = regions_.find(name); it != regions_.end()) return AlreadyExists(name, *it->second.region);
  regions_.emplace(name, Registered{std::move(shared), std::move(closed)});
  return absl::OkStatus();
}

void SharedMemoryRegistry::Unregister(const std::string& name, SharedMemoryKind kind, std::function<void()> closed) {
  // Released after the lock: the last reference unmaps, which need not block other callers.
  std::vector<std::shared_ptr<const SharedMemoryRegion>> released;
  std::vector<std::pair<std::string, std::shared_ptr<absl::Notification>>> open;  // CUDA handles to wait for
  {
    absl::MutexLock lock(&mu_);
    auto take = [&](std::map<std::string, Registered>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (it->second.closed != nullptr) closing_.emplace_back(it->first, std::move(it->second.closed));
      released.push_back(std::move(it->second.region));
      return regions_.erase(it);
    };
    if (name.empty()) {
      for (auto it = regions_.begin(); it != regions_.end();) {
        it = it->second.region->kind() == kind ? take(it) : std::next(it);
      }
    } else if (auto it = regions_.find(name); it != regions_.end() && it->second.region->kind() == kind) {
      take(it);
    }
    // Those taken now, and those an earlier call took that are still open.
    for (auto it = closing_.begin(); it != closing_.end();) {
      if (it->second->HasBeenNotified()) {
        it = closing_.erase(it);
        continue;
      }
      if (kind == SharedMemoryKind::kCuda && (name.empty() || it->first == name)) open.push_back(*it);
      ++it;
    }
  }
  released.clear();  // the last reference, unless a request still holds the region
  open.erase(std::remove_if(open.begin(), open.end(), [](const auto& o) { return o.second->HasBeenNotified(); }),
             open.end());
  if (open.empty()) {
    if (closed) closed();
    return;
  }
  // The caller (a gRPC thread) goes on; the answer comes from the waiting thread.
  waiter_->Add(CloseWaiter::Waiting{std::move(open), absl::Now() + kCudaCloseWait, std::move(closed)});
}

void SharedMemoryRegistry::Unregister(const std::string& name, SharedMemoryKind kind) {
  absl::Notification done;
  Unregister(name, kind, [&done] { done.Notify(); });
  done.WaitForNotification();
}

absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> SharedMemoryRegistry::Status(
    const std::string& name, SharedMemoryKind kind) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  if (name.empty()) {
    for (const auto& [n, registered] : regions_) {
      if (registered.region->kind() == kind) out.push_back(registered.region);
    }
    return out;
  }
  auto it = regions_.find(name);
  if (it == regions_.end() || it->second.region->kind() != kind) {
    return absl::NotFoundError(absl::StrCat("no ", KindName(kind), " shared-memory region '", ClientName(name), "' is registered",
                                            it == regions_.end() ? "" : " (that name is a region of the other kind)"));
  }
  out.push_back(it->second.region);
  return out;
}

absl::StatusOr<SharedMemorySpan> SharedMemoryRegistry::Find(const std::string& name, uint64_t offset,
                                                            uint64_t byte_size) const {
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(name);
    if (it == regions_.end()) {
      return absl::NotFoundError(absl::StrCat("shared-memory region '", ClientName(name),
                                              "' is not registered (SystemSharedMemoryRegister or "
                                              "CudaSharedMemoryRegister it first)"));
    }
    region = it->second.region;
  }
  RETURN_IF_ERROR(region->CheckStillBacked());
  if (offset > region->byte_size() || byte_size > region->byte_size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory region '", ClientName(name), "': offset ", offset, " + byte_size ", byte_size,
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
