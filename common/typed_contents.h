// KServe v2's typed tensor contents (InferTensorContents: bool_contents, int_contents, ...) as the
// row-major bytes of a datatype, for the server's typed inputs and the client's typed outputs
// alike. A template over the contents message, so that common/ needs no generated code.
#ifndef CHRONOSERVE_COMMON_TYPED_CONTENTS_H_
#define CHRONOSERVE_COMMON_TYPED_CONTENTS_H_

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"

namespace chronoserve {

// The contents field that carries `dtype` ("" when none does), as KServe v2 assigns them: INT8-INT32
// in int_contents, UINT8-UINT32 in uint_contents, BOOL in bool_contents...
inline const char* TypedContentsField(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: return "uint_contents";
    case DataType::kUint64: return "uint64_contents";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    default: return "";
  }
}

// The values of `dtype`'s field as bytes: `count` values, or the first one the datatype cannot hold.
struct TypedBytes {
  std::string bytes;
  int64_t count = 0;
  struct OutOfRange {
    int index = 0;
    std::string value;  // as written
    std::string range;  // the datatype's: "8-bit signed: -128 to 127"
  };
  std::optional<OutOfRange> out_of_range;  // set: `bytes` is incomplete
};

namespace typed_contents_internal {

template <typename To, typename Values>
TypedBytes Pack(const Values& values) {
  TypedBytes out;
  out.count = values.size();
  out.bytes.resize(static_cast<size_t>(values.size()) * sizeof(To));
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    using From = std::decay_t<decltype(v)>;
    if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
      if (v < static_cast<From>(std::numeric_limits<To>::min()) || v > static_cast<From>(std::numeric_limits<To>::max())) {
        // int64 for the bounds: int8_t would print as a character.
        out.out_of_range = TypedBytes::OutOfRange{
            i, absl::StrCat(v),
            absl::StrCat(sizeof(To) * 8, "-bit ", std::is_signed_v<To> ? "signed" : "unsigned", ": ",
                         static_cast<int64_t>(std::numeric_limits<To>::min()), " to ",
                         static_cast<uint64_t>(std::numeric_limits<To>::max()))};
        return out;
      }
    }
    const To converted = static_cast<To>(v);
    std::memcpy(&out.bytes[static_cast<size_t>(i) * sizeof(To)], &converted, sizeof(To));
  }
  return out;
}

}  // namespace typed_contents_internal

// `contents` (an inference::InferTensorContents) as bytes of `dtype`, read from the field that
// carries it (TypedContentsField); nullopt for a datatype no field carries (FP16, BF16, BYTES).
template <typename Contents>
std::optional<TypedBytes> PackTypedContents(const Contents& c, DataType dtype) {
  using typed_contents_internal::Pack;
  switch (dtype) {
    case DataType::kBool: return Pack<uint8_t>(c.bool_contents());
    case DataType::kInt8: return Pack<int8_t>(c.int_contents());
    case DataType::kInt16: return Pack<int16_t>(c.int_contents());
    case DataType::kInt32: return Pack<int32_t>(c.int_contents());
    case DataType::kInt64: return Pack<int64_t>(c.int64_contents());
    case DataType::kUint8: return Pack<uint8_t>(c.uint_contents());
    case DataType::kUint16: return Pack<uint16_t>(c.uint_contents());
    case DataType::kUint32: return Pack<uint32_t>(c.uint_contents());
    case DataType::kUint64: return Pack<uint64_t>(c.uint64_contents());
    case DataType::kFp32: return Pack<float>(c.fp32_contents());
    case DataType::kFp64: return Pack<double>(c.fp64_contents());
    default: return std::nullopt;
  }
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TYPED_CONTENTS_H_
