#include "client/chronobench/shm_slot_pool.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "common/dtype.h"
#include "common/status_macros.h"

namespace chronoserve::client::bench {
namespace {

constexpr size_t kAlign = 64;  // each tensor starts on a cache line
constexpr auto kRpcTimeout = std::chrono::seconds(10);

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void SetParams(const std::string& region, size_t offset, size_t bytes,
               google::protobuf::Map<std::string, inference::InferParameter>* params) {
  (*params)["shared_memory_region"].set_string_param(region);
  (*params)["shared_memory_offset"].set_int64_param(static_cast<int64_t>(offset));
  (*params)["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(bytes));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmRegion>> MakeShmRegion(const ShmLayout& layout, const std::string& key,
                                                         size_t bytes) {
  if (layout.kind == SharedMemoryKind::kCuda) return ShmRegion::Cuda(layout.cuda_device, bytes);
  return ShmRegion::System(key, bytes);
}

absl::StatusOr<ShmLayout> PlanShmLayout(const inference::ModelInferRequest& request,
                                        const inference::ModelMetadataResponse& metadata, int64_t batch_size,
                                        bool batched, int64_t output_byte_size) {
  ShmLayout layout;
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InternalError("shared memory needs the request's inputs as raw contents");
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    const size_t bytes = request.raw_input_contents(i).size();
    layout.inputs.push_back({request.inputs(i).name(), layout.input_bytes, bytes, 0});
    layout.input_bytes = AlignUp(layout.input_bytes + bytes);
  }
  for (const auto& out : metadata.outputs()) {
    ASSIGN_OR_RETURN(DataType dtype, DataTypeFromName(out.datatype()));
    size_t bytes = static_cast<size_t>(output_byte_size);
    if (bytes == 0) {
      std::vector<int64_t> shape(out.shape().begin(), out.shape().end());
      if (batched && !shape.empty()) shape[0] = batch_size;
      if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output '", out.name(), "' has variable dims ", ShapeString(shape),
            ": give --output-shared-memory-size BYTES (per output tensor)"));
      }
      bytes = static_cast<size_t>(ElementCount(shape)) * DataTypeByteSize(dtype);
    }
    layout.outputs.push_back({out.name(), layout.output_bytes, bytes, DataTypeByteSize(dtype)});
    layout.output_bytes = AlignUp(layout.output_bytes + bytes);
  }
  layout.input_bytes = std::max<size_t>(layout.input_bytes, 1);
  layout.output_bytes = std::max<size_t>(layout.output_bytes, 1);
  return layout;
}

ShmSlotPool::ShmSlotPool(inference::GRPCInferenceService::Stub* stub, const inference::ModelInferRequest* raw,
                         const ShmLayout* layout, std::string tag)
    : stub_(stub), raw_(raw), layout_(layout), tag_(std::move(tag)) {}

ShmSlotPool::~ShmSlotPool() { UnregisterAll().IgnoreError(); }

absl::Status ShmSlotPool::Register(const std::string& name, const ShmRegion& region) {
  absl::Status status = region.Register(stub_, name, absl::Now() + absl::FromChrono(kRpcTimeout));
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("registering ", SharedMemoryKindName(layout_->kind), " shared-memory region '", name,
                                   "' (", region.byte_size(), " bytes): ", status.message()));
}

absl::Status ShmSlotPool::Grow(int count) {
  for (int n = 0; n < count; ++n) {
    auto slot = std::make_unique<ShmSlot>();
    const std::string base = absl::StrCat(tag_, "_", slots_.size());
    slot->input_name = base + "_in";
    slot->output_name = base + "_out";
    ASSIGN_OR_RETURN(slot->input, MakeShmRegion(*layout_, "/" + slot->input_name, layout_->input_bytes));
    ASSIGN_OR_RETURN(slot->output, MakeShmRegion(*layout_, "/" + slot->output_name, layout_->output_bytes));
    RETURN_IF_ERROR(Register(slot->input_name, *slot->input));
    slot->registered = true;  // from here on UnregisterAll() cleans up, even if the next call fails
    slots_.push_back(std::move(slot));
    ShmSlot& s = *slots_.back();
    RETURN_IF_ERROR(Register(s.output_name, *s.output));
    // The same request, with every tensor referring to this slot's regions instead of the message.
    s.request = *raw_;
    s.request.clear_raw_input_contents();
    s.request.clear_outputs();
    for (int i = 0; i < s.request.inputs_size(); ++i) {
      const ShmLayout::Entry& e = layout_->inputs[i];
      SetParams(s.input_name, e.offset, e.bytes, s.request.mutable_inputs(i)->mutable_parameters());
    }
    for (const ShmLayout::Entry& e : layout_->outputs) {
      auto* out = s.request.add_outputs();
      out->set_name(e.name);
      SetParams(s.output_name, e.offset, e.bytes, out->mutable_parameters());
    }
    s.outputs.assign(layout_->output_bytes, '\0');
    if (layout_->preload) RETURN_IF_ERROR(WriteInputs(s));
    free_.push_back(&s);
  }
  return absl::OkStatus();
}

ShmSlot* ShmSlotPool::Acquire() {
  if (free_.empty()) return nullptr;
  ShmSlot* slot = free_.back();
  free_.pop_back();
  return slot;
}

absl::Status ShmSlotPool::CopyIn(ShmSlot& slot) const {
  return layout_->preload ? absl::OkStatus() : WriteInputs(slot);
}

absl::Status ShmSlotPool::WriteInputs(ShmSlot& slot) const {
  for (size_t i = 0; i < layout_->inputs.size(); ++i) {
    const ShmLayout::Entry& e = layout_->inputs[i];
    RETURN_IF_ERROR(slot.input->Write(e.offset, raw_->raw_input_contents(static_cast<int>(i)).data(), e.bytes));
  }
  return absl::OkStatus();
}

absl::Status ShmSlotPool::CopyOut(
    ShmSlot& slot, const google::protobuf::RepeatedPtrField<inference::ModelInferResponse::InferOutputTensor>& outputs) const {
  if (layout_->preload) return absl::OkStatus();
  for (const auto& out : outputs) {
    for (const ShmLayout::Entry& e : layout_->outputs) {
      if (e.name != out.name()) continue;
      int64_t elements = 1;
      for (int64_t d : out.shape()) elements *= d;
      const size_t bytes = std::min(e.bytes, static_cast<size_t>(elements) * e.element_bytes);
      RETURN_IF_ERROR(slot.output->Read(e.offset, bytes, slot.outputs.data() + e.offset));
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status ShmSlotPool::UnregisterAll(absl::Time deadline) {
  absl::Status first;
  absl::Status gave_up;  // the call that timed out or found no server: the rest would only wait too
  int tried = 0;
  int left = 0;  // regions still registered on the server once it gave up
  for (auto& slot : slots_) {
    if (!slot->registered) continue;
    slot->registered = false;  // tried once: the destructor must not wait for it again
    const std::pair<const std::string*, const ShmRegion*> regions[] = {{&slot->input_name, slot->input.get()},
                                                                        {&slot->output_name, slot->output.get()}};
    for (const auto& [name, region] : regions) {
      ++tried;
      if (!gave_up.ok()) {
        ++left;
        continue;
      }
      absl::Status s = region->Unregister(stub_, *name, deadline);
      if (s.ok()) continue;
      if (first.ok()) first = s;
      if (absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) {
        gave_up = s;
        ++left;
      }
    }
  }
  if (gave_up.ok()) return first;
  return absl::Status(gave_up.code(), absl::StrCat(
      "gave up unregistering shared memory after '", gave_up.message(), "': ", left, " of ", tried, " regions (",
      tag_, "_*) are left registered on the server; their memory is released all the same (POSIX objects "
      "unlinked here, GPU memory freed), when the pool goes"));
}

}  // namespace chronoserve::client::bench
