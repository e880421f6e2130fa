// The wire library against protobuf's own encoder and parser: a message split apart reads back as
// protobuf read it, over any slicing of its bytes; a message written with entries apart parses as
// the message it stands for; owned and shared entries reach gRPC without a copy and are released
// with the buffer; malformed bytes are refused, never read past.
#include "common/wire/bytes_field.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "proto/inference.pb.h"
#include "tests/common/wire/test_buffers.h"

namespace chronoserve::wire {
namespace {

using google::protobuf::util::MessageDifferencer;

using testing::Flat;
using testing::Sliced;

std::string Bytes(size_t n, uint32_t seed) { return testing::NonZeroBytes(n, seed); }

inference::ModelInferRequest SampleRequest() {
  inference::ModelInferRequest r;
  r.set_model_name("policy_net");
  r.set_model_version("3");
  r.set_id("request-17");
  (*r.mutable_parameters())["timeout"].set_int64_param(250000);
  (*r.mutable_parameters())["traceparent"].set_string_param("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  for (int k = 0; k < 2; ++k) {
    auto* in = r.add_inputs();
    in->set_name("INPUT__" + std::to_string(k));
    in->set_datatype("FP32");
    in->add_shape(128);
    in->add_shape(k == 0 ? 1600 : 3);
  }
  r.add_outputs()->set_name("OUTPUT__1");
  r.add_raw_input_contents(Bytes(128 * 1600 * 4, 1));  // 800 KiB
  r.add_raw_input_contents(Bytes(128 * 3 * 4, 2));     // smaller than a slice
  return r;
}

TEST(SplitBytesFieldTest, ReadsWhatProtobufReadsOverAnySlicing) {
  const inference::ModelInferRequest sent = SampleRequest();
  const std::string bytes = sent.SerializeAsString();
  inference::ModelInferRequest without_raw = sent;
  without_raw.clear_raw_input_contents();
  for (size_t slice : {size_t{1}, size_t{7}, size_t{4096}, size_t{16384}, bytes.size()}) {
    SCOPED_TRACE(slice);
    ReceivedMessage received;
    ASSERT_TRUE(SplitBytesField(Sliced(bytes, slice), 7, &received).ok());
    inference::ModelInferRequest rest;
    ASSERT_TRUE(rest.ParseFromString(received.rest));
    EXPECT_TRUE(MessageDifferencer::Equals(rest, without_raw));
    ASSERT_EQ(received.entries.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(received.entries[k].size, sent.raw_input_contents(k).size());
      EXPECT_EQ(received.entries[k].ToString(), sent.raw_input_contents(k));
    }
    // One piece whenever the entry lies in one slice: no gather needed.
    if (slice == bytes.size()) {
      EXPECT_TRUE(received.entries[0].contiguous());
      EXPECT_EQ(received.entries[0].pieces.size(), 1u);
    }
    if (slice == 7) EXPECT_FALSE(received.entries[0].contiguous());
  }
}

TEST(SplitBytesFieldTest, KeepsTheReceivedSlicesAliveForItsViews) {
  const inference::ModelInferRequest sent = SampleRequest();
  ReceivedMessage received;
  {
    grpc::ByteBuffer wire = Sliced(sent.SerializeAsString(), 65536);
    ASSERT_TRUE(SplitBytesField(wire, 7, &received).ok());
  }  // the buffer is gone; the views hold the slices
  ASSERT_NE(received.slices, nullptr);
  EXPECT_EQ(received.entries[0].ToString(), sent.raw_input_contents(0));
}

TEST(SplitBytesFieldTest, OtherWireTypesAndTheFieldWithAnotherTypeStayInTheRest) {
  // Fixed32/64 and a varint at field 7 (no bytes field there: protobuf keeps it as unknown).
  std::string bytes;
  AppendVarint((1 << 3) | 2, &bytes);  // model_name
  AppendVarint(3, &bytes);
  bytes += "abc";
  AppendVarint((20 << 3) | 1, &bytes);  // unknown fixed64
  bytes += std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  AppendVarint((21 << 3) | 5, &bytes);  // unknown fixed32
  bytes += std::string("\x09\x0a\x0b\x0c", 4);
  AppendVarint((7 << 3) | 0, &bytes);  // field 7 as a varint
  AppendVarint(300, &bytes);
  ReceivedMessage received;
  ASSERT_TRUE(SplitBytesField(Sliced(bytes, 3), 7, &received).ok());
  EXPECT_TRUE(received.entries.empty());
  EXPECT_EQ(received.rest, bytes);
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(received.rest));
  EXPECT_EQ(parsed.model_name(), "abc");
}

// An unknown proto2 group (wire types 3 and 4), which protobuf skips, stays in the rest whole, the
// field being split included when it is inside the group; the entries outside it are split as ever.
TEST(SplitBytesFieldTest, AnUnknownGroupStaysInTheRestWithWhatItHolds) {
  inference::ModelInferRequest request = SampleRequest();
  std::string bytes = request.SerializeAsString();
  std::string group;
  AppendVarint((60 << 3) | 3, &group);  // start of group 60
  AppendVarint((7 << 3) | 2, &group);   // a field 7 inside it: the group's, no raw_input_contents
  AppendVarint(2, &group);
  group += "zz";
  AppendVarint((61 << 3) | 3, &group);  // a nested group
  AppendVarint((1 << 3) | 0, &group);
  AppendVarint(5, &group);
  AppendVarint((61 << 3) | 4, &group);
  AppendVarint((60 << 3) | 4, &group);  // its end
  bytes += group;
  ReceivedMessage received;
  ASSERT_TRUE(SplitBytesField(Sliced(bytes, 4096), 7, &received).ok());
  ASSERT_EQ(received.entries.size(), 2u) << "the two raw_input_contents outside the group";
  EXPECT_EQ(received.entries[1].ToString(), request.raw_input_contents(1));
  EXPECT_NE(received.rest.find(group), std::string::npos) << "the group stays whole in the rest";
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(received.rest)) << "protobuf skips the group";
  EXPECT_EQ(parsed.id(), "request-17");
  EXPECT_EQ(parsed.raw_input_contents_size(), 0);
}

TEST(SplitBytesFieldTest, RefusesMalformedBytes) {
  const std::string bytes = SampleRequest().SerializeAsString();
  ReceivedMessage received;
  // Cut inside the large entry: its length passes the end.
  absl::Status cut = SplitBytesField(Sliced(bytes.substr(0, bytes.size() - 1000), 4096), 7, &received);
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cut.message().find("longer than the message"), std::string::npos) << cut.message();
  // Cut inside the last, small entry, after the large one was read: no view of the slices the
  // failed call read (gone with it) is left behind.
  cut = SplitBytesField(Sliced(bytes.substr(0, bytes.size() - 100), 4096), 7, &received);
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(received.entries.empty()) << received.entries.size() << " entries view freed slices";
  EXPECT_TRUE(received.rest.empty());
  // Field number 0, a group never ended, a group's end never begun, wire type 6, a varint that never ends.
  for (const std::string& bad : {std::string("\x02\x01x", 3), std::string("\x0b\x08\x01", 3), std::string("\x0c", 1),
                                 std::string("\x0e\x01", 2),
                                 std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12)}) {
    absl::Status status = SplitBytesField(Sliced(bad, 1), 7, &received);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }
  // Empty is the empty message.
  ASSERT_TRUE(SplitBytesField(grpc::ByteBuffer(), 7, &received).ok());
  EXPECT_TRUE(received.rest.empty());
  EXPECT_TRUE(received.entries.empty());
}

TEST(SplitBytesFieldTest, ANestedMessageSplitsInPlace) {
  // A streamed answer: its infer_response is field 2 of the outer message; the outputs are field 6
  // of that. Splitting the outer message on 2, then its entry on 6, views the outputs in place.
  inference::ModelStreamInferResponse sent;
  sent.set_error_message("partly");
  auto* inner = sent.mutable_infer_response();
  inner->set_id("s9");
  inner->add_outputs()->set_name("OUTPUT__0");
  inner->add_raw_output_contents(Bytes(70000, 9));
  inner->add_raw_output_contents(Bytes(33, 10));
  ReceivedMessage outer;
  ASSERT_TRUE(SplitBytesField(Sliced(sent.SerializeAsString(), 1000), 2, &outer).ok());
  inference::ModelStreamInferResponse outer_rest;
  ASSERT_TRUE(outer_rest.ParseFromString(outer.rest));
  EXPECT_EQ(outer_rest.error_message(), "partly");
  EXPECT_FALSE(outer_rest.has_infer_response());
  ASSERT_EQ(outer.entries.size(), 1u);
  std::string rest;
  std::vector<ReceivedBytes> outputs;
  ASSERT_TRUE(SplitBytesField(outer.entries[0].pieces, 6, &rest, &outputs).ok());
  inference::ModelInferResponse inner_rest;
  ASSERT_TRUE(inner_rest.ParseFromString(rest));
  EXPECT_EQ(inner_rest.id(), "s9");
  EXPECT_EQ(inner_rest.outputs_size(), 1);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].ToString(), inner->raw_output_contents(0));
  EXPECT_EQ(outputs[1].ToString(), inner->raw_output_contents(1));
  EXPECT_GT(outputs[0].pieces.size(), 1u);  // it straddles the 1000-byte slices
}

TEST(MessageWriterTest, WritesWhatProtobufParsesAsTheMessage) {
  inference::ModelInferResponse want;
  want.set_model_name("policy_net");
  want.set_id("r1");
  (*want.mutable_parameters())["timing.compute_ns"].set_int64_param(98765);
  for (int k = 0; k < 4; ++k) want.add_outputs()->set_name("OUTPUT__" + std::to_string(k));
  // Large (own slice), small (copied beside the tags), empty (an output in shared memory), large.
  const std::string outputs[] = {Bytes(204800, 3), Bytes(512, 4), "", Bytes(MessageWriter::kOwnSliceBytes, 5)};
  for (const std::string& o : outputs) want.add_raw_output_contents(o);

  inference::ModelInferResponse head = want;
  head.clear_raw_output_contents();
  MessageWriter writer(head.SerializeAsString());
  writer.AddOwned(6, outputs[0]);
  writer.AddCopy(6, outputs[1]);
  writer.AddOwned(6, outputs[2]);
  auto shared = std::make_shared<std::string>(outputs[3]);
  writer.AddShared(6, *shared, shared);
  const size_t size = writer.size();
  const std::string wire = Flat(writer.Finish());
  EXPECT_EQ(wire.size(), size);
  EXPECT_EQ(wire.size(), want.ByteSizeLong());
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, want));
}

TEST(MessageWriterTest, OwnedAndSharedBytesReachTheBufferWithoutACopyAndAreReleasedWithIt) {
  std::string owned = Bytes(65536, 6);
  const char* owned_at = owned.data();
  auto shared = std::make_shared<std::string>(Bytes(65536, 7));
  std::weak_ptr<std::string> watch = shared;
  const char* shared_at = shared->data();
  {
    MessageWriter writer("");
    writer.AddOwned(6, std::move(owned));
    writer.AddShared(6, *shared, shared);
    shared.reset();
    grpc::ByteBuffer buffer = writer.Finish();
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    std::vector<const char*> starts;
    for (const grpc::Slice& s : slices) starts.push_back(reinterpret_cast<const char*>(s.begin()));
    EXPECT_NE(std::find(starts.begin(), starts.end(), owned_at), starts.end());
    EXPECT_NE(std::find(starts.begin(), starts.end(), shared_at), starts.end());
    EXPECT_FALSE(watch.expired());  // the buffer holds the shared bytes
  }
  EXPECT_TRUE(watch.expired());
}

TEST(MessageWriterTest, NestsTheMessageAsAFieldOfAnOuterOne) {
  inference::ModelStreamInferResponse want;
  want.set_error_message("");
  auto* inner = want.mutable_infer_response();
  inner->set_id("s1");
  inner->add_outputs()->set_name("OUTPUT__0");
  const std::string out = Bytes(100000, 8);
  inner->add_raw_output_contents(out);

  inference::ModelInferResponse head = *inner;
  head.clear_raw_output_contents();
  for (const std::string& error : {std::string(""), std::string("model 'm': failed")}) {
    want.set_error_message(error);
    MessageWriter writer(head.SerializeAsString());
    writer.AddOwned(6, out);
    inference::ModelStreamInferResponse outer;
    outer.set_error_message(error);
    writer.Nest(2, outer.SerializeAsString());
    const size_t size = writer.size();
    const std::string wire = Flat(writer.Finish());
    EXPECT_EQ(wire.size(), size);
    inference::ModelStreamInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, want));
  }
}

}  // namespace
}  // namespace chronoserve::wire
