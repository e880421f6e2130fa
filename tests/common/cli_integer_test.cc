// IntegerIn: integer flags read in base 10 (CLI11 alone reads "010" as 8) and refused with a
// message that says what was expected.
#include "common/cli_integer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace chronoserve {
namespace {

TEST(CliIntegerTest, NormalizesBaseTenIntegersInRangeAndNamesTheRangeOtherwise) {
  struct Row {
    std::string in;
    int64_t min, max;
    std::string out, error;
  };
  const std::vector<Row> rows = {
      {"5", 1, 10, "5", ""},
      {"010", 0, 100, "10", ""},
      {"+7", 0, 100, "7", ""},
      {"0", 0, 65535, "0", ""},
      {"65535", 0, 65535, "65535", ""},
      {"-3", -5, 5, "-3", ""},
      {"0", 1, 10, "", "'0' is not an integer from 1 to 10"},
      {"65536", 0, 65535, "", "'65536' is not an integer from 0 to 65535"},
      {"-1", 0, 10, "", "'-1' is not an integer from 0 to 10"},
      {"0x10", 0, 100, "", "'0x10' is not an integer from 0 to 100"},
      {"1.5", 0, 100, "", "'1.5' is not an integer from 0 to 100"},
      {"", 0, 100, "", "'' is not an integer from 0 to 100"},
      {"99999999999999999999", 0, 100, "", "'99999999999999999999' is not an integer from 0 to 100"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.in);
    std::string value = row.in;
    const std::string error = NormalizeIntegerIn(value, row.min, row.max);
    EXPECT_EQ(error, row.error);
    if (row.error.empty()) EXPECT_EQ(value, row.out);
  }
}

TEST(CliIntegerTest, ACliAppGetsTheDecimalValueOrTheMessage) {
  auto parse = [](std::vector<std::string> args, int* n) -> std::string {
    CLI::App app;
    app.add_option("--n", *n)->transform(IntegerIn(1, 100));
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  int n = 0;
  EXPECT_EQ(parse({"--n", "010"}, &n), "");
  EXPECT_EQ(n, 10) << "base 10, where CLI11 alone reads 8";
  EXPECT_THAT(parse({"--n", "0"}, &n), ::testing::HasSubstr("--n: '0' is not an integer from 1 to 100"));
  EXPECT_THAT(parse({"--n", "0x20"}, &n), ::testing::HasSubstr("'0x20' is not an integer from 1 to 100"));
}

}  // namespace
}  // namespace chronoserve
