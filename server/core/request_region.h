// RequestRegion: memory outside the server that a request's tensors are read from or written to (a
// client's shared-memory region). The request holds it (InferRequest::regions) until it completes,
// before its answer (InferRequest::Complete), so it stays mapped however the client unregisters it
// meanwhile; Complete asks it then whether its bytes are still the client's, and lets it go.
#ifndef CHRONOSERVE_SERVER_CORE_REQUEST_REGION_H_
#define CHRONOSERVE_SERVER_CORE_REQUEST_REGION_H_

#include "absl/status/status.h"

namespace chronoserve::server {

class RequestRegion {
 public:
  virtual ~RequestRegion() = default;
  // OK while the region still shares the client's memory; otherwise why not, naming the region
  // (a client that shrank its object under the request).
  virtual absl::Status CheckStillBacked() const = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_REQUEST_REGION_H_
