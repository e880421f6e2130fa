#include "server/core/infer_request.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::server {

absl::StatusCode InferRequest::CancellationCode() const {
  // The upper bound covers a client's own deadline cancellation that reached the server before the
  // server's copy of that deadline, on a loaded host.
  constexpr int64_t kMinDeadlineSlackNs = 1'000'000;
  constexpr int64_t kMaxDeadlineSlackNs = 50'000'000;
  const int64_t cancelled_ns = cancelled != nullptr ? cancelled->at_ns() : 0;
  if (cancelled_ns == 0) return absl::StatusCode::kOk;
  // Only gRPC's deadline cancels a call: a `timeout` parameter's expiry is the queue's to answer, and
  // a cancellation near it is the client's own.
  const int64_t deadline = call_deadline_ns >= 0 ? call_deadline_ns : deadline_ns;
  if (deadline == 0) return absl::StatusCode::kCancelled;
  const int64_t since_ns = timeline.enqueued_ns != 0 ? timeline.enqueued_ns : timeline.received_ns;
  const int64_t slack = std::clamp((deadline - since_ns) / 4, kMinDeadlineSlackNs, kMaxDeadlineSlackNs);
  return cancelled_ns >= deadline - slack ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kCancelled;
}

void InputTensor::CopyTo(char* dst, CacheStore store) const {
  if (data != nullptr) {
    CopyForDevice(dst, data, byte_size, store);
    return;
  }
  for (absl::string_view piece : pieces) {
    CopyForDevice(dst, piece.data(), piece.size(), store);
    dst += piece.size();
  }
}

absl::Status CheckOutputFits(const ModelSpec& spec, const std::string& output_name, size_t bytes,
                             const OutputTensor& out) {
  if (out.raw == nullptr || bytes <= out.raw_capacity) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      spec.Label(), " output '", output_name, "': ", out.raw_name, " is too small: the output needs ",
      bytes, " bytes, ", out.raw_capacity, " available (shared_memory_byte_size)"));
}

absl::Status WriteOutputBytes(const ModelSpec& spec, const std::string& output_name,
                              const char* src, size_t bytes, OutputTensor& out) {
  if (out.data != nullptr) {
    out.data->assign(src, bytes);
    return absl::OkStatus();
  }
  if (out.raw == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(CheckOutputFits(spec, output_name, bytes, out));
  // src == raw: the backend already copied the bytes into place (device -> pinned region).
  if (out.raw_on_device() && src != out.raw) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.Label(), " output '", output_name, "': ", out.raw_name,
        " is GPU memory and this worker could not copy the output there (CUDA shared memory needs a model "
        "instance on a GPU)"));
  }
  if (bytes > 0 && src != out.raw) std::memcpy(out.raw, src, bytes);
  return absl::OkStatus();
}

void InferRequest::Complete(std::unique_ptr<InferRequest> request, absl::Status status) {
  // A batch that succeeded may still hold a request the backend failed alone (an output that did
  // not fit its shared-memory region): that request keeps its own error.
  if (!status.ok() || request->status.ok()) request->status = std::move(status);
  // A region that shrank under the request (or whose pages a fault replaced) may have lost what it
  // was to read or to receive: answered with the region's error, not with outputs that may be
  // wrong. One fstat a system region.
  for (const auto& [region, users] : request->regions) {
    if (!request->status.ok()) break;
    absl::Status backed = region->CheckStillBacked();
    if (!backed.ok() && !users.empty()) {
      backed = absl::Status(backed.code(), absl::StrCat(users, ": ", backed.message()));
    }
    request->status = std::move(backed);
  }
  // The regions go before the answer: the batch is done with them (its copies into and out of them
  // have run), and a client may free its memory once answered. For a CUDA region the request may be
  // the last holder, whose release closes the IPC handle, which must come before the client's
  // cudaFree. (Errors above quote region names, copied into their text.)
  request->regions.clear();
  Completion done = std::move(request->on_complete);
  request->on_complete = nullptr;
  if (done) done(std::move(request));
}

}  // namespace chronoserve::server
