// InferRequest::Complete: the shared-memory regions a request holds are let go before its answer
// (its completion callback), so that a client freeing its memory once answered never precedes the
// server's release (for a CUDA region, cudaIpcCloseMemHandle must come before the client's
// cudaFree); and a region that lost its backing fails the request naming who used it.
#include "server/core/infer_request.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/core/request_region.h"

namespace chronoserve::server {
namespace {

class FakeRegion final : public RequestRegion {
 public:
  explicit FakeRegion(absl::Status backed) : backed_(std::move(backed)) {}
  absl::Status CheckStillBacked() const override { return backed_; }

 private:
  const absl::Status backed_;
};

TEST(InferRequestCompleteTest, RegionsAreReleasedBeforeTheAnswer) {
  auto region = std::make_shared<FakeRegion>(absl::OkStatus());
  std::weak_ptr<FakeRegion> watched = region;
  auto request = std::make_unique<InferRequest>();
  request->regions.push_back({std::move(region), "model 'm' input 'x'"});
  bool answered = false;
  bool released_before = false;
  absl::Status answered_with = absl::UnknownError("not answered");
  request->on_complete = [&](std::unique_ptr<InferRequest> done) {
    answered = true;
    released_before = watched.expired();
    answered_with = done->status;
  };
  InferRequest::Complete(std::move(request), absl::OkStatus());
  ASSERT_TRUE(answered);
  EXPECT_TRUE(released_before) << "the region must be released before the completion callback runs";
  EXPECT_TRUE(answered_with.ok()) << answered_with;
}

TEST(InferRequestCompleteTest, ARegionThatLostItsBackingFailsTheRequestNamingItsUser) {
  auto request = std::make_unique<InferRequest>();
  request->regions.push_back(
      {std::make_shared<FakeRegion>(absl::InvalidArgumentError("shared-memory region 'r' shrank")),
       "model 'm' output 'y'"});
  absl::Status answered_with;
  request->on_complete = [&](std::unique_ptr<InferRequest> done) { answered_with = done->status; };
  InferRequest::Complete(std::move(request), absl::OkStatus());
  EXPECT_EQ(answered_with.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(answered_with.message(), "model 'm' output 'y': shared-memory region 'r' shrank");
}

}  // namespace
}  // namespace chronoserve::server
