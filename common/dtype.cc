#include "common/dtype.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chronoserve {
namespace {
struct TypeInfo {
  DataType type;
  const char* name;
  size_t size;
};
constexpr TypeInfo kTypes[] = {
    {DataType::kBool, "BOOL", 1},     {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2}, {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8}, {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},   {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},   {DataType::kFp16, "FP16", 2},
    {DataType::kBf16, "BF16", 2},     {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
};
}  // namespace

size_t DataTypeByteSize(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.size;
  }
  return 0;
}

const char* DataTypeName(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.name;
  }
  return "INVALID";
}

absl::StatusOr<DataType> DataTypeFromName(absl::string_view name) {
  for (const auto& info : kTypes) {
    if (name == info.name) return info.type;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown datatype '", name,
      "' (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, "
      "BF16, FP32, FP64)"));
}

int64_t ElementCount(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return -1;
    count *= d;
  }
  return count;
}

std::optional<int64_t> ByteCount(int64_t elements, DataType dtype) {
  const auto element_bytes = static_cast<int64_t>(DataTypeByteSize(dtype));
  if (elements < 0 || (element_bytes > 0 && elements > std::numeric_limits<int64_t>::max() / element_bytes)) {
    return std::nullopt;
  }
  return elements * element_bytes;
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

}  // namespace chronoserve
