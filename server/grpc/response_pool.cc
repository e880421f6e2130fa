#include "server/grpc/response_pool.h"

#include "server/grpc/infer_dispatcher.h"

namespace chronoserve::server {
namespace {

size_t Capacity(const google::protobuf::RepeatedPtrField<std::string>& contents) {
  size_t bytes = 0;
  for (const std::string& c : contents) bytes += c.capacity();
  return bytes;
}

size_t KeptBytes(const inference::ModelInferResponse& response, const inference::ModelInferRequest* request) {
  size_t bytes = Capacity(response.raw_output_contents());
  if (request != nullptr) bytes += Capacity(request->raw_input_contents());
  return bytes;
}

}  // namespace

bool KeepForReuse(const inference::ModelInferResponse& response, const inference::ModelInferRequest* request) {
  return KeptBytes(response, request) <= ResponsePool::kMaxKeptOutputBytes;
}

bool KeepSlotForReuse(const inference::ModelInferResponse& response, const ReceivedInferRequest& request) {
  // The parsed message's typed contents need no count: Clear() deletes each input's `contents`.
  return KeptBytes(response, &request.message) + request.raw.rest.capacity() <= ResponsePool::kMaxKeptOutputBytes;
}

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
  if (response == nullptr || !KeepForReuse(*response)) return;
  ClearKeepingTimingParams(response.get());  // outside the lock
  absl::MutexLock lock(&mu_);
  if (free_.size() < capacity_) free_.push_back(std::move(response));
}

size_t ResponsePool::kept() const {
  absl::MutexLock lock(&mu_);
  return free_.size();
}

}  // namespace chronoserve::server
