#include "server/grpc/response_pool.h"

#include "server/grpc/infer_dispatcher.h"

namespace chronoserve::server {

std::unique_ptr<inference::ModelInferResponse> ResponsePool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      auto response = std::move(free_.back());
      free_.pop_back();
      return response;
    }
  }
  return std::make_unique<inference::ModelInferResponse>();
}

void ResponsePool::Give(std::unique_ptr<inference::ModelInferResponse> response) {
  if (response == nullptr) return;
  size_t output_bytes = 0;  // Clear() keeps the strings' capacity for reuse
  for (const std::string& contents : response->raw_output_contents()) output_bytes += contents.capacity();
  if (output_bytes > kMaxKeptOutputBytes) return;
  ClearKeepingTimingParams(response.get());  // outside the lock
  absl::MutexLock lock(&mu_);
  if (free_.size() < capacity_) free_.push_back(std::move(response));
}

size_t ResponsePool::kept() const {
  absl::MutexLock lock(&mu_);
  return free_.size();
}

}  // namespace chronoserve::server
