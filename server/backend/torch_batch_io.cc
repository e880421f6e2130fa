#include "server/backend/torch_batch_io.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/backend/torch_util.h"

namespace chronoserve::server {

int64_t BatchItems(const Batch& batch) {
  int64_t total = 0;
  for (const auto& r : batch) total += r->batch_items;
  return total;
}

namespace {
constexpr size_t kCacheLine = 64;
constexpr size_t kPrefetchBytes = 512;  // per request and input; the hardware prefetcher does the rest
}  // namespace

void OrderByArena(Batch& batch) {
  if (batch.size() < 2) return;
  for (const auto& r : batch) {
    if (r->inputs.empty() || !r->inputs.front().in_arena) return;
  }
  auto earlier = [](const std::unique_ptr<InferRequest>& a, const std::unique_ptr<InferRequest>& b) {
    return a->inputs.front().data < b->inputs.front().data;
  };
  if (!std::is_sorted(batch.begin(), batch.end(), earlier)) std::sort(batch.begin(), batch.end(), earlier);
}

namespace {

// Input `i` of every request lies back to back in the model's InputArena, in batch order, in memory
// `path` may copy from (or read) as it is.
bool ContiguousInArena(const Batch& batch, size_t i, const DevicePath& path) {
  const InputTensor* prev = nullptr;
  for (const auto& r : batch) {
    const InputTensor& in = r->inputs[i];
    if (!in.in_arena || (path.direct_pinned_io() && !in.host_pinned)) return false;
    if (prev != nullptr && prev->data + prev->byte_size != in.data) return false;
    prev = &in;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<StagedInput>> GatherInputs(const ModelSpec& spec, const Batch& batch, DevicePath& path) {
  std::vector<StagedInput> staged;
  const int64_t total = BatchItems(batch);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    StagedInput in;
    in.shape = batch.front()->inputs[i].shape;
    if (spec.max_batch_size > 0) in.shape[0] = total;
    for (const auto& r : batch) in.bytes += r->inputs[i].byte_size;
    // The receiving threads already put the requests' bytes back to back in the arena: the batch's
    // input is that run as it is. Or one request whose input sits in a page-locked shared-memory
    // region: the H2D reads it in place (only single-request batches: a batch needs contiguous rows).
    const InputTensor& first = batch.front()->inputs[i];
    // A client's GPU memory (CUDA shared memory): the device copies read it where it is (one piece a
    // request); the host must never touch it. The request builder's shape key keeps a batch's
    // requests all on the device or all on the host for each input.
    size_t on_device = 0;
    for (const auto& r : batch) on_device += r->inputs[i].on_device() ? 1 : 0;
    if (on_device > 0 && !path.direct_pinned_io()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "input '", spec.inputs[i].name,
          "' is in CUDA shared memory, but this model instance runs on the CPU; send it in the message "
          "or in system shared memory"));
    }
    if (on_device > 0 && on_device != batch.size()) {
      return absl::InternalError(absl::StrCat("input '", spec.inputs[i].name, "': ",
                                              on_device, " of a batch's ", batch.size(),
                                              " requests have it in CUDA shared memory (all or none must)"));
    }
    if (on_device > 0) {
      in.in_place = true;
      if (batch.size() == 1) {
        in.data = const_cast<char*>(first.data);
        in.pieces.push_back(BytePiece{in.data, in.bytes, first.device_id});
      } else {
        in.pieces.reserve(batch.size());
        for (const auto& r : batch) {
          in.pieces.push_back(BytePiece{r->inputs[i].data, r->inputs[i].byte_size, r->inputs[i].device_id});
        }
      }
      staged.push_back(std::move(in));
      continue;
    }
    if (ContiguousInArena(batch, i, path) ||
        (batch.size() == 1 && first.host_pinned && path.direct_pinned_io())) {
      in.data = const_cast<char*>(first.data);
      in.in_place = true;
      in.pieces.push_back(BytePiece{in.data, in.bytes});
      staged.push_back(std::move(in));
      continue;
    }
    // gRPC's threads wrote these bytes: ask for every request's first lines at once, so the copies
    // below do not take their cache misses one request after another.
    for (const auto& r : batch) {
      for (size_t b = 0; b < std::min(r->inputs[i].byte_size, kPrefetchBytes); b += kCacheLine) {
        __builtin_prefetch(r->inputs[i].data + b);
      }
    }
    absl::StatusOr<char*> staging = path.Staging(static_cast<int>(i), in.bytes);
    if (!staging.ok()) {  // page-locked memory ran out: say for which input and how much
      return absl::Status(staging.status().code(),
                          absl::StrCat("input '", spec.inputs[i].name, "': cannot stage the batch's ", in.bytes,
                                       " bytes (", batch.size(), " requests) for the copy: ",
                                       staging.status().message()));
    }
    in.data = *staging;
    size_t offset = 0;
    for (const auto& r : batch) {
      std::memcpy(in.data + offset, r->inputs[i].data, r->inputs[i].byte_size);
      offset += r->inputs[i].byte_size;
    }
    in.pieces.push_back(BytePiece{in.data, in.bytes});
    staged.push_back(std::move(in));
  }
  return staged;
}

namespace {

// `names` without repeats, in order.
std::vector<std::string> Distinct(std::vector<std::string> names) {
  std::vector<std::string> distinct;
  for (std::string& name : names) {
    if (std::find(distinct.begin(), distinct.end(), name) == distinct.end()) distinct.push_back(std::move(name));
  }
  return distinct;
}

// `distinct` joined with ", ": the first kNamed, then how many more.
std::string NameList(const std::vector<std::string>& distinct) {
  constexpr size_t kNamed = 3;
  if (distinct.size() <= kNamed) return absl::StrJoin(distinct, ", ");
  return absl::StrCat(absl::StrJoin(distinct.begin(), distinct.begin() + kNamed, ", "), " and ",
                      distinct.size() - kNamed, " more");
}

}  // namespace

absl::Status InputCopyError(const ModelSpec& spec, const Batch& batch, int input, size_t bytes,
                            const absl::Status& error) {
  std::vector<std::string> names;
  for (const auto& r : batch) {
    const InputTensor& in = r->inputs[input];
    if (in.shared_memory) names.push_back(absl::StrCat("'", in.region, "'"));
  }
  const std::vector<std::string> regions = Distinct(std::move(names));
  std::string from;
  if (!regions.empty()) {
    from = absl::StrCat(" from shared-memory region", regions.size() > 1 ? "s " : " ", NameList(regions));
  }
  return absl::Status(error.code(), absl::StrCat("input '", spec.inputs[input].name, "' (", bytes,
                                                 " bytes) to the device", from, ": ", error.message()));
}

absl::Status CheckForwardOutputs(const ModelSpec& spec, const std::vector<torch::Tensor>& outputs, int64_t total,
                                 const torch::Device& device) {
  if (outputs.size() != spec.outputs.size()) {
    return absl::InternalError(absl::StrCat("forward() returned ", outputs.size(),
                                            " outputs, config declares ", spec.outputs.size()));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorSpec& want = spec.outputs[k];
    ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(want.dtype));
    if (outputs[k].scalar_type() != type) {
      return absl::InternalError(absl::StrCat("output '", want.name, "': produced ",
                                              c10::toString(outputs[k].scalar_type()), ", config declares ",
                                              DataTypeName(want.dtype)));
    }
    if (spec.max_batch_size > 0 && outputs[k].dim() == 0) {
      return absl::InternalError(absl::StrCat("output '", want.name, "': produced a scalar (a 0-d tensor), expected ",
                                              total, " rows (the batch dim) of ", ShapeString(want.dims)));
    }
    if (spec.max_batch_size > 0 && outputs[k].size(0) != total) {
      return absl::InternalError(absl::StrCat("output '", want.name, "': batch dimension is ", outputs[k].size(0),
                                              ", expected ", total));
    }
    // The dims after the batch dim must be the config's (-1 matches any): the response and
    // ModelMetadata must not disagree, e.g. when two outputs' order differs from the tuple's.
    const int64_t skip = spec.max_batch_size > 0 ? 1 : 0;
    bool dims_match = outputs[k].dim() == skip + static_cast<int64_t>(want.dims.size());
    for (size_t d = 0; dims_match && d < want.dims.size(); ++d) {
      dims_match = want.dims[d] < 0 || outputs[k].size(skip + static_cast<int64_t>(d)) == want.dims[d];
    }
    if (!dims_match) {
      std::vector<int64_t> got(outputs[k].sizes().begin() + std::min<int64_t>(skip, outputs[k].dim()),
                               outputs[k].sizes().end());
      return absl::InternalError(absl::StrCat("output '", want.name, "': produced dims ",
                                              ShapeString(got), spec.max_batch_size > 0 ? " after the batch dim" : "",
                                              ", config declares ", ShapeString(want.dims)));
    }
    if (outputs[k].device() != device) {
      return absl::InternalError(absl::StrCat("output '", want.name, "': produced on ",
                                              outputs[k].device().str(), ", the model runs on ", device.str(),
                                              " (forward() must return its outputs on the model's device)"));
    }
  }
  return absl::OkStatus();
}

const OutputTensor* DirectOutputDestination(const Batch& batch, int k, const torch::Tensor& output,
                                            const DevicePath& path) {
  if (batch.size() != 1 || !path.direct_pinned_io() || !output.is_contiguous()) return nullptr;
  for (const OutputTensor& out : batch.front()->outputs) {
    if (out.index == k && out.data == nullptr && out.raw != nullptr && out.raw_pinned &&
        out.raw_capacity >= output.nbytes()) {
      return &out;
    }
  }
  return nullptr;
}

bool WantedOnHost(const Batch& batch, int k) {
  for (const auto& r : batch) {
    for (const OutputTensor& out : r->outputs) {
      if (out.index == k && !out.raw_on_device()) return true;
    }
  }
  return false;
}

absl::Status CopyOutputsToDevice(const ModelSpec& spec, const Batch& batch, int k, const torch::Tensor& output,
                                 DevicePath& path) {
  int64_t row = 0;
  absl::InlinedVector<RowsTarget, 8> targets;
  absl::InlinedVector<const std::string*, 8> target_names;  // their regions, for an error
  const bool batched = spec.max_batch_size > 0;
  const size_t row_bytes = batched && output.dim() > 0 && output.size(0) > 0 ? output.nbytes() / output.size(0) : 0;
  for (const auto& r : batch) {
    for (OutputTensor& out : r->outputs) {
      if (out.index != k || !out.raw_on_device()) continue;
      const std::string& name = spec.outputs[k].name;
      if (!path.direct_pinned_io()) {
        if (r->status.ok()) {
          r->status = absl::FailedPreconditionError(absl::StrCat(
              spec.Label(), " output '", name, "': ", out.raw_name,
              " is GPU memory, but this model instance runs on the CPU; take the output in the message or in "
              "system shared memory"));
        }
        continue;
      }
      // This request's rows of the batch's output, into its own region (on the worker's stream).
      const size_t bytes = batched ? row_bytes * static_cast<size_t>(r->batch_items) : output.nbytes();
      absl::Status fits = CheckOutputFits(spec, name, bytes, out);
      if (!fits.ok()) {
        if (r->status.ok()) r->status = std::move(fits);
        continue;
      }
      targets.push_back(RowsTarget{batched ? row_bytes * static_cast<size_t>(row) : 0, bytes, out.raw, out.raw_device_id});
      target_names.push_back(&out.raw_name);
    }
    row += r->batch_items;
  }
  if (targets.empty()) return absl::OkStatus();
  absl::Status copied = path.CopyOutsInto(k, output, targets);
  if (copied.ok()) return copied;
  std::vector<std::string> regions;
  for (const std::string* name : target_names) regions.push_back(*name);
  return absl::Status(copied.code(), absl::StrCat("output '", spec.outputs[k].name, "' into ",
                                                  NameList(Distinct(std::move(regions))), ": ", copied.message()));
}

bool ScatterOutputs(const ModelSpec& spec, Batch& batch, const std::vector<torch::Tensor>& outputs,
                    const std::vector<const char*>& host, int64_t total, DevicePath& path, const Clock* clock) {
  // Per output: lent once for the whole batch (asked on the first request that can take it).
  absl::InlinedVector<LentBytes, 4> lent(outputs.size());
  absl::InlinedVector<bool, 4> asked(outputs.size(), false);
  bool any_lent = false;
  int64_t row = 0;
  for (auto& r : batch) {
    for (OutputTensor& out : r->outputs) {
      const torch::Tensor& t = outputs[out.index];
      // Into the vector the request builder sized: no allocation on the worker.
      out.shape.assign(t.sizes().begin(), t.sizes().end());
      size_t bytes = t.nbytes();
      size_t offset = 0;
      if (spec.max_batch_size > 0) {
        const size_t row_bytes = total == 0 ? 0 : t.nbytes() / total;
        out.shape[0] = r->batch_items;
        bytes = row_bytes * r->batch_items;
        offset = row_bytes * row;
      }
      // In GPU memory: copied there on the device at launch (CopyOutputsToDevice), or failed then.
      if (out.raw_on_device()) continue;
      const char* src = host[out.index] + offset;
      if (out.data != nullptr && out.lend_to != nullptr && bytes >= kMinLentOutputBytes) {
        const size_t k = static_cast<size_t>(out.index);
        if (!asked[k]) {
          asked[k] = true;
          lent[k] = path.LendHost(out.index, host[out.index], t.nbytes());
        }
        if (lent[k].owner != nullptr) {
          out.data->clear();
          *out.lend_to = LentBytes{lent[k].owner, lent[k].data + offset, bytes};
          any_lent = true;
          continue;
        }
      }
      // Into the response or a shared-memory region; a region too small fails this request alone.
      absl::Status written = WriteOutputBytes(spec, spec.outputs[out.index].name, src, bytes, out);
      if (!written.ok() && r->status.ok()) r->status = std::move(written);
    }
    row += r->batch_items;
    r->timeline.output_done_ns = clock->NowNs();
  }
  return any_lent;
}

}  // namespace chronoserve::server
