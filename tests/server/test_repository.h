// Test helpers: a temporary model repository written with tools/example_models.h, and an
// in-process Server on 127.0.0.1 (port picked by the OS) that a test talks to over real gRPC.
#ifndef CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
#define CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_

#include <ftw.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/server.h"

namespace chronoserve::testing {

// Removes a directory tree with POSIX nftw. Not std::filesystem::remove_all: PyTorch's pip
// LibTorch exports its own copy of that symbol, and calling it crashed the GPU tests.
inline void RemoveTree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

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

// Test defaults: port picked by the OS, 10 s exit timeout, `warmup_runs` per batch size.
inline server::ServerOptions TestServerOptions(const std::string& repository, int warmup_runs = 1) {
  server::ServerOptions options;
  options.model_repository = repository;
  options.grpc_port = 0;
  options.exit_timeout_secs = 10;
  options.warmup.runs_per_batch_size = warmup_runs;
  return options;
}

// The name of a test run with ModelInfer and ModelStreamInfer on gRPC's callback API (0) or on N
// ModelInferQueues threads (--grpc-infer-threads N): "CallbackApi" or "AsyncQueuesN".
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

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TEST_REPOSITORY_H_
