// Test helpers: a temporary model repository written with tools/example_models.h, and an
// in-process Server on 127.0.0.1 (port picked by the OS) that a test talks to over real gRPC.
#ifndef CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
#define CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "server/server.h"

namespace chronoserve::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  void WriteFile(const std::string& rel, const std::string& text) const {
    auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

 private:
  std::filesystem::path path_;
};

// Starts a server on the repository; returns null (and records a test failure) on error.
inline std::unique_ptr<server::Server> StartServer(const std::string& repository, int warmup_runs = 1) {
  server::ServerOptions options;
  options.model_repository = repository;
  options.grpc_port = 0;
  options.exit_timeout_secs = 10;
  options.warmup.runs_per_batch_size = warmup_runs;
  auto server = server::Server::Create(options);
  if (!server.ok()) return nullptr;
  if (!(*server)->Start().ok()) return nullptr;
  return *std::move(server);
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
