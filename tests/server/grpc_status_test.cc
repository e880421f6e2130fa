// ToGrpcStatus: codes map 1:1 and a message over kMaxStatusMessageBytes is cut with "..." on a
// UTF-8 character boundary, for characters of 1 to 4 bytes at every position of the cut; the cut
// message survives a proto3 string field (ModelStreamInferResponse.error_message), which a parser
// refuses when it holds half a character.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "proto/inference.pb.h"
#include "server/grpc/grpc_status.h"

namespace chronoserve::server {
namespace {

// Structural UTF-8 check: each lead byte is followed by exactly its continuation bytes.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t width = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (width == 0 || i + width > s.size()) return false;
    for (size_t k = 1; k < width; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += width;
  }
  return true;
}

// Whether `message` as ModelStreamInferResponse.error_message parses back (what a client reads).
bool SurvivesStreamResponse(const std::string& message) {
  inference::ModelStreamInferResponse sent;
  sent.set_error_message(message);
  std::string wire;
  if (!sent.SerializeToString(&wire)) return false;
  inference::ModelStreamInferResponse read;
  return read.ParseFromString(wire) && read.error_message() == message;
}

struct Character {
  const char* name;
  std::string bytes;
};

const Character kCharacters[] = {
    {"ascii 'q'", "q"}, {"2-byte e-acute", "\xC3\xA9"}, {"3-byte euro", "\xE2\x82\xAC"}, {"4-byte emoji", "\xF0\x9F\x98\x80"}};

TEST(GrpcStatusTest, ALongMessageIsCutOnACharacterBoundaryAtEveryCutPosition) {
  for (const Character& c : kCharacters) {
    // A lead of 0..3 ASCII bytes moves the cut through every byte of the repeated character.
    for (size_t lead = 0; lead < 4; ++lead) {
      std::string message = "input '" + std::string(lead, 'x');
      while (message.size() <= kMaxStatusMessageBytes + 8) message += c.bytes;
      const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(message));
      const std::string& cut = status.error_message();
      SCOPED_TRACE(std::string(c.name) + ", lead " + std::to_string(lead));
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_LE(cut.size(), kMaxStatusMessageBytes);
      EXPECT_GT(cut.size(), kMaxStatusMessageBytes - c.bytes.size()) << "backs up no further than one character";
      ASSERT_GE(cut.size(), 3u);
      EXPECT_EQ(cut.substr(cut.size() - 3), "...");
      const std::string kept = cut.substr(0, cut.size() - 3);
      EXPECT_EQ(message.compare(0, kept.size(), kept), 0) << "a prefix of the message";
      EXPECT_TRUE(IsValidUtf8(cut));
      EXPECT_TRUE(SurvivesStreamResponse(cut));
    }
  }
}

TEST(GrpcStatusTest, AMessageAtTheLimitIsKeptWhole) {
  std::string message = "model 'm': ";
  while (message.size() + 2 <= kMaxStatusMessageBytes) message += "\xC3\xA9";
  message.resize(kMaxStatusMessageBytes, 'z');
  const grpc::Status status = ToGrpcStatus(absl::NotFoundError(message));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), message);
}

TEST(GrpcStatusTest, OkStaysOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

}  // namespace
}  // namespace chronoserve::server
