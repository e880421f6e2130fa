#include "server/grpc/request_builder.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/text_excerpt.h"
#include "common/typed_contents.h"
#include "server/grpc/shared_memory_params.h"

namespace chronoserve::server {
namespace {

using InputProto = inference::ModelInferRequest::InferInputTensor;

absl::Status Invalid(const ModelSpec& spec, const std::string& tensor, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(spec.Label(), " input '", ClientName(tensor), "': ", what));
}

// The largest tensor accepted, in bytes: byte counts travel as int64 (shared_memory_byte_size,
// LibTorch's sizes); ByteCount refuses more.
constexpr int64_t kMaxTensorBytes = std::numeric_limits<int64_t>::max();

// "A, B, C" for the model's inputs or outputs, in messages.
std::string TensorNames(const std::vector<TensorSpec>& tensors) {
  std::string names;
  for (const auto& t : tensors) absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
  return names;
}

// Every non-empty *_contents field but the one `dtype` takes refused: values in another field would be
// dropped (or, alone, read as an empty tensor), so the error names the field the datatype takes.
// Nothing to check for a datatype no typed field carries (answered by the conversion).
absl::Status CheckOnlyExpectedContents(const ModelSpec& spec, const InputProto& proto, DataType dtype) {
  const absl::string_view expected = TypedContentsField(dtype);
  if (expected.empty()) return absl::OkStatus();
  const auto& c = proto.contents();
  const std::pair<const char*, int> fields[] = {
      {"bool_contents", c.bool_contents_size()},   {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()}, {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
      {"fp64_contents", c.fp64_contents_size()},   {"bytes_contents", c.bytes_contents_size()},
  };
  for (const auto& [field, count] : fields) {
    if (count == 0 || field == expected) continue;
    return Invalid(spec, proto.name(), absl::StrCat(DataTypeName(dtype), " takes ", expected, ", but ", field,
                                                    " holds ", count, " values; send them in ", expected));
  }
  return absl::OkStatus();
}

// Typed contents -> row-major bytes the tensor owns (InputTensor::Own); the count must match the shape.
absl::Status ConvertTypedContents(const ModelSpec& spec, const InputProto& proto, int64_t elements,
                                  InputTensor& in) {
  const auto& c = proto.contents();
  RETURN_IF_ERROR(CheckOnlyExpectedContents(spec, proto, in.dtype));
  std::optional<TypedBytes> packed = PackTypedContents(c, in.dtype);
  if (!packed.has_value()) {
    return Invalid(spec, proto.name(), absl::StrCat(DataTypeName(in.dtype),
                                                    " has no typed contents field; send it in raw_input_contents"));
  }
  if (const auto& bad = packed->out_of_range; bad.has_value()) {
    return Invalid(spec, proto.name(), absl::StrCat("value ", bad->value, " at index ", bad->index,
                                                    " does not fit the datatype (", bad->range, ")"));
  }
  const int64_t count = packed->count;
  if (count != elements) {
    return Invalid(spec, proto.name(), absl::StrCat("contents hold ", count, " elements (", TypedContentsField(in.dtype),
                                                    "), ", DataTypeName(in.dtype), " ", ShapeString(in.shape),
                                                    " needs ", elements));
  }
  in.Own(std::move(packed->bytes));
  return absl::OkStatus();
}

// A client's shape in an error, cut (at 200 bytes, its length named) so that what was expected,
// which follows it, survives the 1 KiB cut of a status message.
std::string ClientShape(const std::vector<int64_t>& shape) { return ClientName(ShapeString(shape)); }

// Checks the shape against the config; returns the batch dim (1 for non-batching models).
absl::StatusOr<int64_t> CheckShape(const ModelSpec& spec, const TensorSpec& want,
                                   const std::vector<int64_t>& shape) {
  const bool batched = spec.max_batch_size > 0;
  std::vector<int64_t> expected = want.dims;
  if (batched) expected.insert(expected.begin(), -1);
  const std::string expected_text =
      absl::StrCat(ShapeString(expected), batched ? absl::StrCat(" (first dim = batch, 1..", spec.max_batch_size, ")") : "");
  if (shape.size() != expected.size()) {
    return Invalid(spec, want.name, absl::StrCat("shape ", ClientShape(shape), " has rank ", shape.size(),
                                                 ", expected ", expected_text));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) {
      return Invalid(spec, want.name, absl::StrCat("shape ", ClientShape(shape), " has dim ", d, " = ", shape[d],
                                                   "; every dim must be at least 1 (expected ", expected_text, ")"));
    }
    if (expected[d] != -1 && shape[d] != expected[d]) {
      return Invalid(spec, want.name, absl::StrCat("shape ", ClientShape(shape), " does not match ", expected_text));
    }
  }
  if (batched && shape[0] > spec.max_batch_size) {
    return Invalid(spec, want.name, absl::StrCat("batch size ", shape[0], " exceeds max_batch_size ",
                                                 spec.max_batch_size));
  }
  return batched ? shape[0] : 1;
}

std::string TensorWhat(const ModelSpec& spec, const char* kind, const std::string& tensor) {
  return absl::StrCat(spec.Label(), " ", kind, " '", ClientName(tensor), "'");
}

// With shared memory off, a request whose inputs or outputs name a region is FAILED_PRECONDITION,
// before any other check of it could answer INVALID_ARGUMENT (SHARED_MEMORY.md: "any of it").
absl::Status RefuseSharedMemoryWhenOff(const ModelSpec& spec, const inference::ModelInferRequest& request,
                                       const SharedMemoryRegistry* registry) {
  if (registry != nullptr) return absl::OkStatus();
  auto refuse = [&](const TensorParams& params, const char* kind, const std::string& name) -> absl::Status {
    auto region = params.find(kShmRegionParam);
    if (region == params.end()) return absl::OkStatus();
    SharedMemoryParams named;
    named.region = region->second.string_param();
    return ResolveSharedMemory(registry, named, TensorWhat(spec, kind, name)).status();
  };
  for (const InputProto& proto : request.inputs()) RETURN_IF_ERROR(refuse(proto.parameters(), "input", proto.name()));
  for (const auto& o : request.outputs()) RETURN_IF_ERROR(refuse(o.parameters(), "output", o.name()));
  return absl::OkStatus();
}

// Each input's shared-memory parameters (nullopt: the bytes travel in the message), and a check
// that raw_input_contents has one entry per input not in shared memory, as Triton's clients send.
absl::StatusOr<std::vector<std::optional<SharedMemoryParams>>> InputSharedMemory(
    const ModelSpec& spec, const inference::ModelInferRequest& request, const RawInputContents& raw_contents) {
  std::vector<std::optional<SharedMemoryParams>> shm;
  int in_message = 0;
  for (const InputProto& proto : request.inputs()) {
    ASSIGN_OR_RETURN(std::optional<SharedMemoryParams> p,
                     ParseSharedMemoryParams(proto.parameters(), TensorWhat(spec, "input", proto.name())));
    if (!p.has_value()) ++in_message;
    shm.push_back(std::move(p));
  }
  const int raw = raw_contents.size();
  if (raw == 0 || raw == in_message) return shm;
  // Some inputs in typed contents beside raw_input_contents: that, not the count, is the mistake.
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (shm[i].has_value() || !request.inputs(i).has_contents()) continue;
    return Invalid(spec, request.inputs(i).name(),
                   absl::StrCat("has typed contents, but the request also has raw_input_contents (", raw,
                                raw == 1 ? " entry" : " entries", "); send every input not in shared memory one way: all in "
                                "raw_input_contents, one entry each in order, or each in its typed contents"));
  }
  if (raw == request.inputs_size()) {
    for (int i = 0; i < request.inputs_size(); ++i) {
      if (!shm[i].has_value()) continue;
      return Invalid(spec, request.inputs(i).name(),
                     absl::StrCat("has shared-memory region '", ClientName(shm[i]->region),
                                  "' and a raw_input_contents entry; use one (raw_input_contents holds the "
                                  "inputs not in shared memory, in order)"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      spec.Label(), ": raw_input_contents has ", raw, raw == 1 ? " entry" : " entries", " for ", in_message,
      in_message == 1 ? " input" : " inputs",
      in_message == request.inputs_size() ? "" : " not in shared memory", "; give one per input, in order"));
}

// Keeps `region` mapped for the request, once: a region several of its tensors name is checked
// once when the request finishes (InferRequest::Complete). Notes the tensor that uses it (`what`,
// TensorWhat's "model 'm' input 'x'"; `kind` and `tensor` its parts) among those that do, for that
// check's error: "model 'm' output 'y' and output 'z'".
void HoldRegion(std::shared_ptr<const SharedMemoryRegion> region, std::string what, const char* kind,
                const std::string& tensor, InferRequest* out) {
  for (auto& held : out->regions) {
    if (held.region == region) {
      absl::StrAppend(&held.users, " and ", kind, " '", tensor, "'");
      return;
    }
  }
  out->regions.push_back({std::move(region), std::move(what)});
}

// Points `in` at its bytes in a registered region, after checking the size the shape needs.
absl::Status InputFromSharedMemory(const ModelSpec& spec, const InputProto& proto, const SharedMemoryParams& p,
                                   size_t expected_bytes, const SharedMemoryRegistry* shm,
                                   InputTensor& in, InferRequest* out) {
  if (proto.has_contents()) {
    return Invalid(spec, proto.name(), absl::StrCat("has typed contents and shared-memory region '", ClientName(p.region),
                                                    "'; use one"));
  }
  if (p.byte_size != expected_bytes) {
    return Invalid(spec, proto.name(), absl::StrCat("shared-memory region '", ClientName(p.region), "': ", kShmByteSizeParam,
                                                    " is ", p.byte_size, ", ", DataTypeName(in.dtype), " ",
                                                    ShapeString(in.shape), " needs ", expected_bytes));
  }
  std::string what = TensorWhat(spec, "input", proto.name());
  ASSIGN_OR_RETURN(SharedMemorySpan span, ResolveSharedMemory(shm, p, what));
  in.data = span.data;
  in.byte_size = span.byte_size;
  in.host_pinned = span.region->host_pinned();
  in.shared_memory = true;
  in.region = span.region->name();
  if (span.region->on_device()) in.device_id = static_cast<int>(span.region->device_id());
  HoldRegion(std::move(span.region), std::move(what), "input", proto.name(), out);
  return absl::OkStatus();
}

// The first byte of a BOOL tensor's host bytes (`data` or its pieces) that is neither 0 nor 1, and
// where it is; nullopt when there is none. LibTorch reads such a byte as a bool it never makes.
std::optional<std::pair<size_t, uint8_t>> FirstNonBoolByte(const InputTensor& in) {
  auto scan = [](absl::string_view bytes, size_t base) -> std::optional<std::pair<size_t, uint8_t>> {
    for (size_t i = 0; i < bytes.size(); ++i) {
      const auto b = static_cast<uint8_t>(bytes[i]);
      if (b > 1) return std::make_pair(base + i, b);
    }
    return std::nullopt;
  };
  if (in.data != nullptr) return scan(absl::string_view(in.data, in.byte_size), 0);
  size_t base = 0;
  for (absl::string_view piece : in.pieces) {
    if (auto found = scan(piece, base)) return found;
    base += piece.size();
  }
  return std::nullopt;
}

absl::Status BuildInputs(const ModelSpec& spec, const inference::ModelInferRequest& request,
                         const RawInputContents& raw_contents, const SharedMemoryRegistry* shm, InferRequest* out) {
  ASSIGN_OR_RETURN(std::vector<std::optional<SharedMemoryParams>> in_shm, InputSharedMemory(spec, request, raw_contents));
  const bool raw = raw_contents.size() > 0;
  int next_raw = 0;  // raw_input_contents skips the inputs in shared memory
  std::vector<InputTensor> inputs(spec.inputs.size());
  std::vector<bool> seen(spec.inputs.size(), false);
  int64_t batch = -1;
  std::string batch_input;  // the input that gave `batch`
  for (int i = 0; i < request.inputs_size(); ++i) {
    const InputProto& proto = request.inputs(i);
    const int index = spec.InputIndex(proto.name());
    if (index < 0) {
      return Invalid(spec, proto.name(), absl::StrCat("unknown input (the model's inputs: ", TensorNames(spec.inputs), ")"));
    }
    if (seen[index]) return Invalid(spec, proto.name(), "given more than once");
    seen[index] = true;
    const TensorSpec& want = spec.inputs[index];
    InputTensor& in = inputs[index];
    in.index = index;
    in.dtype = want.dtype;
    if (proto.datatype() != DataTypeName(want.dtype)) {
      return Invalid(spec, proto.name(), absl::StrCat("datatype '", Excerpt(proto.datatype(), 64), "', expected ",
                                                      DataTypeName(want.dtype)));
    }
    in.shape.assign(proto.shape().begin(), proto.shape().end());
    ASSIGN_OR_RETURN(int64_t items, CheckShape(spec, want, in.shape));
    if (batch >= 0 && items != batch) {
      return Invalid(spec, proto.name(), absl::StrCat("batch size ", items, " differs from the ", batch, " of input '",
                                                      batch_input, "' (every input's dim 0 is the batch size)"));
    }
    batch = items;
    batch_input = proto.name();
    const int64_t elements = ElementCount(in.shape);
    // Checked before any byte count is compared: a wrapped one (a huge variable dim) would let an
    // empty entry or a 0-byte region through.
    const std::optional<int64_t> bytes_needed = ByteCount(elements, want.dtype);
    if (!bytes_needed.has_value()) {
      return Invalid(spec, proto.name(), absl::StrCat(DataTypeName(want.dtype), " ", ShapeString(in.shape),
                                                      " needs more than ", kMaxTensorBytes,
                                                      " bytes (the largest tensor accepted)"));
    }
    const auto expected_bytes = static_cast<size_t>(*bytes_needed);
    if (in_shm[i].has_value()) {
      RETURN_IF_ERROR(InputFromSharedMemory(spec, proto, *in_shm[i], expected_bytes, shm, in, out));
    } else if (raw) {
      if (proto.has_contents()) return Invalid(spec, proto.name(), "has typed contents and raw_input_contents; use one");
      const int entry = next_raw++;
      const size_t bytes = raw_contents.byte_size(entry);
      if (bytes != expected_bytes) {
        return Invalid(spec, proto.name(), absl::StrCat("raw contents hold ", bytes, " bytes, ",
                                                        DataTypeName(want.dtype), " ", ShapeString(in.shape),
                                                        " needs ", expected_bytes));
      }
      raw_contents.Assign(entry, in, out);
    } else {
      RETURN_IF_ERROR(ConvertTypedContents(spec, proto, elements, in));
    }
    // Raw bytes and a system region's are read here; a client's GPU memory is not (SHARED_MEMORY.md).
    if (want.dtype == DataType::kBool && !in.on_device()) {
      if (const auto bad = FirstNonBoolByte(in)) {
        return Invalid(spec, proto.name(), absl::StrCat("BOOL element ", bad->first, " is byte ", static_cast<int>(bad->second),
                                                        "; a BOOL element is one byte, 0 (false) or 1 (true)"));
      }
    }
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!seen[i]) return Invalid(spec, spec.inputs[i].name, "missing (every model input is required)");
  }
  std::string key;
  for (const InputTensor& in : inputs) {
    absl::StrAppend(&key, ShapeString(std::vector<int64_t>(in.shape.begin() + (spec.max_batch_size > 0 ? 1 : 0), in.shape.end())), ";");
  }
  out->set_shape_key(std::move(key));
  out->batch_items = batch < 0 ? 1 : batch;
  out->inputs = std::move(inputs);
  return absl::OkStatus();
}

// Largest output the request builder allocates ahead of the batch (see BuildOutputs).
constexpr size_t kReservedOutputBytes = 64 * 1024;

// Output `index`'s byte size for a request of `batch_items` items when every dim is static; 0 when
// one is variable (known only once the model has run) or the size passes kMaxTensorBytes. Allocates
// nothing: the request path calls it for every output.
size_t StaticOutputBytes(const ModelSpec& spec, int index, int64_t batch_items) {
  const TensorSpec& want = spec.outputs[index];
  const int64_t per_item = ElementCount(want.dims);  // -1: a variable dim
  const int64_t items = spec.max_batch_size > 0 ? batch_items : 1;
  if (per_item < 0 || items < 0 || (items > 0 && per_item > std::numeric_limits<int64_t>::max() / items)) return 0;
  return static_cast<size_t>(ByteCount(per_item * items, want.dtype).value_or(0));
}

// The rank of output `index` as a response carries it (the batch dim first when the model batches).
size_t OutputRank(const ModelSpec& spec, int index) {
  return spec.outputs[index].dims.size() + (spec.max_batch_size > 0 ? 1 : 0);
}

// Makes `t` write into the region `p` names. When the output's dims are all static its size is
// known now, and a region too small fails the request before it is queued; otherwise the backend
// checks when it writes.
absl::Status OutputToSharedMemory(const ModelSpec& spec, int index, int64_t batch_items, const SharedMemoryParams& p,
                                  const SharedMemoryRegistry* shm, OutputTensor& t, InferRequest* out) {
  const TensorSpec& want = spec.outputs[index];
  std::string what = TensorWhat(spec, "output", want.name);
  ASSIGN_OR_RETURN(SharedMemorySpan span, ResolveSharedMemory(shm, p, what));
  const size_t needed = StaticOutputBytes(spec, index, batch_items);
  if (needed > span.byte_size) {
    std::vector<int64_t> shape = want.dims;
    if (spec.max_batch_size > 0) shape.insert(shape.begin(), batch_items);
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shared-memory region '", ClientName(p.region), "' is too small: the output needs ", needed, " bytes (",
        DataTypeName(want.dtype), " ", ShapeString(shape), "), ", span.byte_size, " available (",
        kShmByteSizeParam, ")"));
  }
  t.raw = span.data;
  t.raw_capacity = span.byte_size;
  t.raw_name = absl::StrCat("shared-memory region '", ClientName(p.region), "'");
  t.raw_pinned = span.region->host_pinned();
  if (span.region->on_device()) t.raw_device_id = static_cast<int>(span.region->device_id());
  HoldRegion(std::move(span.region), std::move(what), "output", want.name, out);
  return absl::OkStatus();
}

absl::Status BuildOutputs(const ModelSpec& spec, const inference::ModelInferRequest& request,
                          const SharedMemoryRegistry* shm, InferRequest* out,
                          inference::ModelInferResponse* response, std::vector<LentBytes>* lent) {
  std::vector<int> wanted;
  std::vector<std::optional<SharedMemoryParams>> out_shm(spec.outputs.size());
  if (request.outputs_size() == 0) {
    for (size_t k = 0; k < spec.outputs.size(); ++k) wanted.push_back(static_cast<int>(k));
  }
  std::set<int> seen;
  for (const auto& o : request.outputs()) {
    const int index = spec.OutputIndex(o.name());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(spec.Label(), ": unknown requested output '", ClientName(o.name()),
                                                     "' (the model's outputs: ", TensorNames(spec.outputs), ")"));
    }
    if (!seen.insert(index).second) {
      return absl::InvalidArgumentError(absl::StrCat(spec.Label(), ": output '", o.name(), "' requested twice"));
    }
    if (o.parameters().count("classification") > 0) {
      return absl::InvalidArgumentError(absl::StrCat(spec.Label(), " output '", o.name(),
                                                     "': the classification extension is not supported"));
    }
    ASSIGN_OR_RETURN(out_shm[index], ParseSharedMemoryParams(o.parameters(), TensorWhat(spec, "output", o.name())));
    wanted.push_back(index);
  }
  if (lent != nullptr) {
    lent->clear();
    lent->resize(wanted.size());  // never resized again: the outputs point into it
  }
  for (int index : wanted) {
    auto* entry = response->add_outputs();
    entry->set_name(spec.outputs[index].name);
    entry->set_datatype(DataTypeName(spec.outputs[index].dtype));
    OutputTensor t;
    t.index = index;
    // One raw_output_contents entry per output, empty for one in shared memory: Triton's clients
    // find an output's bytes by its position in `outputs`.
    std::string* contents = response->add_raw_output_contents();
    if (out_shm[index].has_value()) {
      RETURN_IF_ERROR(OutputToSharedMemory(spec, index, out->batch_items, *out_shm[index], shm, t, out));
      SetSharedMemoryParams(*out_shm[index], entry->mutable_parameters());
    } else {
      // The response's bytes and the shape are allocated here, on the thread that will also free
      // them once the response is sent: the worker only copies into them (no allocation on the
      // worker, none freed across threads) when the size is known now. Not for large outputs: a
      // queued request would hold them for its whole wait, and their copy outweighs the malloc.
      // Nor for those the backend will likely lend (they are sent from its buffer).
      const size_t bytes = StaticOutputBytes(spec, index, out->batch_items);
      const size_t reserved_at_most = lent != nullptr ? kMinLentOutputBytes - 1 : kReservedOutputBytes;
      if (bytes <= reserved_at_most) contents->reserve(bytes);
      t.shape.reserve(OutputRank(spec, index));
      t.data = contents;
      if (lent != nullptr) t.lend_to = &(*lent)[out->outputs.size()];  // this output's place in the response
    }
    out->outputs.push_back(std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace

int RawInputContents::size() const {
  return message_ != nullptr ? message_->raw_input_contents_size() : static_cast<int>(received_->entries.size());
}

size_t RawInputContents::byte_size(int i) const {
  return message_ != nullptr ? message_->raw_input_contents(i).size() : received_->entries[i].size;
}

void RawInputContents::Assign(int i, InputTensor& in, InferRequest* request) const {
  if (message_ != nullptr) {
    const std::string& bytes = message_->raw_input_contents(i);
    in.data = bytes.data();
    in.byte_size = bytes.size();
    return;
  }
  const wire::ReceivedBytes& entry = received_->entries[i];
  in.byte_size = entry.size;
  if (entry.contiguous()) {
    in.data = entry.data();
  } else {
    in.data = nullptr;
    in.pieces.assign(entry.pieces.begin(), entry.pieces.end());
  }
  if (request->received_bytes == nullptr) request->received_bytes = received_->slices;  // every entry views them
}

namespace {

// A request with inputs in CUDA shared memory says which in its shape key, so a batch's requests
// have each input all in GPU memory (gathered there by device copies) or all on the host (gathered
// into staging): the batcher never mixes the two. Outputs need no key: each request's rows go to its
// own destination either way.
void KeyDeviceInputs(InferRequest& request) {
  if (std::none_of(request.inputs.begin(), request.inputs.end(), [](const InputTensor& in) { return in.on_device(); })) {
    return;
  }
  std::string key = request.shape_key();
  key += "#gpu:";
  for (const InputTensor& in : request.inputs) key += in.on_device() ? '1' : '0';
  request.set_shape_key(std::move(key));
}

}  // namespace

absl::Status RefuseGpuMemoryOnCpuInstances(const ModelSpec& spec, const InferRequest& request, bool has_cpu_instance) {
  if (!has_cpu_instance) return absl::OkStatus();
  std::string tensor;
  for (const InputTensor& in : request.inputs) {
    if (!in.on_device()) continue;
    tensor = absl::StrCat("input '", spec.inputs[in.index].name, "' is in CUDA shared memory");
    break;
  }
  if (tensor.empty()) {
    for (const OutputTensor& out : request.outputs) {
      if (!out.raw_on_device()) continue;
      tensor = absl::StrCat("output '", spec.outputs[out.index].name, "' goes to CUDA shared memory (", out.raw_name, ")");
      break;
    }
  }
  if (tensor.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(spec.Label(), " ", tensor,
                   ", but an instance of this model runs on the CPU, which cannot use GPU memory; send it in the "
                   "message or in system shared memory, or serve the model on GPUs only"));
}

absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request,
    inference::ModelInferResponse* response, const SharedMemoryRegistry* shared_memory) {
  return BuildInferRequest(spec, request, RawInputContents(request), response, shared_memory);
}

absl::StatusOr<std::unique_ptr<InferRequest>> BuildInferRequest(
    const ModelSpec& spec, const inference::ModelInferRequest& request, const RawInputContents& raw,
    inference::ModelInferResponse* response, const SharedMemoryRegistry* shared_memory,
    std::vector<LentBytes>* lent) {
  auto out = std::make_unique<InferRequest>();
  out->id = request.id();
  RETURN_IF_ERROR(RefuseSharedMemoryWhenOff(spec, request, shared_memory));
  RETURN_IF_ERROR(BuildInputs(spec, request, raw, shared_memory, out.get()));
  RETURN_IF_ERROR(BuildOutputs(spec, request, shared_memory, out.get(), response, lent));
  KeyDeviceInputs(*out);
  response->set_model_name(spec.name);
  response->set_model_version(std::to_string(spec.version));
  response->set_id(request.id());
  return out;
}

}  // namespace chronoserve::server
