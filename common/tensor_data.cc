#include "common/tensor_data.h"

#include <cmath>
#include <cstring>

namespace chronoserve {

uint16_t FloatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t f;
  if (exp == 0) {
    if (mant == 0) {
      f = sign;
    } else {  // normalise the subnormal
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      f = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    f = sign | 0x7f800000u | (mant << 13);
  } else {
    f = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

uint16_t FloatToBfloat16(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

float Bfloat16ToFloat(uint16_t bits) {
  const uint32_t f = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

namespace {
template <typename T>
void Put(std::string& out, int64_t i, T value) {
  std::memcpy(&out[static_cast<size_t>(i) * sizeof(T)], &value, sizeof(T));
}
template <typename T>
T Get(const char* data, int64_t i) {
  T value;
  std::memcpy(&value, data + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return value;
}
}  // namespace

std::string RandomTensorBytes(DataType type, int64_t count, std::mt19937_64& rng) {
  std::string out(static_cast<size_t>(count) * DataTypeByteSize(type), '\0');
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small_signed(-50, 50);
  std::uniform_int_distribution<int> small_unsigned(0, 100);
  for (int64_t i = 0; i < count; ++i) {
    switch (type) {
      case DataType::kBool: Put<uint8_t>(out, i, static_cast<uint8_t>(rng() & 1u)); break;
      case DataType::kUint8: Put<uint8_t>(out, i, static_cast<uint8_t>(small_unsigned(rng))); break;
      case DataType::kUint16: Put<uint16_t>(out, i, static_cast<uint16_t>(small_unsigned(rng))); break;
      case DataType::kUint32: Put<uint32_t>(out, i, static_cast<uint32_t>(small_unsigned(rng))); break;
      case DataType::kUint64: Put<uint64_t>(out, i, static_cast<uint64_t>(small_unsigned(rng))); break;
      case DataType::kInt8: Put<int8_t>(out, i, static_cast<int8_t>(small_signed(rng))); break;
      case DataType::kInt16: Put<int16_t>(out, i, static_cast<int16_t>(small_signed(rng))); break;
      case DataType::kInt32: Put<int32_t>(out, i, small_signed(rng)); break;
      case DataType::kInt64: Put<int64_t>(out, i, small_signed(rng)); break;
      case DataType::kFp16: Put<uint16_t>(out, i, FloatToHalf(real(rng))); break;
      case DataType::kBf16: Put<uint16_t>(out, i, FloatToBfloat16(real(rng))); break;
      case DataType::kFp32: Put<float>(out, i, real(rng)); break;
      case DataType::kFp64: Put<double>(out, i, real(rng)); break;
      case DataType::kInvalid: break;
    }
  }
  return out;
}

double ElementAsDouble(DataType type, const char* data, int64_t i) {
  switch (type) {
    case DataType::kBool: return Get<uint8_t>(data, i) != 0 ? 1.0 : 0.0;
    case DataType::kUint8: return Get<uint8_t>(data, i);
    case DataType::kUint16: return Get<uint16_t>(data, i);
    case DataType::kUint32: return Get<uint32_t>(data, i);
    case DataType::kUint64: return static_cast<double>(Get<uint64_t>(data, i));
    case DataType::kInt8: return Get<int8_t>(data, i);
    case DataType::kInt16: return Get<int16_t>(data, i);
    case DataType::kInt32: return Get<int32_t>(data, i);
    case DataType::kInt64: return static_cast<double>(Get<int64_t>(data, i));
    case DataType::kFp16: return HalfToFloat(Get<uint16_t>(data, i));
    case DataType::kBf16: return Bfloat16ToFloat(Get<uint16_t>(data, i));
    case DataType::kFp32: return Get<float>(data, i);
    case DataType::kFp64: return Get<double>(data, i);
    case DataType::kInvalid: break;
  }
  return std::nan("");
}

}  // namespace chronoserve
