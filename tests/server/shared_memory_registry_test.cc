// SharedMemoryRegistry and SharedMemoryRegion on real POSIX shared memory (objects created with the
// client's RAII SystemSharedMemory, so every one is unlinked when its test ends).
#include "server/shared_memory/shared_memory_registry.h"

#include <atomic>
#include <gmock/gmock.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/synchronization/mutex.h"
#include "client/system_shared_memory.h"
#include "common/thread_role.h"
#include "server/shared_memory/mapping_watch.h"
#include "server/shared_memory/region_releaser.h"
#include "tests/fakes/finishes_within.h"

namespace chronoserve::server {
namespace {

using ::testing::HasSubstr;
using client::SystemSharedMemory;

// A fresh object of `bytes` bytes filled with a non-zero pattern, under a key unique to this process.
std::unique_ptr<SystemSharedMemory> MakeObject(const std::string& tag, size_t bytes) {
  static int counter = 0;
  auto shm = SystemSharedMemory::Create(absl::StrCat("/cs_registry_test_", getpid(), "_", tag, "_", counter++), bytes);
  EXPECT_TRUE(shm.ok()) << shm.status();
  if (!shm.ok()) return nullptr;
  for (size_t i = 0; i < bytes; ++i) (*shm)->data()[i] = static_cast<char>(1 + i % 251);
  return *std::move(shm);
}

TEST(SharedMemoryRegistryTest, RegisterFindStatusUnregister) {
  auto obj = MakeObject("basic", 8192);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r0", obj->key(), 0, 4096).ok());
  ASSERT_TRUE(registry.Register("r1", obj->key(), 4096, 4096).ok()) << "two regions of one object";
  EXPECT_EQ(registry.size(), 2u);

  auto span = registry.Find("r1", 100, 200);
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(span->byte_size, 200u);
  EXPECT_EQ(std::memcmp(span->data, obj->data() + 4096 + 100, 200), 0) << "the server sees the client's bytes";
  span->data[0] = 42;
  EXPECT_EQ(obj->data()[4196], 42) << "and the client sees the server's writes";

  auto all = registry.Status("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1]->name(), "r1");
  EXPECT_EQ((*all)[1]->key(), obj->key());
  EXPECT_EQ((*all)[1]->offset(), 4096u);
  EXPECT_EQ((*all)[1]->byte_size(), 4096u);
  EXPECT_EQ(registry.Status("nope").status().code(), absl::StatusCode::kNotFound);

  registry.Unregister("r0");
  EXPECT_EQ(registry.Find("r0", 0, 1).status().code(), absl::StatusCode::kNotFound);
  registry.Unregister("never_registered");  // not an error, as in Triton
  registry.Unregister("");
  EXPECT_EQ(registry.size(), 0u);
}

TEST(SharedMemoryRegistryTest, AnObjectShrunkAfterRegistrationIsRefusedNotReadPastItsEnd) {
  // Reading the mapping past the object's new end would kill the server with SIGBUS.
  auto obj = MakeObject("shrunk", 8192);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r0", obj->key(), 4096, 4096).ok());
  ASSERT_TRUE(registry.Find("r0", 0, 4096).ok());
  const int fd = shm_open(obj->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd, 0), 0) << std::strerror(errno);
  close(fd);
  auto span = registry.Find("r0", 0, 4096);
  ASSERT_FALSE(span.ok());
  EXPECT_EQ(span.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(span.status().message()),
              HasSubstr("shared-memory region 'r0' (key '" + obj->key() + "'): the object shrank to 0 bytes"));
  EXPECT_THAT(std::string(span.status().message()), HasSubstr("need 8192"));
}

// Shrunk after the request's check, as a client can between a request's arrival and its copies:
// the server's reads and writes of the missing pages are survived (they see the server's own zeros),
// the region says it is lost, and the registry refuses it from then on.
TEST(SharedMemoryRegistryTest, AccessesAfterAShrinkAreSurvivedAndLoseTheRegion) {
  auto obj = MakeObject("shrunk_in_use", 3 * 4096);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r0", obj->key(), 100, 2 * 4096).ok());
  auto span = registry.Find("r0", 0, 2 * 4096);
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(span->data[0], static_cast<char>(1 + 100 % 251)) << "the client's bytes, before the shrink";
  EXPECT_TRUE(span->region->CheckStillBacked().ok());
  const int fd = shm_open(obj->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd, 4096), 0) << std::strerror(errno);  // the window's later pages go
  close(fd);

  const int64_t faults_before = MappingWatch::handled_faults();
  volatile char* bytes = span->data;
  const char last = bytes[2 * 4096 - 1];  // past the object's new end: SIGBUS without the watch
  bytes[2 * 4096 - 2] = 7;
  EXPECT_EQ(last, 0) << "the server's own zero-filled page";
  EXPECT_EQ(bytes[2 * 4096 - 2], 7);
  EXPECT_EQ(MappingWatch::handled_faults(), faults_before + 1);

  const absl::Status lost = span->region->CheckStillBacked();
  EXPECT_EQ(lost.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(lost.message()),
              HasSubstr("shared-memory region 'r0' (key '" + obj->key() + "'): the object shrank while a request"));
  const int fd_again = shm_open(obj->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd_again, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd_again, 3 * 4096), 0) << "grown back by the client";
  close(fd_again);
  EXPECT_EQ(registry.Find("r0", 0, 1).status().code(), absl::StatusCode::kInvalidArgument)
      << "still refused: the window no longer shares the client's object";
  registry.Unregister("r0");
  span->region.reset();
  ASSERT_TRUE(registry.Register("r0", obj->key(), 100, 2 * 4096).ok()) << "registered again";
  auto again = registry.Find("r0", 0, 2 * 4096);
  ASSERT_TRUE(again.ok()) << again.status();
  again->data[5] = 9;
  EXPECT_EQ(obj->data()[105], 9) << "shared with the client again";
}

// How a SIGBUS the registry's handler does not take ends the process: killed by the signal, or, under
// AddressSanitizer (whose own SIGBUS handler is the one passed the fault), its report and exit 1.
bool EndedByTheFault(int status) {
#if defined(__SANITIZE_ADDRESS__)
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1) return true;
#endif
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
}

// The handler takes only faults in watched windows: any other SIGBUS ends the process as before.
// (The forked child shrinks the parent's object, which the parent then only unmaps and unlinks.)
TEST(SharedMemoryRegistryDeathTest, AFaultOutsideEveryRegionStillEndsTheProcess) {
  auto watched = MakeObject("watched", 4096);
  auto other = MakeObject("unwatched", 2 * 4096);
  ASSERT_TRUE(watched && other);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r0", watched->key(), 0, 4096).ok()) << "installs the handler";
  EXPECT_EXIT(
      {
        const int fd = shm_open(other->key().c_str(), O_RDWR, 0);
        if (fd < 0 || ftruncate(fd, 0) != 0) _exit(3);
        volatile char* bytes = other->data();
        const char c = bytes[4096 + 1];
        _exit(c == 0 ? 4 : 5);
      },
      EndedByTheFault, "");
}

// A SIGBUS sent by another process (kill -BUS) is no fault in a region: it ends the process as it
// would without the handler, and does not leave the handler quietly switched off.
TEST(SharedMemoryRegistryDeathTest, ASigbusSentByKillStillEndsTheProcess) {
  auto watched = MakeObject("killed", 4096);
  ASSERT_NE(watched, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r0", watched->key(), 0, 4096).ok()) << "installs the handler";
  EXPECT_EXIT(
      {
        ::kill(::getpid(), SIGBUS);
        _exit(6);  // reached only if the signal was swallowed
      },
      EndedByTheFault, "");
}

TEST(SharedMemoryRegistryTest, UnalignedOffsetsMapTheRightBytes) {
  auto obj = MakeObject("unaligned", 3 * 4096);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("odd", obj->key(), 4097, 5000).ok());
  auto span = registry.Find("odd", 3, 10);
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(std::memcmp(span->data, obj->data() + 4100, 10), 0);
}

TEST(SharedMemoryRegistryTest, ErrorsNameTheRegionKeyAndSizes) {
  auto obj = MakeObject("errors", 4096);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("taken", obj->key(), 0, 1024).ok());

  absl::Status dup = registry.Register("taken", obj->key(), 0, 16);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("'taken'"));

  absl::Status missing = registry.Register("m", "/cs_registry_test_no_such_key", 0, 16);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("/cs_registry_test_no_such_key"));
  EXPECT_THAT(std::string(missing.message()), HasSubstr("No such file or directory")) << "the errno text";

  absl::Status too_big = registry.Register("big", obj->key(), 4000, 200);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("4200 bytes exceeds the object's 4096 bytes"));

  // The key up to a NUL byte names a real object: refused, not mapped as that object.
  absl::Status nul = registry.Register("nul", obj->key() + std::string("\0x", 2), 0, 16);
  EXPECT_EQ(nul.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(nul.message()), HasSubstr("'nul': the key holds a NUL byte at"));
  EXPECT_FALSE(registry.Find("nul", 0, 1).ok()) << "nothing registered under it";

  EXPECT_EQ(registry.Register("zero", obj->key(), 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("", obj->key(), 0, 16).code(), absl::StatusCode::kInvalidArgument);

  auto out_of_range = registry.Find("taken", 1000, 25);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out_of_range.status().message()), HasSubstr("offset 1000 + byte_size 25"));
  EXPECT_THAT(std::string(out_of_range.status().message()), HasSubstr("1024 bytes"));
  EXPECT_EQ(registry.Find("taken", 2000, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Find("taken", 1, ~uint64_t{0}).status().code(), absl::StatusCode::kInvalidArgument)
      << "no overflow";

  // A client's long name is quoted cut short, so the sizes after it survive the 1 KiB status cut.
  const std::string long_name(3000, 'n');
  ASSERT_TRUE(registry.Register(long_name, obj->key(), 0, 1024).ok());
  auto long_range = registry.Find(long_name, 1000, 25);
  EXPECT_EQ(long_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(long_range.status().message().size(), 600u);
  EXPECT_THAT(std::string(long_range.status().message()), HasSubstr("offset 1000 + byte_size 25 does not fit in its 1024"));
  EXPECT_THAT(std::string(registry.Register(long_name, obj->key(), 0, 16).message()),
              HasSubstr("(3000 bytes)' is already registered"));
}

TEST(SharedMemoryRegistryTest, AHeldSpanOutlivesUnregisterAndTheNameIsFreeAtOnce) {
  auto obj = MakeObject("held", 4096);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", obj->key(), 0, 4096).ok());
  auto span = registry.Find("r", 0, 4096);
  ASSERT_TRUE(span.ok());
  registry.Unregister("r");
  EXPECT_EQ(span->region.use_count(), 1) << "only the request's reference is left";
  obj->data()[7] = 99;
  EXPECT_EQ(span->data[7], 99) << "still mapped";
  ASSERT_TRUE(registry.Register("r", obj->key(), 0, 2048).ok()) << "the name is free again";
  EXPECT_EQ(span->byte_size, 4096u) << "the old span keeps its own mapping";
}

TEST(SharedMemoryRegistryTest, ConcurrentRegisterOfOneNameHasOneWinner) {
  auto obj = MakeObject("race", 4096);
  ASSERT_NE(obj, nullptr);
  SharedMemoryRegistry registry;
  std::vector<absl::Status> results(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = registry.Register("same", obj->key(), 0, 64); });
  }
  for (auto& t : threads) t.join();
  int ok = 0;
  for (const auto& s : results) {
    if (s.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    }
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(registry.size(), 1u);
}

// How many of the pages under [data, data + bytes) the object has in memory (mincore: for shared
// memory, whether the page exists yet; a freshly truncated object has none until they are touched).
size_t ResidentPages(const char* data, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(data) / page * page;
  const size_t length = reinterpret_cast<uintptr_t>(data) + bytes - start;
  std::vector<unsigned char> vec((length + page - 1) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(start), length, vec.data()), 0) << std::strerror(errno);
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

TEST(SystemSharedMemoryTest, CreateMapsEveryPageUpFront) {
  constexpr size_t kBytes = 64 * 4096;
  auto shm = SystemSharedMemory::Create(absl::StrCat("/cs_populate_client_", getpid()), kBytes);
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_EQ(ResidentPages((*shm)->data(), kBytes), kBytes / 4096)
      << "the first request must not pay the region's page faults";
}

TEST(SharedMemoryRegistryTest, RegistrationMapsEveryPageUpFront) {
  constexpr size_t kBytes = 64 * 4096;
  // An object made as a client without chronoserve's library would: created, sized, never touched.
  const std::string key = absl::StrCat("/cs_populate_server_", getpid());
  const int fd = ::shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, S_IRUSR | S_IWUSR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  absl::Cleanup unlink = [&key] { ::shm_unlink(key.c_str()); };  // also when an ASSERT below fails
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  ASSERT_EQ(::ftruncate(fd, kBytes), 0) << std::strerror(errno);
  void* view = ::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd, 0);
  std::move(close_fd).Invoke();
  ASSERT_NE(view, MAP_FAILED) << std::strerror(errno);
  absl::Cleanup unmap = [view] { ::munmap(view, kBytes); };
  EXPECT_EQ(ResidentPages(static_cast<char*>(view), kBytes), 0u) << "nothing touched the object yet";
  {
    SharedMemoryRegistry registry;
    ASSERT_TRUE(registry.Register("r", key, 4096, kBytes - 4096).ok());
    auto span = registry.Find("r", 0, kBytes - 4096);
    ASSERT_TRUE(span.ok()) << span.status();
    EXPECT_EQ(ResidentPages(span->data, kBytes - 4096), kBytes / 4096 - 1) << "registration mapped the window";
    EXPECT_EQ(ResidentPages(static_cast<char*>(view), 4096), 0u) << "and nothing before it";
  }
}

// The size of the filesystem behind shm_open (/dev/shm), or 0 when it has no limit.
uint64_t ShmFilesystemBytes() {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
}

// An object sized past what /dev/shm can hold, as a client's ftruncate makes it: without its pages,
// the first request touching them killed the server with SIGBUS. Now it is refused at registration,
// before anything is mapped or allocated (the kernel refuses the range at once).
TEST(SharedMemoryRegistryTest, AnObjectLargerThanTheFilesystemCanHoldIsRefused) {
  const uint64_t fs_bytes = ShmFilesystemBytes();
  if (fs_bytes == 0) GTEST_SKIP() << "/dev/shm has no size limit here";
  const uint64_t bytes = fs_bytes + (2 << 20);
  const std::string key = absl::StrCat("/cs_too_big_", getpid());
  const int fd = ::shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, S_IRUSR | S_IWUSR);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  absl::Cleanup unlink = [&key] { ::shm_unlink(key.c_str()); };
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0) << std::strerror(errno);
  SharedMemoryRegistry registry;
  absl::Status status = registry.Register("big", key, 0, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("shared-memory region 'big' (key '", key, "'): cannot allocate its ", bytes)));
  EXPECT_THAT(std::string(status.message()), HasSubstr("/dev/shm"));
  EXPECT_EQ(registry.size(), 0u);
}

TEST(SystemSharedMemoryTest, CreateLargerThanTheFilesystemCanHoldIsRefusedAndLeavesNothing) {
  const uint64_t fs_bytes = ShmFilesystemBytes();
  if (fs_bytes == 0) GTEST_SKIP() << "/dev/shm has no size limit here";
  const std::string key = absl::StrCat("/cs_too_big_client_", getpid());
  auto shm = SystemSharedMemory::Create(key, fs_bytes + (2 << 20));
  ASSERT_FALSE(shm.ok());
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kResourceExhausted) << shm.status();
  EXPECT_THAT(std::string(shm.status().message()), HasSubstr("/dev/shm has no room for it"));
  const int fd = ::shm_open(key.c_str(), O_RDONLY, 0);
  EXPECT_LT(fd, 0) << "the object was unlinked";
  if (fd >= 0) ::close(fd);
}

// Out of descriptors is the server's limit, not a bad request: RESOURCE_EXHAUSTED, and a region
// unregistered makes room for the next.
TEST(SharedMemoryRegistryTest, RunningOutOfDescriptorsIsResourceExhaustedAndRecovers) {
  auto obj = MakeObject("fds", 4096);
  ASSERT_NE(obj, nullptr);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::open("/dev/null", O_RDONLY);  // descriptors are handed out lowest first
  ASSERT_GE(lowest_free, 0) << std::strerror(errno);
  ::close(lowest_free);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free + 8);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0) << std::strerror(errno);
  absl::Cleanup restore = [&saved] { ::setrlimit(RLIMIT_NOFILE, &saved); };
  SharedMemoryRegistry registry;
  absl::Status status;
  int registered = 0;
  for (; registered < 64; ++registered) {
    status = registry.Register(absl::StrCat("r", registered), obj->key(), 0, 4096);
    if (!status.ok()) break;
  }
  ASSERT_LT(registered, 64) << "the lowered limit never ran out";
  ASSERT_GT(registered, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("region 'r", registered, "'")));
  registry.Unregister("r0");
  EXPECT_TRUE(registry.Register("again", obj->key(), 0, 4096).ok());
}

// ---- CUDA regions, opened by an opener a test supplies: host memory stands in for the client's
// GPU memory (the registry never reads the bytes), and the opener records what it was asked ----

struct FakeDevice {
  std::vector<char> memory = std::vector<char>(1 << 16, 5);
  int opened = 0;
  std::shared_ptr<int> closed = std::make_shared<int>(0);
  std::string last_handle;
  int64_t last_device = -1;

  DeviceMemoryOpener Opener() {
    return [this](const std::string& handle, int64_t device, uint64_t byte_size,
                  char** data) -> absl::StatusOr<std::shared_ptr<void>> {
      if (byte_size > memory.size()) return absl::InvalidArgumentError("exceeds the allocation");
      ++opened;
      last_handle = handle;
      last_device = device;
      *data = memory.data();
      auto closed_count = closed;
      return std::shared_ptr<void>(memory.data(), [closed_count](void*) { ++*closed_count; });
    };
  }
};

std::string Handle(char seed) {
  std::string h(64, '\0');
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<char>(seed + 3 * i);
  return h;
}

TEST(SharedMemoryRegistryTest, CudaRegionsNeedAGpu) {
  SharedMemoryRegistry registry;
  EXPECT_FALSE(registry.cuda_enabled());
  absl::Status status = registry.RegisterCuda("c0", Handle(1), 0, 4096);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("'c0'"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("no GPU"));
  auto none = registry.Status("", SharedMemoryKind::kCuda);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(SharedMemoryRegistryTest, CudaRegionsRegisterFindAndClose) {
  FakeDevice device;
  SharedMemoryRegistry registry(nullptr, device.Opener());
  EXPECT_TRUE(registry.cuda_enabled());
  ASSERT_TRUE(registry.RegisterCuda("c0", Handle(1), 2, 8192).ok());
  EXPECT_EQ(device.opened, 1);
  EXPECT_EQ(device.last_handle, Handle(1)) << "the raw handle reaches the opener unchanged";
  EXPECT_EQ(device.last_device, 2);

  auto span = registry.Find("c0", 100, 200);
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(span->data, device.memory.data() + 100);
  EXPECT_TRUE(span->region->on_device());
  EXPECT_FALSE(span->region->host_pinned()) << "device memory is not page-locked host memory";
  EXPECT_EQ(span->region->device_id(), 2);
  EXPECT_EQ(registry.Find("c0", 8000, 200).status().code(), absl::StatusCode::kInvalidArgument)
      << "a range past the registered size";

  {
    auto cuda = registry.Status("c0", SharedMemoryKind::kCuda);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    ASSERT_EQ(cuda->size(), 1u);
    EXPECT_EQ((*cuda)[0]->byte_size(), 8192u);
  }
  auto as_system = registry.Status("c0", SharedMemoryKind::kSystem);
  EXPECT_EQ(as_system.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(as_system.status().message()), HasSubstr("other kind"));
  ASSERT_TRUE(registry.Status("", SharedMemoryKind::kSystem).ok());
  EXPECT_TRUE(registry.Status("", SharedMemoryKind::kSystem)->empty());

  // One namespace for both kinds, as in Triton.
  auto obj = MakeObject("cuda_names", 4096);
  ASSERT_NE(obj, nullptr);
  EXPECT_EQ(registry.Register("c0", obj->key(), 0, 4096).code(), absl::StatusCode::kAlreadyExists);
  absl::Status twice = registry.RegisterCuda("c0", Handle(2), 0, 4096);
  EXPECT_EQ(twice.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("CUDA memory on GPU 2"));
  ASSERT_TRUE(registry.Register("s0", obj->key(), 0, 4096).ok());

  // Unregistering by the other kind leaves a region alone; "" drops every region of one kind.
  registry.Unregister("c0", SharedMemoryKind::kSystem);
  EXPECT_TRUE(registry.Find("c0", 0, 1).ok());
  // A CUDA region's Unregister returns once its handle is closed: the client may cudaFree next. A
  // request's span holds it here, so the call waits (the name is free at once) until it lets go.
  absl::Notification unregistered;
  int closed_at_return = -1;
  std::thread unregister([&] {
    registry.Unregister("", SharedMemoryKind::kCuda);
    closed_at_return = *device.closed;
    unregistered.Notify();
  });
  EXPECT_FALSE(unregistered.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "Unregister must wait while a request holds the CUDA region";
  EXPECT_EQ(registry.Find("c0", 0, 1).status().code(), absl::StatusCode::kNotFound) << "the name goes at once";
  EXPECT_TRUE(registry.Find("s0", 0, 1).ok()) << "the system region stays";
  EXPECT_EQ(*device.closed, 0) << "a request's span still holds the handle open";
  span = absl::NotFoundError("dropped");
  testing::FinishesWithin("Unregister, once the last holder let go", absl::Seconds(5), [&] { unregister.join(); });
  EXPECT_TRUE(unregistered.HasBeenNotified());
  EXPECT_EQ(closed_at_return, 1) << "closed before Unregister returned";
  // With no holder it returns at once, closed.
  ASSERT_TRUE(registry.RegisterCuda("c1", Handle(3), 0, 4096).ok());
  const absl::Time start = absl::Now();
  registry.Unregister("c1", SharedMemoryKind::kCuda);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "microseconds; a wrong one blocks for good";
  EXPECT_EQ(*device.closed, 2);
}

// The waiting Unregister answers through its callback, not by holding its caller (a gRPC thread):
// it returns at once while a request holds the region, and the callback comes once the handle is
// closed. A second call for the same name, or one for every name, while the first still waits, is
// answered no sooner (the name is gone, but the handle it named is not closed yet).
TEST(SharedMemoryRegistryTest, AWaitingCudaUnregisterAnswersLaterAndLaterCallsWaitToo) {
  FakeDevice device;
  SharedMemoryRegistry registry(nullptr, device.Opener());
  ASSERT_TRUE(registry.RegisterCuda("c0", Handle(1), 0, 4096).ok());
  ASSERT_TRUE(registry.RegisterCuda("c1", Handle(2), 0, 4096).ok());
  auto span = registry.Find("c0", 0, 16);
  ASSERT_TRUE(span.ok()) << span.status();

  // Shared with the callbacks, which the registry's waiting thread may run after a failed check.
  struct Answers {
    absl::Notification first, again, every, other;
    std::atomic<int> closed_at_first{-1};
  };
  auto answers = std::make_shared<Answers>();
  const std::shared_ptr<int> closed = device.closed;
  const absl::Time start = absl::Now();
  registry.Unregister("c0", SharedMemoryKind::kCuda, [answers, closed] {
    answers->closed_at_first = *closed;
    answers->first.Notify();
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the caller goes on while the region is held";
  registry.Unregister("c0", SharedMemoryKind::kCuda, [answers] { answers->again.Notify(); });
  registry.Unregister("c1", SharedMemoryKind::kCuda, [answers] { answers->other.Notify(); });
  EXPECT_TRUE(answers->other.HasBeenNotified()) << "c1 had no holder: answered at once, on the calling thread";
  registry.Unregister("", SharedMemoryKind::kCuda, [answers] { answers->every.Notify(); });
  EXPECT_FALSE(answers->first.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  EXPECT_FALSE(answers->again.HasBeenNotified()) << "the same name again: its handle is still open";
  EXPECT_FALSE(answers->every.HasBeenNotified()) << "every name: c0's handle is still open";
  EXPECT_EQ(*device.closed, 1) << "c1 closed, c0 held";

  span = absl::NotFoundError("dropped");  // the request lets go
  EXPECT_TRUE(answers->first.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(answers->again.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(answers->every.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(answers->closed_at_first.load(), 2) << "closed before the answer";

  absl::Notification system;
  registry.Unregister("c0", SharedMemoryKind::kSystem, [&] { system.Notify(); });
  EXPECT_TRUE(system.HasBeenNotified()) << "nothing of the system kind to wait for";
}

// Unregistering again and again while a request holds a region costs one waiting thread, not one
// a call: every call is answered once the handle closes.
TEST(SharedMemoryRegistryTest, ManyWaitingUnregistersShareOneThread) {
  FakeDevice device;
  SharedMemoryRegistry registry(nullptr, device.Opener());
  ASSERT_TRUE(registry.RegisterCuda("c0", Handle(1), 0, 4096).ok());
  auto span = registry.Find("c0", 0, 16);
  ASSERT_TRUE(span.ok()) << span.status();
  auto threads = [] {
    std::error_code ec;
    return std::distance(std::filesystem::directory_iterator("/proc/self/task", ec),
                         std::filesystem::directory_iterator());
  };
  const auto before = threads();
  constexpr int kCalls = 200;
  auto answered = std::make_shared<std::atomic<int>>(0);
  registry.Unregister("c0", SharedMemoryKind::kCuda, [answered] { ++*answered; });
  for (int i = 1; i < kCalls; ++i) registry.Unregister("", SharedMemoryKind::kCuda, [answered] { ++*answered; });
  EXPECT_LE(threads() - before, 1) << "one thread waits for all of them";
  EXPECT_EQ(answered->load(), 0);
  absl::Notification all;
  registry.Unregister("", SharedMemoryKind::kCuda, [&all] { all.Notify(); });
  span = absl::NotFoundError("dropped");
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(5)));
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (answered->load() < kCalls && absl::Now() < until) std::this_thread::yield();
  EXPECT_EQ(answered->load(), kCalls);
}

// A region the client unregistered while a request held it goes when that request does. When the
// request ends on a worker or completion thread (latency-critical), a system region's release
// (munmap, and cudaHostUnregister when page-locked: here the fake pinner's token records where it
// went) runs on RegionReleaser's thread instead; from any other thread it runs at once, on that
// thread. A CUDA region is closed at once wherever it goes (the client may cudaFree next).
TEST(SharedMemoryRegistryTest, ARegionReleasedFromAWorkerThreadIsUnmappedOnAnotherThread) {
  std::vector<char> memory(4096, 7);
  absl::Mutex mu;
  std::vector<std::thread::id> released_on;  // guarded by mu
  auto record = [&](void*) {
    absl::MutexLock lock(&mu);
    released_on.push_back(std::this_thread::get_id());
  };
  SharedMemoryRegistry registry(
      [&](void* data, size_t) { return std::shared_ptr<void>(data, record); },
      [&](const std::string&, int64_t, uint64_t, char** data) -> absl::StatusOr<std::shared_ptr<void>> {
        *data = memory.data();
        return std::shared_ptr<void>(memory.data(), record);
      });
  auto released = [&]() {
    absl::MutexLock lock(&mu);
    return released_on;
  };
  auto obj = MakeObject("released", 8192);
  ASSERT_NE(obj, nullptr);
  const int64_t background_before = RegionReleaser::Get().released_in_background();
  // Dropped by a thread marked latency-critical, as a worker is.
  auto drop_on_a_worker = [](absl::StatusOr<SharedMemorySpan>& span) {
    std::thread::id id;
    std::thread worker([&] {
      MarkThreadLatencyCritical();
      id = std::this_thread::get_id();
      span = absl::NotFoundError("dropped by the worker");
    });
    worker.join();
    return id;
  };

  // A system region dropped on an ordinary thread (this one): unmapped at once, here.
  ASSERT_TRUE(registry.Register("plain", obj->key(), 0, 4096).ok());
  auto span = registry.Find("plain", 0, 64);
  ASSERT_TRUE(span.ok()) << span.status();
  registry.Unregister("plain");
  span = absl::NotFoundError("dropped");
  ASSERT_EQ(released().size(), 1u);
  EXPECT_EQ(released()[0], std::this_thread::get_id());

  // A system region dropped on a worker: unmapped on another thread.
  ASSERT_TRUE(registry.Register("held", obj->key(), 4096, 4096).ok());
  span = registry.Find("held", 0, 64);
  ASSERT_TRUE(span.ok()) << span.status();
  registry.Unregister("held");
  const std::thread::id worker_id = drop_on_a_worker(span);
  ASSERT_TRUE(RegionReleaser::Get().WaitIdle(absl::Seconds(30))) << "the releaser never got to it";
  ASSERT_EQ(released().size(), 2u);
  EXPECT_NE(released()[1], worker_id) << "not on the worker";
  EXPECT_NE(released()[1], std::this_thread::get_id());
  EXPECT_EQ(RegionReleaser::Get().released_in_background(), background_before + 1);
  EXPECT_FALSE(IsThreadLatencyCritical()) << "the mark is the worker's own";

  // A CUDA region dropped on a worker: closed there, at once.
  ASSERT_TRUE(registry.RegisterCuda("gpu", Handle(4), 0, 4096).ok());
  span = registry.Find("gpu", 0, 64);
  ASSERT_TRUE(span.ok()) << span.status();
  registry.Unregister("gpu", SharedMemoryKind::kCuda);
  const std::thread::id cuda_worker_id = drop_on_a_worker(span);
  ASSERT_EQ(released().size(), 3u);
  EXPECT_EQ(released()[2], cuda_worker_id);
  EXPECT_EQ(RegionReleaser::Get().released_in_background(), background_before + 1);
}

TEST(SharedMemoryRegistryTest, CudaRegistrationRefusalsNameTheRegion) {
  FakeDevice device;
  SharedMemoryRegistry registry(nullptr, device.Opener());
  absl::Status short_handle = registry.RegisterCuda("c1", "abc", 0, 4096);
  EXPECT_EQ(short_handle.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_handle.message()), HasSubstr("'c1': raw_handle holds 3 bytes"));
  EXPECT_EQ(registry.RegisterCuda("c1", Handle(1), 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCuda("c1", Handle(1), -1, 4096).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCuda("", Handle(1), 0, 4096).code(), absl::StatusCode::kInvalidArgument);
  absl::Status too_big = registry.RegisterCuda("c1", Handle(1), 0, 1 << 20);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("CUDA shared-memory region 'c1': exceeds"));
  EXPECT_EQ(device.opened, 0);
  EXPECT_EQ(registry.size(), 0u);
}

}  // namespace
}  // namespace chronoserve::server
