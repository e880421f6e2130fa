// Excerpt and Utf8PrefixLength: a client's value quoted in an error message is cut where a UTF-8
// character begins, so the message stays valid UTF-8 (a proto3 string a client's parser accepts).
#include "common/text_excerpt.h"

#include <gtest/gtest.h>

#include <string>

namespace chronoserve {
namespace {

TEST(TextExcerptTest, Utf8PrefixLengthStepsBackOverAStraddlingCharacterOnly) {
  const std::string text = "ab\xE2\x82\xAC" "cd";  // a b euro(3) c d
  EXPECT_EQ(Utf8PrefixLength(text, 2), 2u);
  EXPECT_EQ(Utf8PrefixLength(text, 3), 2u);
  EXPECT_EQ(Utf8PrefixLength(text, 4), 2u);
  EXPECT_EQ(Utf8PrefixLength(text, 5), 5u);
  EXPECT_EQ(Utf8PrefixLength(text, 100), text.size());
  // Not UTF-8 at the cut (continuation bytes only): cut at most 3 bytes early, never at 0.
  const std::string stray(10, '\x80');
  EXPECT_EQ(Utf8PrefixLength(stray, 8), 5u);
}

TEST(TextExcerptTest, IsUtf8AcceptsWellFormedTextOnly) {
  for (std::string_view good : {std::string_view(""), std::string_view("policy_net-2"), std::string_view("r\xc3\xa9sum\xc3\xa9"),
                                std::string_view("\xe2\x82\xac"), std::string_view("\xf0\x9f\x98\x80"),
                                std::string_view("\xf4\x8f\xbf\xbf"), std::string_view("a\0b", 3)}) {
    EXPECT_TRUE(IsUtf8(good)) << good;
  }
  for (std::string_view bad : {std::string_view("r\xe9sum\xe9"), std::string_view("\xc3"), std::string_view("\xe2\x82"),
                               std::string_view("\xc0\xaf"), std::string_view("\xe0\x80\xaf"), std::string_view("\xed\xa0\x80"),
                               std::string_view("\xf4\x90\x80\x80"), std::string_view("\xf5\x80\x80\x80"),
                               std::string_view("\x80"), std::string_view("\xe2\x28\xa1")}) {
    EXPECT_FALSE(IsUtf8(bad)) << ::testing::PrintToString(std::string(bad));
  }
}

TEST(TextExcerptTest, AnExcerptIsCutAtACharacterAndNamesTheFullLength) {
  EXPECT_EQ(Excerpt("short"), "short");
  // 63 ASCII bytes, then a 3-byte character straddling byte 64: left out whole.
  const std::string name = std::string(63, 'm') + "\xE2\x82\xAC" + "tail";
  EXPECT_EQ(Excerpt(name), std::string(63, 'm') + "... (70 bytes)");
  const std::string exact = std::string(61, 'm') + "\xE2\x82\xAC" + "tail";
  EXPECT_EQ(Excerpt(exact), std::string(61, 'm') + "\xE2\x82\xAC" + "... (68 bytes)") << "ends at byte 64";
}

}  // namespace
}  // namespace chronoserve
