// KeepForReuse (response_pool.h): the one rule by which ResponsePool and a ModelStreamInfer
// stream's spare slots decide whether a message is worth keeping for the next request. Clear()
// keeps the capacity of raw contents strings, so a kept message of a large request would pin its
// buffers for the life of the pool or the stream.
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include <string>

#include "server/grpc/response_pool.h"

namespace chronoserve::server {
namespace {

constexpr size_t kLimit = ResponsePool::kMaxKeptOutputBytes;

inference::ModelInferRequest RequestWithInput(size_t bytes) {
  inference::ModelInferRequest request;
  request.set_id("r");
  request.add_raw_input_contents(std::string(bytes, '\x5'));
  return request;
}

inference::ModelInferResponse ResponseWithOutput(size_t bytes) {
  inference::ModelInferResponse response;
  response.set_id("r");
  response.add_raw_output_contents(std::string(bytes, '\x9'));
  return response;
}

TEST(KeepForReuseTest, KeepsSmallMessagesAndFreesOnesHoldingLargeRawContents) {
  EXPECT_TRUE(KeepForReuse(ResponseWithOutput(256)));
  EXPECT_FALSE(KeepForReuse(ResponseWithOutput(kLimit + 1))) << "the ResponsePool rule";

  const inference::ModelInferRequest small = RequestWithInput(256);
  const inference::ModelInferRequest large = RequestWithInput(kLimit + 1);
  EXPECT_TRUE(KeepForReuse(ResponseWithOutput(256), &small)) << "a stream slot of a small request";
  EXPECT_FALSE(KeepForReuse(ResponseWithOutput(256), &large)) << "a large input pins the slot";
  EXPECT_FALSE(KeepForReuse(ResponseWithOutput(kLimit + 1), &small)) << "a large output pins the slot";
  const inference::ModelInferRequest half = RequestWithInput(kLimit / 2 + 1);
  EXPECT_FALSE(KeepForReuse(ResponseWithOutput(kLimit / 2 + 1), &half)) << "input and output count together";
  EXPECT_TRUE(KeepForReuse(ResponseWithOutput(0), nullptr)) << "no raw contents at all";
}

// The reason for the rule: a slot's request, cleared and read into again (as a stream reuses it),
// still holds the buffer of the largest request it carried, and that is what KeepForReuse sees.
TEST(KeepForReuseTest, AClearedMessageReadAgainKeepsItsLargeBuffer) {
  std::string large_wire;
  ASSERT_TRUE(RequestWithInput(4 * kLimit).SerializeToString(&large_wire));
  std::string small_wire;
  ASSERT_TRUE(RequestWithInput(64).SerializeToString(&small_wire));

  inference::ModelInferRequest slot;
  ASSERT_TRUE(slot.ParseFromString(large_wire));
  EXPECT_FALSE(KeepForReuse(inference::ModelInferResponse(), &slot));
  slot.Clear();
  ASSERT_TRUE(slot.ParseFromString(small_wire));
  ASSERT_EQ(slot.raw_input_contents(0).size(), 64u);
  EXPECT_GE(slot.raw_input_contents(0).capacity(), 4 * kLimit) << "Clear() kept the large buffer";
  EXPECT_FALSE(KeepForReuse(inference::ModelInferResponse(), &slot)) << "so the slot is freed, not kept";
}

// A request whose tensors are in typed contents, read as the asynchronous API reads a stream's
// messages: its fields other than raw_input_contents land in one string that Clear() keeps, so a
// slot that carried a large one is freed, as one that carried large raw contents is.
grpc::ByteBuffer WireOf(const inference::ModelInferRequest& request) {
  std::string bytes;
  EXPECT_TRUE(request.SerializeToString(&bytes));
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(KeepForReuseTest, AStreamSlotThatReadALargeTypedRequestIsFreed) {
  inference::ModelInferRequest typed;
  typed.set_model_name("m");
  auto* input = typed.add_inputs();
  input->set_name("INPUT__0");
  input->set_datatype("FP32");
  const int floats = static_cast<int>(kLimit);  // 4 × kLimit bytes
  input->add_shape(floats);
  for (int i = 0; i < floats; ++i) input->mutable_contents()->add_fp32_contents(0.25f * (i % 7) + 1.0f);
  inference::ModelInferRequest small = RequestWithInput(64);

  ReceivedInferRequest fresh;
  ASSERT_TRUE(ParseModelInferRequest(WireOf(small), &fresh).ok());
  EXPECT_TRUE(KeepSlotForReuse(ResponseWithOutput(256), fresh)) << "a small request's slot is kept";

  ReceivedInferRequest slot;
  ASSERT_TRUE(ParseModelInferRequest(WireOf(typed), &slot).ok());
  ASSERT_EQ(slot.message.inputs(0).contents().fp32_contents_size(), floats);
  EXPECT_TRUE(KeepForReuse(ResponseWithOutput(256), &slot.message)) << "no raw contents: the old rule kept it";
  EXPECT_FALSE(KeepSlotForReuse(ResponseWithOutput(256), slot)) << "its wire form holds 4 x the limit";
  slot.Clear();
  ASSERT_TRUE(ParseModelInferRequest(WireOf(small), &slot).ok());
  EXPECT_GE(slot.raw.rest.capacity(), 4 * kLimit) << "Clear() kept the large wire form";
  EXPECT_FALSE(KeepSlotForReuse(ResponseWithOutput(256), slot)) << "so the slot is freed, not kept";
}

}  // namespace
}  // namespace chronoserve::server
