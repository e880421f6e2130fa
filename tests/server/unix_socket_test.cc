// --grpc-unix-socket: the real server listens on TCP and on a Unix domain socket; a client dialling
// unix:PATH gets the same answers and timing, the serving warm-up goes through both listeners, the
// socket file is gone after shutdown, and bad paths fail with an error that names them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

bool IsSocket(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

class UnixSocketTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir("cs_unix_socket");
    examples::ModelOptions policy;
    policy.max_batch_size = 8;
    ASSERT_TRUE(examples::WritePolicyNet(repo_->path(), "policy_net", policy).ok());
  }
  static void TearDownTestSuite() { delete repo_; }

  void SetUp() override { dir_ = std::make_unique<testing::TempDir>("cs_sock"); }

  server::ServerOptions Options(int serving_warmup_requests = 0) const {
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.unix_socket = dir_->path() + "/chronoserve.sock";
    options.serving_warmup_requests = serving_warmup_requests;
    return options;
  }

  static Tensor RandomInput(int items, uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Tensor{"INPUT__0", DataType::kFp32, {items, 4, 20, 20},
                  RandomTensorBytes(DataType::kFp32, ElementCount({items, 4, 20, 20}), rng)};
  }

  static inline testing::TempDir* repo_ = nullptr;
  std::unique_ptr<testing::TempDir> dir_;
};

TEST_F(UnixSocketTest, AnswersLikeTcpAndRemovesTheSocketAtShutdown) {
  const server::ServerOptions options = Options();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(IsSocket(options.unix_socket)) << options.unix_socket;
  auto over_unix = testing::ConnectTestClient("unix:" + options.unix_socket);
  auto over_tcp = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto live = over_unix->ServerLive();
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
  auto ready = over_unix->ModelReady("policy_net");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(*ready);
  const Tensor input = RandomInput(3, 29);
  auto a = over_unix->Infer("policy_net", {input});
  auto b = over_tcp->Infer("policy_net", {input});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->outputs.size(), 3u);
  ASSERT_EQ(a->outputs.size(), b->outputs.size());
  for (size_t k = 0; k < a->outputs.size(); ++k) {
    EXPECT_EQ(a->outputs[k].shape, b->outputs[k].shape) << k;
    EXPECT_EQ(a->outputs[k].data, b->outputs[k].data) << "output " << k << " differs between unix and TCP";
  }
  EXPECT_EQ(testing::OutputsMismatch(repo_->path() + "/policy_net/1/model.pt", {input}, a->outputs), "");
  ASSERT_TRUE(a->timing.has_value()) << "a unix-socket response carries timing.* too";
  EXPECT_EQ(a->timing->batch_size, 3);
  EXPECT_GT(a->timing->compute_ns, 0);
  EXPECT_LE(a->timing->server_total_ns, a->e2e_ns);
  EXPECT_FALSE(a->server_timing.empty());
  // Both listeners count in the same statistics.
  auto stats = over_unix->ModelStatistics("policy_net");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->model_stats(0).inference_stats().success().count(), 2u);
  server.reset();
  EXPECT_FALSE(std::filesystem::exists(options.unix_socket)) << "socket left behind after shutdown";
}

TEST_F(UnixSocketTest, ServingWarmupGoesThroughBothListeners) {
  auto tcp_only = testing::StartServer(testing::TestServerOptions(repo_->path()));
  ASSERT_NE(tcp_only, nullptr);
  const int per_listener = tcp_only->serving_warmup_report().sent;
  tcp_only.reset();
  ASSERT_GT(per_listener, 0);
  server::ServerOptions options = Options(server::ServerOptions{}.serving_warmup_requests);
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->serving_warmup_report().sent, 2 * per_listener);
  EXPECT_EQ(server->serving_warmup_report().failed, 0) << server->serving_warmup_report().first_error;
  auto stats = testing::ConnectTestClient("unix:" + options.unix_socket)->ModelStatistics("policy_net");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->model_stats(0).inference_count(), 0u) << "the warm-up is counted nowhere";
}

TEST_F(UnixSocketTest, AStaleSocketFromAnEarlierRunIsReplaced) {
  const server::ServerOptions options = Options();
  // What a crashed server leaves: a bound socket file nobody listens on.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", options.unix_socket.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  ASSERT_TRUE(IsSocket(options.unix_socket));
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto live = testing::ConnectTestClient("unix:" + options.unix_socket)->ServerLive();
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
}

TEST_F(UnixSocketTest, AFileThatIsNotASocketFailsStartWithThePath) {
  const server::ServerOptions options = Options();
  std::ofstream(options.unix_socket) << "not a socket";
  auto server = server::Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Status started = (*server)->Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_NE(started.message().find("cannot listen on unix:" + options.unix_socket +
                                    ": a file that is not a socket is at that path"),
            std::string::npos)
      << started.message();
  EXPECT_TRUE(std::filesystem::is_regular_file(options.unix_socket)) << "the user's file is not removed";
}

TEST_F(UnixSocketTest, APathTooLongForASocketIsRejectedUpFront) {
  server::ServerOptions options = Options();
  options.unix_socket = dir_->path() + "/" + std::string(sizeof(sockaddr_un{}.sun_path), 's') + ".sock";
  auto server = server::Server::Create(options);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("--grpc-unix-socket"), std::string::npos) << server.status();
  EXPECT_NE(server.status().message().find("at most 107"), std::string::npos) << server.status();
}

}  // namespace
}  // namespace chronoserve
