// Element conversions and test/warm-up data: FP16 / BF16 <-> float, and random (never all-zero)
// tensor bytes of any DataType. Used by the server's warm-up, by chronobench and by tests.
#ifndef CHRONOSERVE_COMMON_TENSOR_DATA_H_
#define CHRONOSERVE_COMMON_TENSOR_DATA_H_

#include <cstdint>
#include <random>
#include <string>

#include "common/dtype.h"

namespace chronoserve {

uint16_t FloatToHalf(float value);     // IEEE 754 binary16, round to nearest even
float HalfToFloat(uint16_t bits);
uint16_t FloatToBfloat16(float value);  // round to nearest even
float Bfloat16ToFloat(uint16_t bits);

// `count` elements of `type` as row-major bytes: floats uniform in [-1, 1), integers in a small
// range that fits every type (0..100 for unsigned, -50..50 for signed), bools 50/50.
std::string RandomTensorBytes(DataType type, int64_t count, std::mt19937_64& rng);

// Element `i` of a row-major buffer of `type`, as double (for comparisons in tests and tools).
double ElementAsDouble(DataType type, const char* data, int64_t i);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TENSOR_DATA_H_
