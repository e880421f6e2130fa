// Test helper: a client-created POSIX shared-memory object registered with a server under a name.
// The destructor unregisters it (when the server still knows it) and the object unmaps and unlinks
// itself, so no test leaves anything in /dev/shm. Owned by one test.
#ifndef CHRONOSERVE_TESTS_SERVER_SHM_TEST_UTIL_H_
#define CHRONOSERVE_TESTS_SERVER_SHM_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "client/system_shared_memory.h"

namespace chronoserve::testing {

// A key no other test or process uses.
inline std::string UniqueShmKey(const std::string& tag) {
  static std::atomic<int> counter{0};
  return absl::StrCat("/cs_test_", getpid(), "_", tag, "_", counter++);
}

class RegisteredShm {
 public:
  // Null (with the reason in `error`) when creating or registering fails.
  static std::unique_ptr<RegisteredShm> Create(client::InferenceClient* client, const std::string& name,
                                               size_t bytes, std::string* error = nullptr) {
    auto shm = client::SystemSharedMemory::Create(UniqueShmKey(name), bytes);
    absl::Status status = shm.ok() ? client->RegisterSystemSharedMemory(name, (*shm)->key(), bytes) : shm.status();
    if (!status.ok()) {
      if (error != nullptr) *error = std::string(status.message());
      return nullptr;
    }
    return std::unique_ptr<RegisteredShm>(new RegisteredShm(client, name, *std::move(shm)));
  }
  ~RegisteredShm() {
    if (registered_) client_->UnregisterSystemSharedMemory(name_).IgnoreError();
  }

  const std::string& name() const { return name_; }
  const std::string& key() const { return shm_->key(); }
  char* data() const { return shm_->data(); }
  size_t byte_size() const { return shm_->byte_size(); }
  void Write(size_t offset, const std::string& bytes) const { std::memcpy(data() + offset, bytes.data(), bytes.size()); }
  std::string Read(size_t offset, size_t bytes) const { return std::string(data() + offset, bytes); }
  // The test unregistered it itself.
  void ForgetRegistration() { registered_ = false; }

 private:
  RegisteredShm(client::InferenceClient* client, std::string name, std::unique_ptr<client::SystemSharedMemory> shm)
      : client_(client), name_(std::move(name)), shm_(std::move(shm)) {}

  client::InferenceClient* const client_;
  const std::string name_;
  std::unique_ptr<client::SystemSharedMemory> shm_;
  bool registered_ = true;
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_SHM_TEST_UTIL_H_
