// Shared-memory errors over real gRPC (each names the model, the tensor, the region and what was
// expected), and a region unregistered while a request that uses it waits in the queue: the
// request still completes from the old mapping; an object shrunk while its request waits fails that
// request and leaves the server serving. Workers are held by a Gate, never by a sleep.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/shared_memory/mapping_watch.h"
#include "server/shared_memory/region_releaser.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"
#include "tests/server/shm_test_util.h"
#include "tests/server/test_client.h"

namespace chronoserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using client::InferenceClient;
using client::SharedMemoryRef;
using client::Tensor;
using testing::RegisteredShm;

constexpr absl::Duration kWait = absl::Seconds(30);

class SharedMemoryErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(harness_.ok());
    runtime_ = testing::StartGatedModel(testing::GatedSpec("gated", 4, 1000), 1, &gate_);
    ASSERT_NE(runtime_, nullptr);
    harness_.registry().Add(runtime_);
  }
  void TearDown() override { gate_.Release(); }

  InferenceClient& client() { return harness_.client(); }
  std::unique_ptr<RegisteredShm> Shm(const std::string& name, size_t bytes) {
    std::string error;
    auto shm = RegisteredShm::Create(&client(), name, bytes, &error);
    EXPECT_NE(shm, nullptr) << error;
    return shm;
  }
  // INPUT__0 of `items` x 4 floats in region `region` at `offset` (byte size as given).
  static Tensor InShm(int64_t items, const std::string& region, size_t byte_size, size_t offset = 0) {
    Tensor t{"INPUT__0", DataType::kFp32, {items, 4}, ""};
    t.shared_memory = SharedMemoryRef{region, byte_size, offset};
    return t;
  }
  absl::Status Infer(const std::vector<Tensor>& inputs, const client::InferOptions& options = {}) {
    return client().Infer("gated", inputs, options).status();
  }

  // Request B of 2 items whose INPUT__0 is in region `in_name` and whose two outputs go to region
  // `out_name` (32 bytes each), queued behind a full batch A that parks the worker.
  struct QueuedBehindA {
    std::unique_ptr<testing::PendingInfer> a;
    std::unique_ptr<RegisteredShm> in, out;
    Tensor b_in;
    client::InferOptions options;  // B's (id "B")
    std::unique_ptr<testing::PendingInfer> b;
  };
  // Null members on failure (the test has failed then).
  QueuedBehindA QueueBehindAParkedBatch(const std::string& in_name, const std::string& out_name, uint64_t seed) {
    QueuedBehindA q;
    gate_.Arm();
    q.a = std::make_unique<testing::PendingInfer>(client().stub(), "gated", "A", testing::GatedInput(4, seed));
    EXPECT_TRUE(gate_.WaitHeld(kWait));
    q.in = Shm(in_name, 64);
    q.out = Shm(out_name, 64);
    if (q.in == nullptr || q.out == nullptr) return q;
    q.b_in = testing::GatedInput(2, seed + 1);
    q.in->Write(0, q.b_in.data);
    q.options.id = "B";
    q.options.outputs = {"OUTPUT__0", "OUTPUT__1"};
    q.options.output_shared_memory["OUTPUT__0"] = SharedMemoryRef{out_name, 32, 0};
    q.options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{out_name, 32, 32};
    q.b = std::make_unique<testing::PendingInfer>(
        client().stub(), InferenceClient::BuildRequest("gated", {InShm(2, in_name, 32)}, q.options));
    EXPECT_TRUE(runtime_->queue().WaitForSize(1, kWait)) << "B passed its checks and was queued";
    return q;
  }
  // Whether `out` holds the gated model's outputs for `input` (x * 2, then x * 3, 32 bytes each).
  static std::string OutputsMismatch(const Tensor& input, const char* out) {
    for (int k = 0; k < 2; ++k) {
      for (int i = 0; i < 8; ++i) {
        float x, y;
        std::memcpy(&x, input.data.data() + 4 * i, 4);
        std::memcpy(&y, out + 32 * k + 4 * i, 4);
        if (y != x * static_cast<float>(k + 2)) return absl::StrCat("output ", k, " element ", i, ": ", y);
      }
    }
    return "";
  }

  testing::Gate gate_;
  testing::ServiceHarness harness_;
  std::shared_ptr<server::ModelRuntime> runtime_;
};

TEST_F(SharedMemoryErrorsTest, RegistrationErrors) {
  auto shm = Shm("dup", 4096);
  ASSERT_NE(shm, nullptr);
  absl::Status dup = client().RegisterSystemSharedMemory("dup", shm->key(), 16);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("'dup' is already registered"));
  absl::Status missing = client().RegisterSystemSharedMemory("m", "/cs_test_no_such_object", 16);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              AllOf(HasSubstr("'m'"), HasSubstr("/cs_test_no_such_object"), HasSubstr("No such file")));
  absl::Status too_big = client().RegisterSystemSharedMemory("big", shm->key(), 4096, 1);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("exceeds the object's 4096 bytes"));
}

TEST_F(SharedMemoryErrorsTest, BadInputReferences) {
  auto shm = Shm("in", 256);
  ASSERT_NE(shm, nullptr);
  absl::Status unknown = Infer({InShm(2, "nope", 32)});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.message()), AllOf(HasSubstr("model 'gated' input 'INPUT__0'"), HasSubstr("'nope'"),
                                                    HasSubstr("not registered")));
  absl::Status range = Infer({InShm(2, "in", 32, 240)});
  EXPECT_EQ(range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(range.message()), AllOf(HasSubstr("model 'gated' input 'INPUT__0'"), HasSubstr("'in'"),
                                                  HasSubstr("offset 240 + byte_size 32"), HasSubstr("256 bytes")));
  EXPECT_EQ(Infer({InShm(2, "in", 32, 1 << 20)}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status size = Infer({InShm(2, "in", 24)});
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(size.message()), AllOf(HasSubstr("model 'gated' input 'INPUT__0'"), HasSubstr("'in'"),
                                                 HasSubstr("shared_memory_byte_size is 24"), HasSubstr("needs 32")));

  // Shared memory and the bytes in the message too.
  Tensor both = testing::GatedInput(2, 1);
  auto request = InferenceClient::BuildRequest("gated", {both}, {});
  (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("in");
  (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(32);
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::ModelInferResponse response;
  const grpc::Status with_raw = client().stub()->ModelInfer(&ctx, request, &response);
  EXPECT_EQ(with_raw.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(with_raw.error_message(), AllOf(HasSubstr("model 'gated' input 'INPUT__0'"), HasSubstr("'in'"),
                                              HasSubstr("raw_input_contents entry; use one")));
  client::InferOptions typed;
  typed.typed_contents = true;
  auto typed_request = InferenceClient::BuildRequest("gated", {both}, typed);
  (*typed_request.mutable_inputs(0)->mutable_parameters()) = request.inputs(0).parameters();
  grpc::ClientContext ctx2;
  ctx2.set_deadline(testing::TestDeadline());
  const grpc::Status with_typed = client().stub()->ModelInfer(&ctx2, typed_request, &response);
  EXPECT_EQ(with_typed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(with_typed.error_message(), HasSubstr("has typed contents and shared-memory region 'in'"));

  Tensor no_size = InShm(2, "in", 32);
  auto sizeless = InferenceClient::BuildRequest("gated", {no_size}, {});
  sizeless.mutable_inputs(0)->mutable_parameters()->erase("shared_memory_byte_size");
  grpc::ClientContext ctx3;
  ctx3.set_deadline(testing::TestDeadline());
  const grpc::Status missing_size = client().stub()->ModelInfer(&ctx3, sizeless, &response);
  EXPECT_EQ(missing_size.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(missing_size.error_message(), HasSubstr("needs 'shared_memory_byte_size'"));
}

TEST_F(SharedMemoryErrorsTest, OutputRegionTooSmallNamesBytesNeededAndAvailable) {
  auto out = Shm("out", 4096);
  ASSERT_NE(out, nullptr);
  client::InferOptions options;
  options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{"out", 20, 8};
  absl::Status small = Infer({testing::GatedInput(2, 2)}, options);
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(small.message()),
              AllOf(HasSubstr("model 'gated' output 'OUTPUT__1'"), HasSubstr("region 'out' is too small"),
                    HasSubstr("needs 32 bytes"), HasSubstr("20 available")));
  options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{"out", 32, 4090};
  EXPECT_EQ(Infer({testing::GatedInput(2, 2)}, options).code(), absl::StatusCode::kInvalidArgument)
      << "range past the region";
}

// ... and its two regions, whose last holder was B, are unmapped by the releaser's thread, not on the
// worker or completion thread that ended B (both are marked latency-critical).
TEST_F(SharedMemoryErrorsTest, UnregisteredWhileQueuedTheRequestStillCompletes) {
  const int64_t released_before = server::RegionReleaser::Get().released_in_background();
  // Worker parked on a full batch A; B (input and outputs in shared memory) waits in the queue.
  QueuedBehindA q = QueueBehindAParkedBatch("q_in", "q_out", 3);
  ASSERT_TRUE(q.b != nullptr);
  auto& in = q.in;
  auto& out = q.out;

  ASSERT_TRUE(client().UnregisterSystemSharedMemory("q_in").ok());
  ASSERT_TRUE(client().UnregisterSystemSharedMemory("q_out").ok());
  in->ForgetRegistration();
  out->ForgetRegistration();
  EXPECT_EQ(harness_.shared_memory().size(), 0u);
  // The name is free again at once; a new region under it does not redirect B.
  auto other = Shm("q_out", 64);
  ASSERT_NE(other, nullptr);

  gate_.Release();
  const auto a_status = q.a->Wait(kWait);
  ASSERT_TRUE(a_status.has_value() && a_status->ok());
  const auto b_status = q.b->Wait(kWait);
  ASSERT_TRUE(b_status.has_value()) << "B finished";
  ASSERT_TRUE(b_status->ok()) << b_status->error_message();
  EXPECT_EQ(OutputsMismatch(q.b_in, out->data()), "");
  EXPECT_EQ(other->Read(0, 64), std::string(64, '\0')) << "the region registered later was not written";
  EXPECT_TRUE(server::RegionReleaser::Get().WaitReleased(released_before + 2, kWait))
      << "released in the background: " << server::RegionReleaser::Get().released_in_background() - released_before
      << " of B's 2 regions";
}

// A client that shrinks its object after its request was checked on arrival, while the request waits
// for the worker: the worker's write into the missing pages would have killed the server (SIGBUS).
// It lands in pages of the server's own instead; the request fails naming the region, the batch
// before it is answered, later requests naming the region are refused until it is registered
// again, and the input region beside it still serves.
TEST_F(SharedMemoryErrorsTest, ShrunkWhileQueuedTheRequestFailsAndTheServerServesOn) {
  QueuedBehindA q = QueueBehindAParkedBatch("s_in", "s_out", 5);
  ASSERT_TRUE(q.b != nullptr);
  auto& out = q.out;

  const int fd = ::shm_open(out->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, 0), 0) << std::strerror(errno);
  ::close(fd);
  const int64_t faults_before = server::MappingWatch::handled_faults();
  gate_.Release();

  const auto a_status = q.a->Wait(kWait);
  ASSERT_TRUE(a_status.has_value() && a_status->ok()) << "the batch ahead is answered";
  const auto b_status = q.b->Wait(kWait);
  ASSERT_TRUE(b_status.has_value()) << "B finished";
  EXPECT_EQ(b_status->error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(b_status->error_message(),
              AllOf(HasSubstr("shared-memory region 's_out' (key '" + out->key() + "')"),
                    HasSubstr("shrank while a request read or wrote it")));
  EXPECT_THAT(b_status->error_message(),
              ::testing::StartsWith("model 'gated' output 'OUTPUT__0' and output 'OUTPUT__1': shared-memory region"))
      << "names the model and the tensors that used the region";
  EXPECT_GT(server::MappingWatch::handled_faults(), faults_before) << "the worker's write ran into the missing pages";

  client::InferOptions again = q.options;
  again.id = "C";
  absl::Status refused = Infer({InShm(2, "s_in", 32)}, again);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("region 's_out'"));

  // Registered again (a new object under the name): served, from the input region that never shrank.
  ASSERT_TRUE(client().UnregisterSystemSharedMemory("s_out").ok());
  out->ForgetRegistration();
  auto fresh = Shm("s_out", 64);
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(Infer({InShm(2, "s_in", 32)}, again).ok());
  EXPECT_EQ(OutputsMismatch(q.b_in, fresh->data()), "");
}

}  // namespace
}  // namespace chronoserve
