// The CUDA building blocks on a real GPU: pinned staging is page-locked, events time device work.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "server/backend/cuda/cuda_event.h"
#include "server/backend/cuda/pinned_buffer.h"
#include "server/backend/torch_backend.h"

namespace chronoserve::server::cuda {
namespace {

TEST(CudaPiecesTest, AGpuIsVisible) { ASSERT_GE(CudaDeviceCount(), 1); }

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

}  // namespace
}  // namespace chronoserve::server::cuda
