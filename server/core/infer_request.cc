#include "server/core/infer_request.h"

namespace chronoserve::server {

void InferRequest::Complete(std::unique_ptr<InferRequest> request, absl::Status status) {
  request->status = std::move(status);
  Completion done = std::move(request->on_complete);
  request->on_complete = nullptr;
  if (done) done(std::move(request));
}

}  // namespace chronoserve::server
