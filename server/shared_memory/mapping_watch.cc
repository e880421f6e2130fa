#include "server/shared_memory/mapping_watch.h"

#include <signal.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/base/call_once.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace chronoserve::server {
namespace mapping_watch_internal {

// One watched range. `start` is 0 while the slot is free; it is written last when a watch begins
// and first when it ends, and the handler reads it again after `end`, so it never pairs a start with
// another watch's end (a new watch at the same start makes the pair that watch's own).
struct Slot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> lost{false};
};

}  // namespace mapping_watch_internal

namespace {

using mapping_watch_internal::Slot;

// Slots live in chunks that are linked once and never freed: the handler may walk them at any
// time, with no lock.
struct Chunk {
  std::array<Slot, 256> slots;
  std::atomic<Chunk*> next{nullptr};
};

std::atomic<Chunk*> g_chunks{nullptr};
std::atomic<int64_t> g_handled{0};
struct sigaction g_previous {};
absl::once_flag g_install_once;

// Writers (Start and ~MappingWatch) take it; the handler never does.
absl::Mutex& WritersMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

// What would have happened without us: the previous handler, or the default action (the fault
// repeats when this returns, and the process ends by SIGBUS, with its core dump).
void PassOn(int signal, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
    return;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  // A SIGBUS sent by another process (kill, sigqueue: si_code <= 0) does not repeat by itself as a
  // fault does: send it again, so that it ends the process (pending until this handler returns).
  if (info->si_code <= 0) ::raise(signal);
}

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // Only a fault the kernel raised (si_code > 0) has an address; a SIGBUS sent by kill() carries the
  // sender's pid and uid where si_addr would be.
  const uintptr_t address = info->si_code > 0 ? reinterpret_cast<uintptr_t>(info->si_addr) : 0;
  for (Chunk* chunk = address == 0 ? nullptr : g_chunks.load(std::memory_order_acquire); chunk != nullptr;
       chunk = chunk->next.load(std::memory_order_acquire)) {
    for (Slot& slot : chunk->slots) {
      const uintptr_t start = slot.start.load(std::memory_order_acquire);
      if (start == 0 || address < start) continue;
      const uintptr_t end = slot.end.load(std::memory_order_acquire);
      // The slot may have ended and begun another watch between the two loads: then start and end
      // belong to different watches, and start was cleared (or changed) in between.
      if (address >= end || slot.start.load(std::memory_order_acquire) != start) continue;
      // The range's pages become the server's own (zeros): the access that faulted completes on
      // them, and nothing the client does to its object reaches this range any more.
      void* replaced = ::mmap(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE,
                              MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (replaced == MAP_FAILED) break;  // cannot recover: as without a watch
      slot.lost.store(true, std::memory_order_release);
      g_handled.fetch_add(1, std::memory_order_relaxed);
      errno = saved_errno;
      return;
    }
  }
  errno = saved_errno;
  PassOn(signal, info, context);
}

void Install() {
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGBUS, &action, &g_previous) != 0) {
    CS_LOG(WARNING) << "cannot install the SIGBUS handler for shared-memory regions (" << std::strerror(errno)
                    << "): a client that shrinks a registered object can crash the server";
  }
}

// A free slot, from a new chunk when every one is taken. Under WritersMutex.
Slot* FreeSlot() {
  Chunk* last = nullptr;
  for (Chunk* chunk = g_chunks.load(std::memory_order_acquire); chunk != nullptr;
       chunk = chunk->next.load(std::memory_order_acquire)) {
    for (Slot& slot : chunk->slots) {
      if (slot.start.load(std::memory_order_relaxed) == 0) return &slot;
    }
    last = chunk;
  }
  auto* fresh = new Chunk;  // never freed: the handler may be walking the list
  if (last == nullptr) {
    g_chunks.store(fresh, std::memory_order_release);
  } else {
    last->next.store(fresh, std::memory_order_release);
  }
  return &fresh->slots[0];
}

}  // namespace

std::unique_ptr<MappingWatch> MappingWatch::Start(void* start, size_t bytes) {
  absl::call_once(g_install_once, Install);
  absl::MutexLock lock(&WritersMutex());
  Slot* slot = FreeSlot();
  slot->lost.store(false, std::memory_order_relaxed);
  slot->end.store(reinterpret_cast<uintptr_t>(start) + bytes, std::memory_order_release);
  slot->start.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
  return std::unique_ptr<MappingWatch>(new MappingWatch(slot));
}

MappingWatch::~MappingWatch() {
  absl::MutexLock lock(&WritersMutex());
  slot_->start.store(0, std::memory_order_release);
  slot_->end.store(0, std::memory_order_release);
}

bool MappingWatch::lost() const { return slot_->lost.load(std::memory_order_acquire); }

int64_t MappingWatch::handled_faults() { return g_handled.load(std::memory_order_relaxed); }

}  // namespace chronoserve::server
