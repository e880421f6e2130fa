#include "server/grpc/shared_memory_params.h"

#include "absl/strings/str_cat.h"
#include "common/text_excerpt.h"

namespace chronoserve::server {
namespace {

absl::Status Invalid(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

// The int64 parameter `key` as a non-negative value; nullopt when absent.
absl::StatusOr<std::optional<uint64_t>> NonNegative(const TensorParams& params, const char* key,
                                                    const std::string& what) {
  auto it = params.find(key);
  if (it == params.end()) return std::optional<uint64_t>();
  if (it->second.parameter_choice_case() != inference::InferParameter::kInt64Param) {
    return Invalid(what, absl::StrCat("parameter '", key, "' must be an int64_param"));
  }
  const int64_t value = it->second.int64_param();
  if (value < 0) return Invalid(what, absl::StrCat("parameter '", key, "' is ", value, ", expected >= 0"));
  return std::optional<uint64_t>(static_cast<uint64_t>(value));
}

}  // namespace

absl::StatusOr<std::optional<SharedMemoryParams>> ParseSharedMemoryParams(const TensorParams& params,
                                                                          const std::string& what) {
  auto offset = NonNegative(params, kShmOffsetParam, what);
  if (!offset.ok()) return offset.status();
  auto byte_size = NonNegative(params, kShmByteSizeParam, what);
  if (!byte_size.ok()) return byte_size.status();
  auto region = params.find(kShmRegionParam);
  if (region == params.end()) {
    if (offset->has_value() || byte_size->has_value()) {
      return Invalid(what, absl::StrCat("'", kShmOffsetParam, "' / '", kShmByteSizeParam,
                                        "' given without '", kShmRegionParam, "'"));
    }
    return std::optional<SharedMemoryParams>();
  }
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return Invalid(what, absl::StrCat("parameter '", kShmRegionParam, "' must be a string_param"));
  }
  if (!byte_size->has_value()) {
    return Invalid(what, absl::StrCat("'", kShmRegionParam, "' needs '", kShmByteSizeParam, "'"));
  }
  SharedMemoryParams out;
  out.region = region->second.string_param();
  out.offset = offset->value_or(0);
  out.byte_size = **byte_size;
  return std::optional<SharedMemoryParams>(std::move(out));
}

absl::StatusOr<SharedMemorySpan> ResolveSharedMemory(const SharedMemoryRegistry* registry,
                                                     const SharedMemoryParams& params,
                                                     const std::string& what) {
  if (registry == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": names shared-memory region '", ClientName(params.region),
        "', but shared memory is disabled on this server (--allow-shared-memory=false)"));
  }
  auto span = registry->Find(params.region, params.offset, params.byte_size);
  if (!span.ok()) return absl::Status(span.status().code(), absl::StrCat(what, ": ", span.status().message()));
  return span;
}

void SetSharedMemoryParams(const SharedMemoryParams& params, TensorParams* out) {
  (*out)[kShmRegionParam].set_string_param(params.region);
  (*out)[kShmOffsetParam].set_int64_param(static_cast<int64_t>(params.offset));
  (*out)[kShmByteSizeParam].set_int64_param(static_cast<int64_t>(params.byte_size));
}

}  // namespace chronoserve::server
