// Test helpers for byte buffers: bytes none of which is zero, a message's bytes cut into slices as
// gRPC hands over what it read in pieces, and a buffer's bytes flattened back into one string.
#ifndef CHRONOSERVE_TESTS_COMMON_WIRE_TEST_BUFFERS_H_
#define CHRONOSERVE_TESTS_COMMON_WIRE_TEST_BUFFERS_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace chronoserve::testing {

// `n` bytes, none of them zero, from `seed`.
inline std::string NonZeroBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(1 + rng() % 255);
  return bytes;
}

// `bytes` as a byte buffer of slices of `slice` bytes (the last one shorter).
inline grpc::ByteBuffer Sliced(const std::string& bytes, size_t slice) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice) {
    slices.emplace_back(bytes.data() + at, std::min(slice, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Every byte of `buffer`, in order.
inline std::string Flat(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_COMMON_WIRE_TEST_BUFFERS_H_
