// The CUDA building blocks on a real GPU: pinned staging is page-locked, events time device work,
// the copy kernel puts every byte of many ranges where it belongs; a page-locked shared-memory
// window lost to a client's shrink is unpinned without a CUDA error.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "client/system_shared_memory.h"
#include "server/backend/cuda/copy_ranges.h"
#include "server/backend/cuda/cuda_event.h"
#include "server/backend/cuda/pinned_buffer.h"
#include "server/backend/host_pinning.h"
#include "server/backend/torch_backend.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server::cuda {
namespace {

TEST(CudaPiecesTest, AGpuIsVisible) { ASSERT_GE(CudaDeviceCount(), 1); }

// docs/SHARED_MEMORY.md: a read of a page-locked window whose object shrank is survived (the watch
// replaces the window under its pinning), the region reads as lost, unregistering it unpins what is
// left with no CUDA error on the thread, and a window pinned after it copies to the device as usual.
TEST(CudaPiecesTest, APinnedSharedMemoryWindowLostToAShrinkIsUnpinnedCleanly) {
  constexpr size_t kBytes = 1 << 20;
  SharedMemoryRegistry registry(MakeCudaHostPinner());
  const std::string key = "/cs_gpu_pinned_shrink_" + std::to_string(::getpid());
  auto object = client::SystemSharedMemory::Create(key, kBytes);
  ASSERT_TRUE(object.ok()) << object.status();
  for (size_t i = 0; i < kBytes; ++i) (*object)->data()[i] = static_cast<char>(1 + i % 251);
  ASSERT_TRUE(registry.Register("shrinks", key, 0, kBytes).ok());
  {
    auto regions = registry.Status("shrinks");
    ASSERT_TRUE(regions.ok() && regions->size() == 1);
    const auto& region = regions->front();
    ASSERT_TRUE(region->host_pinned()) << "page-locked at registration";
    const int fd = ::shm_open(key.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(::ftruncate(fd, 4096), 0) << std::strerror(errno);
    ::close(fd);
    volatile const char* bytes = region->data();
    EXPECT_EQ(bytes[kBytes / 2], 0) << "past the object's end: the server's own page";
    EXPECT_FALSE(region->CheckStillBacked().ok()) << "lost";
    registry.Unregister("shrinks");
  }  // the last holder: unmapped and unpinned here, on this thread
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  const std::string key2 = key + "_after";
  auto after = client::SystemSharedMemory::Create(key2, kBytes);
  ASSERT_TRUE(after.ok()) << after.status();
  for (size_t i = 0; i < kBytes; ++i) (*after)->data()[i] = static_cast<char>(3 + i % 241);
  ASSERT_TRUE(registry.Register("after", key2, 0, kBytes).ok());
  auto span = registry.Find("after", 0, kBytes);
  ASSERT_TRUE(span.ok()) << span.status();
  ASSERT_TRUE(span->region->host_pinned());
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  std::vector<char> back(kBytes);
  EXPECT_EQ(cudaMemcpy(device, span->data, kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back.data(), device, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(back.data(), (*after)->data(), kBytes), 0);
  cudaFree(device);
}

TEST(CudaPiecesTest, PinnedBufferIsPageLockedAndGrows) {
  PinnedBuffer buffer;
  ASSERT_TRUE(buffer.Reserve(1000).ok());
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, buffer.data()), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeHost) << "cudaHostAlloc memory";
  const size_t first = buffer.capacity();
  ASSERT_TRUE(buffer.Reserve(first * 4).ok());
  EXPECT_GE(buffer.capacity(), first * 4);
  PinnedBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
}

// Growing never frees page-locked memory on the request path (cudaFreeHost synchronises the whole
// device): the outgrown buffer stays registered until the PinnedBuffer goes.
TEST(CudaPiecesTest, GrowingKeepsTheOutgrownBufferUntilDestroyed) {
  const char* old = nullptr;
  {
    PinnedBuffer buffer;
    ASSERT_TRUE(buffer.Reserve(1 << 20).ok());
    old = buffer.data();
    ASSERT_TRUE(buffer.Reserve(8 << 20).ok());
    ASSERT_NE(buffer.data(), old);
    cudaPointerAttributes attrs{};
    ASSERT_EQ(cudaPointerGetAttributes(&attrs, old), cudaSuccess);
    EXPECT_EQ(attrs.type, cudaMemoryTypeHost) << "still page-locked after the growth";
  }
  cudaPointerAttributes after{};
  ASSERT_EQ(cudaPointerGetAttributes(&after, old), cudaSuccess);
  EXPECT_EQ(after.type, cudaMemoryTypeUnregistered) << "freed with the buffer";
}

TEST(CudaPiecesTest, EventsTimeACopyOnAStream) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr size_t kBytes = 64 << 20;
  PinnedBuffer host;
  ASSERT_TRUE(host.Reserve(kBytes).ok());
  for (size_t i = 0; i < kBytes; i += 4096) host.data()[i] = static_cast<char>(i / 4096 + 1);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  CudaEvent start, end;
  ASSERT_TRUE(start.Init().ok());
  ASSERT_TRUE(end.Init().ok());
  ASSERT_TRUE(start.Record(stream).ok());
  ASSERT_EQ(cudaMemcpyAsync(device, host.data(), kBytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_TRUE(end.Record(stream).ok());
  ASSERT_TRUE(end.Synchronize().ok());
  auto ns = CudaEvent::ElapsedNs(start, end);
  ASSERT_TRUE(ns.ok()) << ns.status();
  // 64 MiB over PCIe/NVLink-C2C: well above 100 us, well below 1 s.
  EXPECT_GT(*ns, 100'000);
  EXPECT_LT(*ns, 1'000'000'000);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

// `count` ranges (the last one larger than a launch's blocks cover in one pass), their ends at every
// alignment from 1 to 16 bytes, a third of them misaligned alike at both ends (a head copied byte by
// byte, then whole words), lengths with and without a tail past the last whole word, some empty:
// each byte lands where it belongs and the bytes between the ranges keep their fill.
void ExpectEveryByteWhereItBelongs(size_t count) {
  SCOPED_TRACE(testing::Message() << count << " ranges");
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr size_t kSlot = 8192;            // each small range's room in the destination
  constexpr size_t kLarge = (3 << 20) + 5;  // the last range: more than 1 MiB, odd length
  constexpr size_t kSrcBytes = kLarge + 64;
  const size_t dst_bytes = count * kSlot + kLarge + 64;
  std::vector<unsigned char> src(kSrcBytes), expected(dst_bytes, 0xEE), got(dst_bytes, 0);
  for (size_t i = 0; i < kSrcBytes; ++i) src[i] = static_cast<unsigned char>((i * 131 + 7) % 251 + 1);
  void* src_allocation = nullptr;
  void* dst_allocation = nullptr;
  ASSERT_EQ(cudaMalloc(&src_allocation, kSrcBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst_allocation, dst_bytes), cudaSuccess);
  char* device_src = static_cast<char*>(src_allocation);
  char* device_dst = static_cast<char*>(dst_allocation);
  ASSERT_EQ(cudaMemcpy(device_src, src.data(), kSrcBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device_dst, expected.data(), dst_bytes, cudaMemcpyHostToDevice), cudaSuccess);

  std::vector<CopyRange> ranges;
  for (size_t i = 0; i + 1 < count; ++i) {
    const size_t dst_at = i * kSlot + i % 16;
    const size_t src_at = i % 3 == 0 ? (i * 37) % 4096 / 16 * 16 + i % 16  // misaligned alike
                                     : (i * 37) % 4096 + i % 17;
    const size_t bytes = i % 97 == 50 ? 0 : 1 + (i * 53) % 4000;  // a few empty ranges among them
    ranges.push_back(CopyRange{device_dst + dst_at, device_src + src_at, bytes});
    if (bytes > 0) std::memcpy(&expected[dst_at], &src[src_at], bytes);
  }
  const size_t large_at = (count - 1) * kSlot + 3;
  ranges.push_back(CopyRange{device_dst + large_at, device_src + 3, kLarge});
  std::memcpy(&expected[large_at], &src[3], kLarge);

  ASSERT_EQ(CopyRangesAsync(ranges.data(), ranges.size(), stream), cudaSuccess);
  ASSERT_EQ(CopyRangesAsync(ranges.data(), 0, stream), cudaSuccess) << "no ranges: nothing launched";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), device_dst, dst_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t wrong = 0;
  size_t first_wrong = dst_bytes;
  for (size_t i = 0; i < dst_bytes; ++i) {
    if (got[i] != expected[i]) {
      ++wrong;
      first_wrong = std::min(first_wrong, i);
    }
  }
  EXPECT_EQ(wrong, 0u) << "first wrong byte at " << first_wrong;
  cudaFree(device_src);
  cudaFree(device_dst);
  cudaStreamDestroy(stream);
}

// Every launch size the kernel has (a launch's argument holds up to 8, 32 or kMaxCopyRanges
// ranges), at and past each edge, and more ranges than one launch takes (three launches).
TEST(CudaPiecesTest, CopyRangesPutsEveryByteWhereItBelongs) {
  for (size_t count : {size_t{1}, size_t{8}, size_t{9}, size_t{32}, size_t{33}, kMaxCopyRanges,
                       2 * kMaxCopyRanges + 45}) {
    ExpectEveryByteWhereItBelongs(count);
  }
}

}  // namespace
}  // namespace chronoserve::server::cuda
