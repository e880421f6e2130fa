// --grpc-unix-socket shared by two servers: a second server on the path of a live one fails its
// start naming the path and leaves the first one serving (gRPC alone would unlink the live socket
// and bind its own); and a server's shutdown removes the socket file only if it is still the one it
// bound, never a socket another server bound at the path since. In-process servers on a model
// written by the test; every RPC has a deadline.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;

using server::SocketInode;

// One inference through `address`, checked against the model's own answer shape; OK or the error.
absl::Status InferOnce(const std::string& address, uint64_t seed) {
  std::mt19937_64 rng(seed);
  client::Tensor input{"INPUT__0", DataType::kFp32, {2, 4, 20, 20},
                       RandomTensorBytes(DataType::kFp32, ElementCount({2, 4, 20, 20}), rng)};
  client::InferOptions options;
  options.timeout = std::chrono::milliseconds(30000);
  auto result = InferenceClient::Connect(address)->Infer("policy_net", {input}, options);
  if (!result.ok()) return result.status();
  if (result->outputs.empty() || result->outputs[0].shape.empty() || result->outputs[0].shape[0] != 2) {
    return absl::InternalError("unexpected outputs");
  }
  return absl::OkStatus();
}

class UnixSocketTakeoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir("cs_unix_takeover");
    examples::ModelOptions policy;
    policy.max_batch_size = 8;
    ASSERT_TRUE(examples::WritePolicyNet(repo_->path(), "policy_net", policy).ok());
  }
  static void TearDownTestSuite() { delete repo_; }

  void SetUp() override { dir_ = std::make_unique<testing::TempDir>("cs_sock"); }

  server::ServerOptions Options() const {
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.unix_socket = dir_->path() + "/chronoserve.sock";
    options.serving_warmup_requests = 0;
    return options;
  }

  static inline testing::TempDir* repo_ = nullptr;
  std::unique_ptr<testing::TempDir> dir_;
};

TEST_F(UnixSocketTakeoverTest, ASecondServerOnALiveSocketFailsItsStartAndTheFirstKeepsServing) {
  const server::ServerOptions options = Options();
  auto first = testing::StartServer(options);
  ASSERT_NE(first, nullptr);
  const auto bound = SocketInode(options.unix_socket);
  ASSERT_TRUE(bound.has_value()) << options.unix_socket;

  auto second = server::Server::Create(options);
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::Status started = (*second)->Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_NE(started.message().find("unix:" + options.unix_socket), std::string::npos) << started.message();
  EXPECT_NE(started.message().find("another server is listening"), std::string::npos) << started.message();
  EXPECT_EQ(SocketInode(options.unix_socket), bound) << "the live socket file was replaced";
  second->reset();  // its shutdown must not remove the first server's socket
  EXPECT_EQ(SocketInode(options.unix_socket), bound) << "the failed server removed the live socket";
  const absl::Status served = InferOnce("unix:" + options.unix_socket, 7);
  EXPECT_TRUE(served.ok()) << "the first server still answers on its socket: " << served;
}

// A bound, listening socket at `path` (what another server leaves there); -1 on failure.
int BindSocket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The shutdown's removal of the socket file, on its own: gRPC's listener close also removes the
// path (by name, as it does before it binds), so only this step can be checked in isolation. It
// matters after gRPC closed the listener: a server started in that window binds the path anew, and
// the first server's last step must not remove that socket.
TEST_F(UnixSocketTakeoverTest, TheSocketFileIsRemovedOnlyIfItIsStillTheOneBound) {
  const std::string path = dir_->path() + "/chronoserve.sock";
  const int ours = BindSocket(path);
  ASSERT_GE(ours, 0);
  const auto bound = server::SocketInode(path);
  ASSERT_TRUE(bound.has_value());
  ASSERT_EQ(unlink(path.c_str()), 0);
  const int theirs = BindSocket(path);  // another server took the path since
  ASSERT_GE(theirs, 0);
  const auto their_inode = server::SocketInode(path);
  ASSERT_TRUE(their_inode.has_value());
  ASSERT_NE(their_inode, bound);

  EXPECT_FALSE(server::RemoveSocketIfSame(path, *bound));
  EXPECT_EQ(server::SocketInode(path), their_inode) << "another server's socket was removed";
  EXPECT_TRUE(server::RemoveSocketIfSame(path, *their_inode)) << "the socket still bound is removed";
  EXPECT_FALSE(server::SocketInode(path).has_value());
  close(ours);
  close(theirs);
}

}  // namespace
}  // namespace chronoserve
