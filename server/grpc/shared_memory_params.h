// The shared-memory parameters of a KServe v2 tensor (Triton's system_shared_memory extension):
// shared_memory_region (string), shared_memory_byte_size (int64), shared_memory_offset (int64,
// optional, default 0); and their resolution against the server's SharedMemoryRegistry. Pure
// functions; any thread.
#ifndef CHRONOSERVE_SERVER_GRPC_SHARED_MEMORY_PARAMS_H_
#define CHRONOSERVE_SERVER_GRPC_SHARED_MEMORY_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/inference.pb.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

inline constexpr char kShmRegionParam[] = "shared_memory_region";
inline constexpr char kShmOffsetParam[] = "shared_memory_offset";
inline constexpr char kShmByteSizeParam[] = "shared_memory_byte_size";

struct SharedMemoryParams {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

using TensorParams = google::protobuf::Map<std::string, inference::InferParameter>;

// nullopt when `params` name no region. INVALID_ARGUMENT, prefixed with `what` (e.g. "model 'm'
// input 'x'"), for a wrong parameter type, a region without a byte size, an offset or byte size
// without a region, or a negative value.
absl::StatusOr<std::optional<SharedMemoryParams>> ParseSharedMemoryParams(const TensorParams& params,
                                                                          const std::string& what);

// The bytes `params` name. FAILED_PRECONDITION when `registry` is null (shared memory disabled);
// the registry's NOT_FOUND / INVALID_ARGUMENT otherwise; every message prefixed with `what`.
absl::StatusOr<SharedMemorySpan> ResolveSharedMemory(const SharedMemoryRegistry* registry,
                                                     const SharedMemoryParams& params,
                                                     const std::string& what);

// Writes the three parameters (as the request gave them) into `out`, as Triton's clients read them.
void SetSharedMemoryParams(const SharedMemoryParams& params, TensorParams* out);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_SHARED_MEMORY_PARAMS_H_
