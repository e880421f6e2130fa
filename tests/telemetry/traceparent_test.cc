// W3C Trace Context parsing: the spec's valid and invalid traceparent / tracestate cases.
#include "common/traceparent.h"

#include <gtest/gtest.h>

#include <string>

namespace chronoserve {
namespace {

constexpr const char* kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ParsesTheSpecExample) {
  auto p = ParseTraceparent(kValid);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ToHex(p->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(p->parent_id), "00f067aa0ba902b7");
  EXPECT_TRUE(p->sampled());
  EXPECT_EQ(p->version, 0);
}

TEST(TraceparentTest, NotSampledAndUnknownFlagBits) {
  auto p = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->sampled());
  p = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->sampled());
}

TEST(TraceparentTest, FormatRoundTrips) {
  auto p = ParseTraceparent(kValid);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(FormatTraceparent(p->trace_id, p->parent_id, p->flags), kValid);
}

TEST(TraceparentTest, TrimsOptionalWhitespace) {
  EXPECT_TRUE(ParseTraceparent(std::string(" \t") + kValid + " ").ok());
}

TEST(TraceparentTest, FutureVersionMayCarryMoreFields) {
  EXPECT_TRUE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds").ok());
  EXPECT_TRUE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").ok());
  // ... but not glued to the flags.
  EXPECT_FALSE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x").ok());
}

TEST(TraceparentTest, RejectsInvalidValues) {
  const char* invalid[] = {
      "",
      "00",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",   // v00 must be exactly 55
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-010",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace-id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent-id
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
      "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // not hex
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
      "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    // wrong separators
      "00-4bf92f3577b34da6a3ce929d0e0e47-3600f067aa0ba902b7-01",    // misplaced dash
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
  };
  for (const char* value : invalid) {
    EXPECT_FALSE(ParseTraceparent(value).ok()) << "accepted: '" << value << "'";
  }
}

TEST(TracestateTest, NormalizesValidLists) {
  auto s = NormalizeTracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  s = NormalizeTracestate(" , vendor@tenant1=x ,, a_b-c*d/e=v1 \t");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "vendor@tenant1=x,a_b-c*d/e=v1");
  s = NormalizeTracestate("1tenant@system=ok");  // a tenant id may start with a digit
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*NormalizeTracestate(""), "");
}

TEST(TracestateTest, RejectsInvalidLists) {
  const char* invalid[] = {
      "novalue",
      "Upper=1",                 // keys are lower case
      "1key=1",                  // a simple key starts with a letter
      "k=1,k=2",                 // duplicate key
      "k=va,lue=x=y",            // '=' inside a value
      "k=trailing ",             // a value may not end in a space... (trimmed as OWS) -> see below
      "t@toolongsystemid=1",     // system-id at most 14 characters
      "k=\x01",
  };
  for (const char* value : invalid) {
    if (std::string(value) == "k=trailing ") continue;  // OWS around members is legal: trimmed
    EXPECT_FALSE(NormalizeTracestate(value).ok()) << "accepted: '" << value << "'";
  }
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_FALSE(NormalizeTracestate(many).ok());
  many.clear();
  for (int i = 0; i < 32; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_TRUE(NormalizeTracestate(many).ok());
}

}  // namespace
}  // namespace chronoserve
