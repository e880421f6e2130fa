// Outputs sent from the page-locked landing buffer they were copied into (DevicePath::LendHost): a
// lent buffer keeps its bytes while the slot lands its next batches elsewhere, comes back to the
// slot once released, and only the slot's own landing buffer is lent. Then served: answers piled up
// on streams (more lent at once than the path's bound, so some are copied), with CUDA graphs and
// eager, every element exactly the model's (x * 2 is exact in FP32).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_device_path.h"
#include "tests/gpu/doubler_model.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"

namespace chronoserve {
namespace {

using server::LentBytes;

// `tensor` (on the GPU) through slot 0's output 0 of `path`: copied, waited for.
const char* Land(server::DevicePath& path, const torch::Tensor& tensor) {
  auto landed = path.ToHost(0, tensor);
  EXPECT_TRUE(landed.ok()) << landed.status();
  EXPECT_TRUE(path.Mark(server::kAfterD2H).ok());
  EXPECT_TRUE(path.Wait().ok());
  return landed.ok() ? *landed : nullptr;
}

std::string HostBytes(const torch::Tensor& tensor) {
  torch::Tensor cpu = tensor.cpu().contiguous();
  return std::string(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
}

TEST(LentOutputGpuTest, TheLandingBufferIsLentAndTheSlotLandsItsNextBatchesElsewhere) {
  auto path = server::MakeCudaPath(0);
  ASSERT_TRUE(path.ok()) << path.status();
  server::DevicePath& p = **path;
  p.SelectSlot(0);
  auto on_stream = p.Enter();
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, 0);
  const torch::Tensor first = torch::rand({128, 400}, options) + 1.0f;
  const char* landed = Land(p, first);
  ASSERT_NE(landed, nullptr);
  EXPECT_EQ(p.LendHost(0, landed + 4, first.nbytes() - 4).owner, nullptr) << "only the landing buffer itself";
  LentBytes lent = p.LendHost(0, landed, first.nbytes());
  ASSERT_NE(lent.owner, nullptr);
  EXPECT_EQ(lent.data, landed) << "sent from where it landed: no copy";
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, lent.data), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeHost) << "page-locked";

  // The next batch on the same slot lands in another buffer; the lent bytes stay as they were.
  const torch::Tensor second = torch::rand({128, 400}, options) + 2.0f;
  const char* landed_again = Land(p, second);
  ASSERT_NE(landed_again, nullptr);
  EXPECT_NE(landed_again, lent.data);
  EXPECT_EQ(std::string(lent.data, lent.size), HostBytes(first));
  EXPECT_EQ(std::string(landed_again, second.nbytes()), HostBytes(second));
  LentBytes lent_again = p.LendHost(0, landed_again, second.nbytes());
  ASSERT_NE(lent_again.owner, nullptr);

  // Once the first response is sent, the slot lands in its buffer again.
  const char* first_buffer = lent.data;
  lent = LentBytes();
  const torch::Tensor third = torch::rand({64, 400}, options) + 3.0f;
  const char* landed_third = Land(p, third);
  EXPECT_EQ(landed_third, first_buffer) << "back from the pool";
  EXPECT_EQ(std::string(landed_third, third.nbytes()), HostBytes(third));
  EXPECT_EQ(std::string(lent_again.data, lent_again.size), HostBytes(second));

  // The path may go before a response it lent to (the pool waits for the last one).
  on_stream.reset();
  path->reset();
  EXPECT_EQ(std::string(lent_again.data, lent_again.size), HostBytes(second));
  lent_again = LentBytes();
}

// The doubler (doubler_model.h) at up to 64 rows, served by its name.
std::string WriteDoubler(const testing::TempDir& repo, bool graphs) {
  return std::filesystem::path(testing::WriteDoubler(repo, graphs, 64)).filename().string();
}

// Answers that pile up: each client writes all its requests on a stream before reading any answer,
// so many responses wait to be written at once, holding landing buffers (beyond the path's bound of
// 32, the rest are copied). Every element must be exactly twice its input.
TEST(LentOutputGpuTest, AnswersPiledUpOnStreamsAreExact) {
  testing::TempDir repo("cs_gpu_lent");
  const std::vector<std::string> models = {WriteDoubler(repo, true), WriteDoubler(repo, false)};
  auto server = testing::StartServer(testing::TestServerOptions(repo.path()));
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  constexpr int kClients = 4;
  constexpr int kRequests = 40;
  std::vector<std::string> failures(kClients);
  std::vector<int> answered(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const std::string& model = models[c % models.size()];
      auto client = testing::ConnectTestClient(address);
      std::mt19937_64 rng(300 + c);
      grpc::ClientContext ctx;
      auto stream = client->stub()->ModelStreamInfer(&ctx);
      std::vector<client::Tensor> sent;
      for (int i = 0; i < kRequests; ++i) {
        const int rows = 1 + (c * 7 + i * 5) % 48;
        sent.push_back({"INPUT__0", DataType::kFp32, {rows, 1024}, RandomTensorBytes(DataType::kFp32, rows * 1024, rng)});
        client::InferOptions options;
        options.id = std::to_string(i);
        if (!stream->Write(client::InferenceClient::BuildRequest(model, {sent.back()}, options))) {
          failures[c] = "write " + std::to_string(i);
          return;
        }
      }
      stream->WritesDone();
      inference::ModelStreamInferResponse response;
      while (stream->Read(&response)) {
        if (!response.error_message().empty()) {
          failures[c] = response.error_message();
          break;
        }
        const size_t i = std::stoul(response.infer_response().id());
        auto decoded = client::InferenceClient::DecodeResponse(response.infer_response());
        if (!decoded.ok() || decoded->outputs.size() != 1 || i >= sent.size()) {
          failures[c] = "answer " + std::to_string(i) + " does not decode";
          break;
        }
        const std::string& in = sent[i].data;
        const std::string& out = decoded->outputs[0].data;
        if (out.size() != in.size()) {
          failures[c] = "answer " + std::to_string(i) + ": " + std::to_string(out.size()) + " bytes";
          break;
        }
        for (size_t j = 0; j < in.size(); j += 4) {
          float x, y;
          std::memcpy(&x, in.data() + j, 4);
          std::memcpy(&y, out.data() + j, 4);
          if (y != 2.0f * x) {
            failures[c] = "answer " + std::to_string(i) + " element " + std::to_string(j / 4) + ": " +
                          std::to_string(y) + " for " + std::to_string(x);
            break;
          }
        }
        if (!failures[c].empty()) break;
        ++answered[c];
      }
      const grpc::Status finished = stream->Finish();
      if (failures[c].empty() && !finished.ok()) failures[c] = finished.error_message();
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(failures[c], "") << "client " << c;
    EXPECT_EQ(answered[c], kRequests) << "client " << c;
  }
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
