// Test helpers: a temporary model repository written with tools/example_models.h, and an
// in-process Server on 127.0.0.1 (port picked by the OS) that a test talks to over real gRPC.
#ifndef CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
#define CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_

#include <ftw.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/remove_tree.h"
#include "absl/time/time.h"
#include "server/server.h"

namespace chronoserve::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    RemoveTree(path_.string());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { RemoveTree(path_.string()); }
  std::string path() const { return path_.string(); }
  void WriteFile(const std::string& rel, const std::string& text) const {
    auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

 private:
  std::filesystem::path path_;
};

// Copies `from_model`'s model.pt of version `from_version` in `repository` to `to_model`'s version
// `to_version` (its directory made): a model of several versions, or a version of other weights.
inline ::testing::AssertionResult CopyModelVersion(const std::string& repository, const std::string& from_model,
                                                   int from_version, const std::string& to_model, int to_version) {
  const std::filesystem::path root(repository);
  const std::filesystem::path to = root / to_model / std::to_string(to_version);
  std::error_code ec;
  std::filesystem::create_directories(to, ec);
  if (!ec) std::filesystem::copy_file(root / from_model / std::to_string(from_version) / "model.pt", to / "model.pt", ec);
  if (ec) return ::testing::AssertionFailure() << "copying to " << to.string() << ": " << ec.message();
  return ::testing::AssertionSuccess();
}

// Test defaults: port picked by the OS, 10 s exit timeout, `warmup_runs` per batch size.
inline server::ServerOptions TestServerOptions(const std::string& repository, int warmup_runs = 1) {
  server::ServerOptions options;
  options.model_repository = repository;
  options.grpc_port = 0;
  options.exit_timeout_secs = 10;
  options.warmup.runs_per_batch_size = warmup_runs;
  return options;
}

// The name of a test run with every RPC on gRPC's callback API (0) or on N ModelInferQueues
// threads (--grpc-infer-threads N): "CallbackApi" or "AsyncQueuesN".
inline std::string InferApiName(const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? std::string("CallbackApi") : "AsyncQueues" + std::to_string(info.param);
}

// Starts a server with `options`; returns null on error.
inline std::unique_ptr<server::Server> StartServer(const server::ServerOptions& options) {
  auto server = server::Server::Create(options);
  if (!server.ok()) return nullptr;
  if (!(*server)->Start().ok()) return nullptr;
  return *std::move(server);
}

// Starts a server on the repository; returns null (and records a test failure) on error.
inline std::unique_ptr<server::Server> StartServer(const std::string& repository, int warmup_runs = 1) {
  return StartServer(TestServerOptions(repository, warmup_runs));
}

// Server::Shutdown on a thread of its own, for a test that checks what the server does while it
// drains. Destroying it (the test's end, or a failed ASSERT on the way) first runs `before_join`
// (e.g. releases a Gate the drain waits on), then waits at most `join_timeout` for Shutdown to
// return and joins. A Shutdown still running then fails the test: its thread is detached and the
// server leaked (destroying it under a running Shutdown would free what that uses), so a hung drain
// neither hangs the suite nor ends it in std::terminate (a joinable std::thread's destructor).
// Declare it after every object the drain uses, so it is destroyed first.
class BackgroundShutdown {
 public:
  BackgroundShutdown(std::unique_ptr<server::Server>& server, absl::Duration join_timeout,
                     std::function<void()> before_join = nullptr)
      : server_(server),
        join_timeout_(join_timeout),
        before_join_(std::move(before_join)),
        done_(std::make_shared<absl::Notification>()),
        thread_([s = server.get(), done = done_] {
          s->Shutdown();
          done->Notify();
        }) {}
  BackgroundShutdown(const BackgroundShutdown&) = delete;
  BackgroundShutdown& operator=(const BackgroundShutdown&) = delete;
  ~BackgroundShutdown() {
    if (before_join_) before_join_();
    if (done_->WaitForNotificationWithTimeout(gave_up_ ? absl::ZeroDuration() : join_timeout_)) {
      thread_.join();
      return;
    }
    ADD_FAILURE() << "Server::Shutdown did not return within " << join_timeout_
                  << ": its thread is detached and the server leaked";
    thread_.detach();
    (void)server_.release();
  }
  // Whether Shutdown returned within `timeout` (a false answer also ends the destructor's wait).
  bool WaitDone(absl::Duration timeout) {
    const bool done = done_->WaitForNotificationWithTimeout(timeout);
    gave_up_ = !done;
    return done;
  }
  bool done() const { return done_->HasBeenNotified(); }

 private:
  std::unique_ptr<server::Server>& server_;
  const absl::Duration join_timeout_;
  const std::function<void()> before_join_;
  const std::shared_ptr<absl::Notification> done_;  // shared: a detached thread may outlive this
  bool gave_up_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
