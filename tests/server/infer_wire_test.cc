// ModelInfer's messages as byte buffers (server/grpc/infer_wire.h) against protobuf's own encoder
// and parser: a request read in pieces is the request sent, its raw entries left in place; a
// response written with its outputs apart parses as the response (unary and streamed, outputs of
// every size and an empty one in shared memory's place); small outputs' strings keep their
// capacity for the response's next use; outputs the backend lent go from its bytes and hold them
// until the message is gone; bytes that are no request are refused by name.
#include "server/grpc/infer_wire.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/common/wire/test_buffers.h"

namespace chronoserve::server {
namespace {

using google::protobuf::util::MessageDifferencer;

using testing::Flat;
using testing::Sliced;

std::string Bytes(size_t n, uint32_t seed) { return testing::NonZeroBytes(n, seed); }

inference::ModelInferResponse SampleResponse() {
  inference::ModelInferResponse r;
  r.set_model_name("policy_net");
  r.set_model_version("1");
  r.set_id("r7");
  (*r.mutable_parameters())["timing.server_total_ns"].set_int64_param(123456);
  (*r.mutable_parameters())["timing.clock"].set_string_param("device");
  for (int k = 0; k < 4; ++k) {
    auto* out = r.add_outputs();
    out->set_name("OUTPUT__" + std::to_string(k));
    out->set_datatype("FP32");
    out->add_shape(128);
    out->add_shape(k == 1 ? 1 : 400);
  }
  r.add_raw_output_contents(Bytes(204800, 1));  // its own slice
  r.add_raw_output_contents(Bytes(512, 2));     // copied beside the tags
  r.add_raw_output_contents("");                // an output written into shared memory
  r.add_raw_output_contents(Bytes(204800, 3));
  return r;
}

TEST(InferWireTest, ARequestReadInPiecesIsTheRequestSent) {
  inference::ModelInferRequest sent;
  sent.set_model_name("policy_net");
  sent.set_id("q1");
  auto* in = sent.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  in->add_shape(128);
  in->add_shape(400);
  sent.add_raw_input_contents(Bytes(204800, 4));
  ReceivedInferRequest received;
  ASSERT_TRUE(ParseModelInferRequest(Sliced(sent.SerializeAsString(), 16384), &received).ok());
  EXPECT_TRUE(received.raw_apart());
  EXPECT_EQ(received.message.raw_input_contents_size(), 0);
  inference::ModelInferRequest head = sent;
  head.clear_raw_input_contents();
  EXPECT_TRUE(MessageDifferencer::Equals(received.message, head));
  ASSERT_EQ(received.raw.entries.size(), 1u);
  EXPECT_EQ(received.raw.entries[0].ToString(), sent.raw_input_contents(0));
  received.Clear();
  EXPECT_FALSE(received.raw_apart());
  EXPECT_TRUE(received.raw.entries.empty());
}

TEST(InferWireTest, BytesThatAreNoRequestAreRefusedSayingWhy) {
  ReceivedInferRequest received;
  // Field 1 (model_name) claims 300 bytes; 5 follow.
  const std::string truncated("\x0a\xac\x02model", 8);
  absl::Status status = ParseModelInferRequest(Sliced(truncated, 3), &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not a ModelInferRequest"), std::string::npos) << status;
  EXPECT_NE(status.message().find("longer than the message"), std::string::npos) << status;
  // Well-formed protobuf whose fields are not a ModelInferRequest's (inputs as a varint is unknown
  // and kept; a model_name that is not UTF-8 is not a proto3 string).
  const std::string bad_utf8("\x0a\x02\xff\xfe", 4);
  status = ParseModelInferRequest(Sliced(bad_utf8, 1), &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(),
            "the request is not a ModelInferRequest: its field model_name (a string, which must be UTF-8) does not "
            "parse");

  // A field deep inside is named by its path: the second input's name, a parameter's key.
  inference::ModelInferRequest request;
  request.set_model_name("m");
  request.add_inputs()->set_name("INPUT__0");
  auto* second = request.add_inputs();
  second->set_name("BADNAME1");
  second->set_datatype("FP32");
  second->add_shape(2);
  (*request.mutable_parameters())["BADKEY22"].set_int64_param(3);
  const std::string good = request.SerializeAsString();
  auto spoiled = [&good](const std::string& text) {
    std::string bytes = good;
    const size_t at = bytes.find(text);
    EXPECT_NE(at, std::string::npos) << text;
    bytes[at] = '\xff';
    bytes[at + 1] = '\xfe';
    return bytes;
  };
  status = ParseModelInferRequest(Sliced(spoiled("BADNAME1"), 7), &received);
  EXPECT_EQ(status.message(),
            "the request is not a ModelInferRequest: its field inputs[1].name (a string, which must be UTF-8) does not "
            "parse");
  status = ParseModelInferRequest(Sliced(spoiled("BADKEY22"), 7), &received);
  EXPECT_EQ(status.message(),
            "the request is not a ModelInferRequest: its field parameters (entry 0).key (a string, which must be "
            "UTF-8) does not parse");
  EXPECT_TRUE(ParseModelInferRequest(Sliced(good, 7), &received).ok()) << "the same request unspoiled parses";
}

// A packed run of numbers that fails is named by its field, not by an element index it does not
// count (the third dim of [1, 2, 3] cut short is not "shape[0]").
TEST(InferWireTest, APackedFieldThatFailsIsNamedWhole) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  auto* input = request.add_inputs();
  input->set_name("INPUT__0");
  input->add_shape(1);
  input->add_shape(2);
  input->add_shape(300);  // two bytes as a varint: 0xac 0x02
  std::string bytes = request.SerializeAsString();
  const size_t at = bytes.find("\xac\x02");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = '\x82';  // the varint's last byte says more follow, past the run's end
  ReceivedInferRequest received;
  const absl::Status status = ParseModelInferRequest(Sliced(bytes, 7), &received);
  EXPECT_EQ(status.message(), "the request is not a ModelInferRequest: its field inputs[0].shape does not parse");
}

// protobuf's streams count in int: bytes longer than 2 GiB are never read (the size would wrap to a
// negative length, and a fixed-width field's skip would copy with it). The view is longer than its
// buffer, so a read past the check would go out of bounds.
TEST(InferWireTest, FirstFieldThatFailsReadsNothingLongerThanAMessageCanBe) {
  const std::string head = "\x79\x01\x02\x03\x04\x05\x06\x07\x08\x0a\x02\xff\xfe";  // fixed64 field 15, bad name
  EXPECT_EQ(FirstFieldThatFails(inference::ModelInferRequest::descriptor(), head), "model_name (a string, which must be UTF-8)");
  const absl::string_view too_long(head.data(), (size_t{1} << 31) + 60);
  EXPECT_EQ(FirstFieldThatFails(inference::ModelInferRequest::descriptor(), too_long), "");
}

TEST(InferWireTest, AResponseWrittenWithItsOutputsApartParsesAsTheResponse) {
  const inference::ModelInferResponse want = SampleResponse();
  inference::ModelInferResponse response = want;
  const char* large_at = response.raw_output_contents(0).data();
  const grpc::ByteBuffer wire = SerializeModelInferResponse(&response);
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flat(wire)));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, want));
  // The large output went as it was (its bytes are a slice of the buffer), and the response keeps
  // every other field but no raw contents.
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  bool found = false;
  for (const grpc::Slice& s : slices) found |= reinterpret_cast<const char*>(s.begin()) == large_at;
  EXPECT_TRUE(found);
  EXPECT_EQ(response.raw_output_contents_size(), 0);
  EXPECT_EQ(response.outputs_size(), 4);
  EXPECT_EQ(response.id(), "r7");
  // The small output's string (the second) is kept, cleared, with its capacity: the next use
  // reserves nothing. The large ones left with theirs.
  response.add_raw_output_contents();
  std::string* reused = response.add_raw_output_contents();
  EXPECT_TRUE(reused->empty());
  EXPECT_GE(reused->capacity(), 512u);
}

TEST(InferWireTest, AStreamedAnswerParsesAsTheStreamResponse) {
  for (const std::string& error : {std::string(""), std::string("model 'policy_net': queue full")}) {
    inference::ModelStreamInferResponse want;
    want.set_error_message(error);
    *want.mutable_infer_response() = SampleResponse();
    inference::ModelStreamInferResponse response = want;
    const grpc::ByteBuffer wire = SerializeModelStreamInferResponse(&response);
    inference::ModelStreamInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flat(wire)));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, want)) << error;
  }
}

TEST(InferWireTest, LentOutputsAreSentFromTheLendersBytesUntilTheMessageIsGone) {
  for (const bool streamed : {false, true}) {
    inference::ModelStreamInferResponse want;
    *want.mutable_infer_response() = SampleResponse();
    inference::ModelStreamInferResponse response = want;
    inference::ModelInferResponse* inner = response.mutable_infer_response();
    // The backend lent outputs 0 and 3 (their strings left empty) and wrote 1 and 2 as before.
    auto lender = std::make_shared<std::vector<std::string>>(
        std::vector<std::string>{want.infer_response().raw_output_contents(0),
                                 want.infer_response().raw_output_contents(3)});
    std::weak_ptr<std::vector<std::string>> watch = lender;
    std::vector<LentBytes> lent(4);
    lent[0] = LentBytes{lender, (*lender)[0].data(), (*lender)[0].size()};
    lent[3] = LentBytes{lender, (*lender)[1].data(), (*lender)[1].size()};
    const char* lent_at = (*lender)[1].data();
    inner->mutable_raw_output_contents(0)->clear();
    inner->mutable_raw_output_contents(3)->clear();
    lender.reset();  // the lent entries hold it now
    std::optional<grpc::ByteBuffer> wire = streamed ? SerializeModelStreamInferResponse(&response, &lent)
                                                    : SerializeModelInferResponse(inner, &lent);
    EXPECT_TRUE(lent.empty()) << "the owners went into the message";
    EXPECT_FALSE(watch.expired()) << "the message holds the lent bytes";
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(wire->Dump(&slices).ok());
    bool viewed = false;
    for (const grpc::Slice& slice : slices) viewed |= reinterpret_cast<const char*>(slice.begin()) == lent_at;
    EXPECT_TRUE(viewed) << "sent from where the backend lent them, not copied";
    if (streamed) {
      inference::ModelStreamInferResponse parsed;
      ASSERT_TRUE(parsed.ParseFromString(Flat(*wire)));
      EXPECT_TRUE(MessageDifferencer::Equals(parsed, want));
    } else {
      inference::ModelInferResponse parsed;
      ASSERT_TRUE(parsed.ParseFromString(Flat(*wire)));
      EXPECT_TRUE(MessageDifferencer::Equals(parsed, want.infer_response()));
    }
    slices.clear();
    wire.reset();
    EXPECT_TRUE(watch.expired()) << "released with the message (gRPC has sent it)";
  }
}

}  // namespace
}  // namespace chronoserve::server
