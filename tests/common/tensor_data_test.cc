#include "common/tensor_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace chronoserve {
namespace {

TEST(HalfTest, ExactValuesRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 65504.0f, 6.103515625e-05f /*min normal*/,
                  5.9604644775390625e-08f /*min subnormal*/}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
  }
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Relative error bound over a sweep.
  for (float v = -100.0f; v < 100.0f; v += 0.37f) {
    EXPECT_NEAR(HalfToFloat(FloatToHalf(v)), v, std::fabs(v) * 0.001f + 1e-4f);
  }
}

TEST(Bfloat16Test, RoundTripAndRounding) {
  EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(1.0f)), 1.0f);
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  for (float v = -10.0f; v < 10.0f; v += 0.113f) {
    EXPECT_NEAR(Bfloat16ToFloat(FloatToBfloat16(v)), v, std::fabs(v) * 0.008f);
  }
}

TEST(RandomTensorTest, NeverAllZeroAndInRange) {
  std::mt19937_64 rng(42);
  for (DataType t : {DataType::kBool, DataType::kUint8, DataType::kInt8, DataType::kInt32,
                     DataType::kInt64, DataType::kFp16, DataType::kBf16, DataType::kFp32,
                     DataType::kFp64, DataType::kUint64}) {
    const std::string bytes = RandomTensorBytes(t, 64, rng);
    ASSERT_EQ(bytes.size(), 64 * DataTypeByteSize(t));
    int nonzero = 0;
    for (int i = 0; i < 64; ++i) {
      const double v = ElementAsDouble(t, bytes.data(), i);
      if (v != 0) ++nonzero;
      EXPECT_LE(std::fabs(v), 100.0) << DataTypeName(t);
    }
    EXPECT_GT(nonzero, 8) << DataTypeName(t);
  }
}

}  // namespace
}  // namespace chronoserve
