// ShmSlotPool: one load worker's shared-memory slots (--shared-memory system or cuda). A slot is one
// request in flight: an input region and an output region, both created by this process (POSIX
// shared memory, client/system_shared_memory.h, or GPU memory, client/cuda_shared_memory.h, as the
// layout's kind says) and registered with the server, and the ModelInferRequest that refers to
// them. The worker copies each request's input bytes into its slot before sending and the outputs
// back out after the response, inside the timed end-to-end interval, so a run with shared memory is
// compared honestly with one without (for CUDA regions those copies cross PCIe: host to device and
// back, as a client whose tensors start and end on the host would). Created, grown and unregistered
// on the thread that owns the worker's lifecycle or on the worker thread; never shared between threads.
//
//   ShmSlotPool pool(stub, &request, &layout, "chronobench_123_7");
//   RETURN_IF_ERROR(pool.Grow(in_flight));          // registers 2 regions per slot
//   ShmSlot* slot = pool.Acquire();  RETURN_IF_ERROR(pool.CopyIn(*slot));  send slot->request ...
//   on the response: RETURN_IF_ERROR(pool.CopyOut(*slot, response));  pool.Release(slot);
//   pool.UnregisterAll();                            // when the worker stopped (10 s for all at most)
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_SHM_SLOT_POOL_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_SHM_SLOT_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/chronobench/bench_options.h"
#include "client/shm_region.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

// Where one request's tensors lie in a slot's two regions, and what memory the regions are.
struct ShmLayout {
  SharedMemoryKind kind = SharedMemoryKind::kSystem;  // kSystem or kCuda
  int cuda_device = 0;                                 // kCuda: the GPU the regions are on
  bool preload = false;  // inputs written when a slot is made; CopyIn and CopyOut then copy nothing
  struct Entry {
    std::string name;
    size_t offset = 0;
    size_t bytes = 0;         // inputs: exact size; outputs: capacity
    size_t element_bytes = 0;  // outputs: bytes per element (copy-out size from the response shape)
  };
  std::vector<Entry> inputs;
  std::vector<Entry> outputs;
  size_t input_bytes = 0;
  size_t output_bytes = 0;
};

// The layout for `request` (one raw_input_contents entry per input) and every output of the model.
// Each output gets `output_byte_size` bytes, or (when 0) what its shape needs at `batch_size`;
// INVALID_ARGUMENT when an output has variable dims and no size was given.
absl::StatusOr<ShmLayout> PlanShmLayout(const inference::ModelInferRequest& request,
                                        const inference::ModelMetadataResponse& metadata, int64_t batch_size,
                                        bool batched, int64_t output_byte_size);

// A new region of `layout`'s kind, `bytes` long; `key` names a POSIX object (system only).
absl::StatusOr<std::unique_ptr<ShmRegion>> MakeShmRegion(const ShmLayout& layout, const std::string& key,
                                                         size_t bytes);

struct ShmSlot {
  std::unique_ptr<ShmRegion> input;
  std::unique_ptr<ShmRegion> output;
  std::string input_name;
  std::string output_name;
  bool registered = false;
  inference::ModelInferRequest request;  // its tensors refer to the two regions
  std::string outputs;                   // where the outputs are copied back to (layout.output_bytes)
};

class ShmSlotPool {
 public:
  // `raw` (the request with its bytes in raw_input_contents) and `layout` must outlive the pool;
  // `tag` makes region names and keys unique on the machine.
  ShmSlotPool(inference::GRPCInferenceService::Stub* stub, const inference::ModelInferRequest* raw,
              const ShmLayout* layout, std::string tag);
  ~ShmSlotPool();  // unregisters what is still registered (best effort)
  ShmSlotPool(const ShmSlotPool&) = delete;
  ShmSlotPool& operator=(const ShmSlotPool&) = delete;

  // Creates and registers `count` more slots; the server's message on failure.
  absl::Status Grow(int count);
  // A free slot, or null when every slot is in flight.
  ShmSlot* Acquire();
  void Release(ShmSlot* slot) { free_.push_back(slot); }
  bool HasFree() const { return !free_.empty(); }
  int size() const { return static_cast<int>(slots_.size()); }
  // The request's input bytes into the slot's input region (an error only from a CUDA copy).
  // Nothing when the layout preloads (Grow wrote them).
  absl::Status CopyIn(ShmSlot& slot) const;
  // Each output the response describes, out of the slot's output region into slot.outputs; nothing
  // when the layout preloads.
  absl::Status CopyOut(
      ShmSlot& slot,
      const google::protobuf::RepeatedPtrField<inference::ModelInferResponse::InferOutputTensor>& outputs) const;
  // How long UnregisterAll() may take, all calls together.
  static constexpr absl::Duration kUnregisterTimeout = absl::Seconds(10);

  // Unregisters every slot's regions, every call within `deadline` (one for all, however many
  // slots). Stops at the first call that timed out or found the server unavailable: then the error
  // says how many regions were left registered on the server. Each slot is tried once; the objects
  // are unlinked here when the pool goes, whether or not the server let go of them.
  absl::Status UnregisterAll(absl::Time deadline);
  absl::Status UnregisterAll() { return UnregisterAll(absl::Now() + kUnregisterTimeout); }

 private:
  absl::Status Register(const std::string& name, const ShmRegion& region);
  absl::Status WriteInputs(ShmSlot& slot) const;

  inference::GRPCInferenceService::Stub* const stub_;
  const inference::ModelInferRequest* const raw_;
  const ShmLayout* const layout_;
  const std::string tag_;
  std::vector<std::unique_ptr<ShmSlot>> slots_;
  std::vector<ShmSlot*> free_;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_SHM_SLOT_POOL_H_
