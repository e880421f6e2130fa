#include "server/telemetry/thread_stack_floor.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

namespace chronoserve::server::telemetry {

size_t StaticTlsBytes() {
  static const size_t bytes = [] {
    size_t total = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& header = info->dlpi_phdr[i];
            if (header.p_type != PT_TLS) continue;
            const size_t align = header.p_align > 0 ? header.p_align : 1;
            *static_cast<size_t*>(data) += (header.p_memsz + align - 1) / align * align;
          }
          return 0;
        },
        &total);
    return total;
  }();
  return bytes;
}

size_t StackSizeFor(size_t asked) {
  if (asked < static_cast<size_t>(PTHREAD_STACK_MIN)) return asked;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t wanted = asked + StaticTlsBytes() + page - 1;
  if (wanted < asked) return asked;  // overflow: as asked
  return wanted / page * page;
}

}  // namespace chronoserve::server::telemetry

// The process's pthread_attr_setstacksize (see the header): libc's, with the size StackSizeFor gives.
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) noexcept {
  using Setter = int (*)(pthread_attr_t*, size_t);
  static const Setter libc_setter = reinterpret_cast<Setter>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (libc_setter == nullptr) return ENOSYS;
  return libc_setter(attr, chronoserve::server::telemetry::StackSizeFor(size));
}
