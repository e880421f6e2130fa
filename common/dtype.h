// DataType: the tensor element types chronoserve serves, with their KServe v2 wire names
// ("FP32", "BF16", ...) and byte sizes. Pure functions, no dependencies beyond abseil.
#ifndef CHRONOSERVE_COMMON_DTYPE_H_
#define CHRONOSERVE_COMMON_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

enum class DataType {
  kInvalid,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
};

// Bytes per element; 0 for kInvalid.
size_t DataTypeByteSize(DataType type);

// KServe v2 wire name ("FP32"); "INVALID" for kInvalid.
const char* DataTypeName(DataType type);

// Parses a KServe v2 wire name; INVALID_ARGUMENT names the unknown string.
absl::StatusOr<DataType> DataTypeFromName(absl::string_view name);

// Product of dims; -1 if any dim is negative; INVALID_ARGUMENT-free helper (saturates on overflow
// to -1 so callers reject absurd shapes instead of wrapping).
int64_t ElementCount(const std::vector<int64_t>& dims);

// Bytes `elements` values of `dtype` take; nullopt when `elements` is negative (ElementCount's
// overflow) or the bytes pass int64, so no caller multiplies into a wrapped size.
std::optional<int64_t> ByteCount(int64_t elements, DataType dtype);

// "[1,4,20,20]" for messages.
std::string ShapeString(const std::vector<int64_t>& dims);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_DTYPE_H_
