#include "common/dtype.h"

#include <gtest/gtest.h>

namespace chronoserve {
namespace {

TEST(DataTypeTest, NamesRoundTripAndSizes) {
  const std::pair<DataType, size_t> all[] = {
      {DataType::kBool, 1},  {DataType::kUint8, 1}, {DataType::kUint16, 2}, {DataType::kUint32, 4},
      {DataType::kUint64, 8}, {DataType::kInt8, 1},  {DataType::kInt16, 2},  {DataType::kInt32, 4},
      {DataType::kInt64, 8}, {DataType::kFp16, 2},  {DataType::kBf16, 2},   {DataType::kFp32, 4},
      {DataType::kFp64, 8}};
  for (const auto& [type, size] : all) {
    auto parsed = DataTypeFromName(DataTypeName(type));
    ASSERT_TRUE(parsed.ok()) << DataTypeName(type);
    EXPECT_EQ(*parsed, type);
    EXPECT_EQ(DataTypeByteSize(type), size) << DataTypeName(type);
  }
}

TEST(DataTypeTest, UnknownNameIsInvalidArgumentNamingIt) {
  auto parsed = DataTypeFromName("FP8");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("'FP8'"), std::string::npos);
  EXPECT_FALSE(DataTypeFromName("fp32").ok()) << "wire names are case-sensitive";
}

TEST(DataTypeTest, ElementCount) {
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({4, 20, 20}), 1600);
  EXPECT_EQ(ElementCount({3, -1}), -1);
  EXPECT_EQ(ElementCount({1LL << 40, 1LL << 40}), -1) << "overflow saturates";
  EXPECT_EQ(ShapeString({1, 4, 20}), "[1,4,20]");
}

}  // namespace
}  // namespace chronoserve
