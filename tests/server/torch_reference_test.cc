// The reference checks themselves: a NaN (or infinite) output is a mismatch, never within tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/server/torch_reference.h"

namespace chronoserve {
namespace {

std::string Fp32Bytes(const std::vector<float>& v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(ReferenceMismatchTest, AcceptsOutputsWithinTolerance) {
  const std::vector<float> want = {1.5f, -2.25f, 3.0f};
  EXPECT_EQ(testing::ReferenceMismatch(Fp32Bytes({1.50005f, -2.25f, 3.0f}), want), "");
  EXPECT_NE(testing::ReferenceMismatch(Fp32Bytes({1.5f, -2.25f, 3.1f}), want), "") << "0.1 off";
  EXPECT_EQ(testing::ReferenceMismatch(Fp32Bytes({1.5f, -2.25f}), want), "wrong output size");
}

TEST(ReferenceMismatchTest, ReportsANanOutput) {
  const std::vector<float> want = {1.5f, -2.25f, 3.0f};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(testing::ReferenceMismatch(Fp32Bytes({1.5f, nan, 3.0f}), want), "");
  EXPECT_NE(testing::ReferenceMismatch(Fp32Bytes({1.5f, -2.25f, 3.0f}), {1.5f, nan, 3.0f}), "") << "a NaN reference";
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_NE(testing::ReferenceMismatch(Fp32Bytes({inf, -2.25f, 3.0f}), want), "");
}

}  // namespace
}  // namespace chronoserve
