// Outputs lent to the transport (OutputTensor::lend_to): the backend's scatter lends each output's
// host bytes once per batch and every request that can take them views its own rows, which stay
// valid after the batch, its tensors and the path are gone; rows below kMinLentOutputBytes and
// requests without a place are copied as before. Then end to end over real gRPC on the asynchronous
// API: many clients at once, unary and streamed, batched together, every element checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/inference_client.h"
#include "common/clock.h"
#include "common/tensor_data.h"
#include "server/backend/torch_batch_io.h"
#include "server/backend/torch_device_path.h"
#include "server/server.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using client::Tensor;
using server::Batch;
using server::InferRequest;
using server::LentBytes;
using testing::AddSubInputs;

// Two FP32 outputs: 1024 values per item (4 KiB, lent) and 8 per item (32 bytes, copied).
server::ModelSpec TwoOutputSpec() {
  server::ModelSpec spec;
  spec.name = "lend";
  spec.max_batch_size = 16;
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {1024}}, {"OUTPUT__1", DataType::kFp32, {8}}};
  return spec;
}

// A request of `items` whose two outputs go into `response`, with places to lend into when `lent`.
struct Answer {
  std::vector<std::string> contents = std::vector<std::string>(2);
  std::vector<LentBytes> lent = std::vector<LentBytes>(2);
};
std::unique_ptr<InferRequest> RequestFor(int64_t items, Answer* answer, bool may_lend) {
  auto r = std::make_unique<InferRequest>();
  r->batch_items = items;
  for (int k = 0; k < 2; ++k) {
    server::OutputTensor out;
    out.index = k;
    out.data = &answer->contents[k];
    if (may_lend) out.lend_to = &answer->lent[k];
    r->outputs.push_back(std::move(out));
  }
  return r;
}

TEST(LentOutputsTest, EachOutputIsLentOnceAndEveryRequestViewsItsOwnRows) {
  const server::ModelSpec spec = TwoOutputSpec();
  Answer a, b, c;
  Batch batch;
  batch.push_back(RequestFor(2, &a, /*may_lend=*/true));
  batch.push_back(RequestFor(1, &b, /*may_lend=*/false));  // the callback API's request
  batch.push_back(RequestFor(3, &c, /*may_lend=*/true));
  at::manual_seed(3);
  std::vector<torch::Tensor> outputs = {torch::rand({6, 1024}) + 1.0f, torch::rand({6, 8}) + 1.0f};
  const std::vector<std::string> want = {
      std::string(static_cast<const char*>(outputs[0].data_ptr()), outputs[0].nbytes()),
      std::string(static_cast<const char*>(outputs[1].data_ptr()), outputs[1].nbytes())};
  auto path = server::MakeCpuPath(SteadyClock::Get());
  path->SelectSlot(0);
  std::vector<const char*> host;
  for (const torch::Tensor& t : outputs) {
    auto landed = path->ToHost(static_cast<int>(host.size()), t);
    ASSERT_TRUE(landed.ok()) << landed.status();
    host.push_back(*landed);
  }
  EXPECT_TRUE(server::ScatterOutputs(spec, batch, outputs, host, 6, *path, SteadyClock::Get())) << "some lent";
  for (const auto& r : batch) EXPECT_TRUE(r->status.ok()) << r->status;

  const size_t row0 = 1024 * 4, row1 = 8 * 4;
  // Output 0 (4 KiB a row): lent to a and c, one owner for both; b's rows copied.
  ASSERT_NE(a.lent[0].owner, nullptr);
  ASSERT_NE(c.lent[0].owner, nullptr);
  EXPECT_EQ(a.lent[0].owner, c.lent[0].owner) << "lent once for the batch";
  EXPECT_TRUE(a.contents[0].empty());
  EXPECT_TRUE(c.contents[0].empty());
  EXPECT_EQ(b.contents[0], want[0].substr(2 * row0, row0));
  EXPECT_EQ(a.lent[0].data + 3 * row0, c.lent[0].data) << "c's rows follow a's and b's";
  // Output 1 (32 bytes a row): copied for everyone.
  EXPECT_EQ(a.lent[1].owner, nullptr);
  EXPECT_EQ(c.lent[1].owner, nullptr);
  EXPECT_EQ(a.contents[1], want[1].substr(0, 2 * row1));
  EXPECT_EQ(c.contents[1], want[1].substr(3 * row1, 3 * row1));
  EXPECT_THAT(batch[2]->outputs[0].shape, ::testing::ElementsAre(3, 1024));

  // The lent rows outlive the batch, the model's tensors and the path (a response still sending).
  batch.clear();
  outputs.clear();
  path.reset();
  EXPECT_EQ(std::string(a.lent[0].data, a.lent[0].size), want[0].substr(0, 2 * row0));
  EXPECT_EQ(std::string(c.lent[0].data, c.lent[0].size), want[0].substr(3 * row0, 3 * row0));
}

// One request of one item through `path` into `answer`, which may take lent bytes; its output 0's
// bytes. The scatter says whether it lent, and that is whether `answer` holds lent bytes.
std::string ScatterOne(server::DevicePath& path, Answer* answer) {
  Batch batch;
  batch.push_back(RequestFor(1, answer, true));
  std::vector<torch::Tensor> outputs = {torch::rand({1, 1024}) + 1.0f, torch::rand({1, 8}) + 1.0f};
  std::vector<const char*> host;
  for (const torch::Tensor& t : outputs) host.push_back(*path.ToHost(static_cast<int>(host.size()), t));
  const bool lent = server::ScatterOutputs(TwoOutputSpec(), batch, outputs, host, 1, path, SteadyClock::Get());
  EXPECT_EQ(lent, answer->lent[0].owner != nullptr);
  return std::string(static_cast<const char*>(outputs[0].data_ptr()), outputs[0].nbytes());
}

TEST(LentOutputsTest, PastThePathsLendingBoundOutputsAreCopied) {
  auto path = server::MakeCpuPath(SteadyClock::Get());
  path->SelectSlot(0);
  std::vector<Answer> answers(40);  // never sent: their lent buffers stay out
  int lent = 0;
  for (Answer& answer : answers) {
    const std::string want = ScatterOne(*path, &answer);
    if (answer.lent[0].owner != nullptr) {
      ++lent;
      EXPECT_EQ(std::string(answer.lent[0].data, answer.lent[0].size), want);
    } else {
      EXPECT_EQ(answer.contents[0], want) << "copied as before";
    }
  }
  EXPECT_EQ(lent, 32) << "LentBufferPool::Limits' 32 at once";
  for (Answer& answer : answers) answer.lent.clear();  // sent: back in the pool
  Answer after;
  const std::string want = ScatterOne(*path, &after);
  ASSERT_NE(after.lent[0].owner, nullptr) << "lending resumes once buffers come back";
  EXPECT_EQ(std::string(after.lent[0].data, after.lent[0].size), want);
}

TEST(LentOutputsServerTest, ManyClientsAtOnceEachGetTheirOwnOutputs) {
  testing::TempDir repo("cs_lent");
  examples::ModelOptions options;
  options.max_batch_size = 8;
  options.max_queue_delay_us = 200;  // requests of several clients batched together
  ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub", options).ok());
  server::ServerOptions server_options = testing::TestServerOptions(repo.path());
  ASSERT_NE(server_options.grpc_infer_threads, 0) << "the asynchronous API, which lends";
  auto server = testing::StartServer(server_options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());

  constexpr int kClients = 6;
  constexpr int kRequests = 12;
  std::atomic<int> checked{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto c = testing::ConnectTestClient(address);
      // 1 or 2 rows of 1500 values: 6-12 KB per output, lent.
      for (int k = 0; k < kRequests; ++k) {
        const std::vector<Tensor> inputs = AddSubInputs(1 + (k + t) % 2, 1500, 1000 * t + k);
        auto result = c->Infer("addsub", inputs);
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(testing::AddSubMismatch(inputs[0], inputs[1], result->outputs), "") << t << "/" << k;
        ++checked;
      }
      // Streamed: every request written before any answer is read, so answers wait to be written.
      grpc::ClientContext ctx;
      auto stream = c->stub()->ModelStreamInfer(&ctx);
      std::vector<std::vector<Tensor>> sent;
      for (int k = 0; k < kRequests; ++k) {
        sent.push_back(AddSubInputs(1 + k % 2, 1500, 5000 + 1000 * t + k));
        client::InferOptions request_options;
        request_options.id = std::to_string(k);
        ASSERT_TRUE(stream->Write(InferenceClient::BuildRequest("addsub", sent.back(), request_options)));
      }
      stream->WritesDone();
      inference::ModelStreamInferResponse streamed;
      std::vector<bool> answered(sent.size(), false);
      while (stream->Read(&streamed)) {
        ASSERT_EQ(streamed.error_message(), "");
        const size_t k = std::stoul(streamed.infer_response().id());
        ASSERT_LT(k, sent.size());
        answered[k] = true;
        auto decoded = InferenceClient::DecodeResponse(streamed.infer_response());
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        ASSERT_EQ(testing::AddSubMismatch(sent[k][0], sent[k][1], decoded->outputs), "") << t << "/s" << k;
        ++checked;
      }
      EXPECT_TRUE(stream->Finish().ok());
      EXPECT_THAT(answered, ::testing::Each(true));
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(checked.load(), kClients * kRequests * 2);
}

}  // namespace
}  // namespace chronoserve
