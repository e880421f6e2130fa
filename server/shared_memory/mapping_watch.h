// MappingWatch: keeps a client that shrinks its shared-memory object from killing the server.
//
// A process that reads or writes a shared mapping past the end of the file behind it gets SIGBUS,
// whose default action ends it. A client that ftruncates a registered object while one of its
// requests is queued or running would so crash the server and every other client's requests with
// it. While a MappingWatch lives, a SIGBUS at an address in its range is handled instead: the whole
// range is replaced by private zero-filled pages (the faulting access then completes on those) and
// the watch is marked lost. The request that touched it is then failed (SharedMemoryRegion::
// CheckStillBacked), and so is every later one naming the region: its mapping no longer shares the
// client's object. A SIGBUS anywhere else goes to the handler that was installed before (by
// default it ends the process, as it would have without this).
//
// The same technique as Wayland compositors use for their clients' shared-memory buffers. The
// handler is installed on the first Start(); it reads a lock-free table (slots are never freed,
// only reused), calls mmap (a system call, safe in a handler on Linux) and nothing that allocates
// or locks.
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_MAPPING_WATCH_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_MAPPING_WATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace chronoserve::server {

namespace mapping_watch_internal {
struct Slot;
}  // namespace mapping_watch_internal

class MappingWatch {
 public:
  // Watches [start, start + bytes) (a page-aligned shared mapping); destroy it before the range is
  // unmapped.
  static std::unique_ptr<MappingWatch> Start(void* start, size_t bytes);
  ~MappingWatch();
  MappingWatch(const MappingWatch&) = delete;
  MappingWatch& operator=(const MappingWatch&) = delete;

  // Whether a SIGBUS in the range was handled (its pages are now the server's own, zero-filled).
  bool lost() const;
  // How many faults the handler has turned into lost ranges since the process started.
  static int64_t handled_faults();

 private:
  using Slot = mapping_watch_internal::Slot;
  explicit MappingWatch(Slot* slot) : slot_(slot) {}
  Slot* const slot_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_MAPPING_WATCH_H_
