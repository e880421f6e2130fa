#include "client/shm_region.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cuda_shared_memory.h"
#include "client/inference_client.h"
#include "client/region_range.h"
#include "client/system_shared_memory.h"
#include "common/status_macros.h"

namespace chronoserve::client {
namespace {

// Unary calls to the shared-memory RPCs: `call` is the stub's method; the error names what was asked.
template <typename Request, typename Response>
absl::Status Call(grpc::Status (inference::GRPCInferenceService::Stub::*call)(grpc::ClientContext*, const Request&,
                                                                               Response*),
                  inference::GRPCInferenceService::Stub* stub, const Request& request, absl::Time deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  Response response;
  return FromGrpcStatus((stub->*call)(&ctx, request, &response));
}

class SystemRegion final : public ShmRegion {
 public:
  explicit SystemRegion(std::unique_ptr<SystemSharedMemory> shm) : shm_(std::move(shm)) {}
  absl::Status Register(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                        absl::Time deadline) const override {
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_key(shm_->key());
    request.set_byte_size(shm_->byte_size());
    return Call(&inference::GRPCInferenceService::Stub::SystemSharedMemoryRegister, stub, request, deadline);
  }
  absl::Status Unregister(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                          absl::Time deadline) const override {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(name);
    return Call(&inference::GRPCInferenceService::Stub::SystemSharedMemoryUnregister, stub, request, deadline);
  }
  absl::Status Write(size_t offset, const char* src, size_t bytes) const override {
    RETURN_IF_ERROR(CheckRange("a write", offset, bytes));
    std::memcpy(shm_->data() + offset, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Read(size_t offset, size_t bytes, char* dst) const override {
    RETURN_IF_ERROR(CheckRange("a read", offset, bytes));
    std::memcpy(dst, shm_->data() + offset, bytes);
    return absl::OkStatus();
  }
  size_t byte_size() const override { return shm_->byte_size(); }

 private:
  // As a GPU region's: a miscomputed offset is an error, not a write past the mapping.
  absl::Status CheckRange(const char* what, size_t offset, size_t bytes) const {
    if (RegionRangeFits(offset, bytes, shm_->byte_size())) return absl::OkStatus();
    return RegionRangeError(absl::StrCat("system shared memory '", shm_->key(), "'"), what, offset, bytes,
                            shm_->byte_size());
  }

  std::unique_ptr<SystemSharedMemory> shm_;
};

class CudaRegion final : public ShmRegion {
 public:
  explicit CudaRegion(std::unique_ptr<CudaSharedMemory> gpu) : gpu_(std::move(gpu)) {}
  absl::Status Register(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                        absl::Time deadline) const override {
    inference::CudaSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_raw_handle(gpu_->raw_handle());
    request.set_device_id(gpu_->device_id());
    request.set_byte_size(gpu_->byte_size());
    return Call(&inference::GRPCInferenceService::Stub::CudaSharedMemoryRegister, stub, request, deadline);
  }
  absl::Status Unregister(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                          absl::Time deadline) const override {
    inference::CudaSharedMemoryUnregisterRequest request;
    request.set_name(name);
    return Call(&inference::GRPCInferenceService::Stub::CudaSharedMemoryUnregister, stub, request, deadline);
  }
  absl::Status Write(size_t offset, const char* src, size_t bytes) const override {
    return gpu_->Write(offset, src, bytes);
  }
  absl::Status Read(size_t offset, size_t bytes, char* dst) const override { return gpu_->Read(offset, bytes, dst); }
  size_t byte_size() const override { return gpu_->byte_size(); }

 private:
  std::unique_ptr<CudaSharedMemory> gpu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::System(const std::string& key, size_t bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<SystemSharedMemory> shm, SystemSharedMemory::Create(key, bytes));
  return std::unique_ptr<ShmRegion>(new SystemRegion(std::move(shm)));
}

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::Cuda(int device_id, size_t bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaSharedMemory> gpu, CudaSharedMemory::Create(device_id, bytes));
  return std::unique_ptr<ShmRegion>(new CudaRegion(std::move(gpu)));
}

}  // namespace chronoserve::client
