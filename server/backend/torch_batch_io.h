// Moving one batch's bytes between the requests and the device path: gathering every request's
// inputs into the worker's staging (or, for one request in a page-locked shared-memory region,
// pointing at it in place), checking what forward() returned against the config, and scattering
// each request's rows of the outputs into its response (copied, or lent: sent from the path's
// buffer) or region. Internal to the torch backend
// (includes LibTorch); called from the worker thread that owns the DevicePath.
#ifndef CHRONOSERVE_SERVER_BACKEND_TORCH_BATCH_IO_H_
#define CHRONOSERVE_SERVER_BACKEND_TORCH_BATCH_IO_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/backend/torch_device_path.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// One input's batch, ready for the device: the bytes of every request back to back.
struct StagedInput {
  char* data = nullptr;  // the batch's bytes in one run; null when they are several device pieces
  size_t bytes = 0;
  std::vector<int64_t> shape;  // the batch's full shape
  bool in_place = false;       // the requests' own bytes (arena, pinned or GPU region): no gather
  // The bytes as the device path takes them, in batch order: the one run at `data`, or several
  // requests' inputs in CUDA shared memory (device pointers; the host never reads them), for the
  // device copies to put back to back. Inline: the one run costs the worker no allocation.
  absl::InlinedVector<BytePiece, 1> pieces;
};

// Items along dim 0 over the batch's requests.
int64_t BatchItems(const Batch& batch);

// Puts a batch whose requests are all in their model's InputArena in arena order, so that each
// input's regions run back to back (requests received by several threads may be queued in another
// order than they reserved their regions). The order of rows is the order of the batch afterwards.
void OrderByArena(Batch& batch);

// One StagedInput per model input: gathered into `path`'s staging buffers (one H2D per input
// later), except where the bytes can be used where they are: every request's input back to back
// in the InputArena (in batch order, page-locked when `path` is a GPU's), or a one-request batch
// whose input is page-locked and `path` reads such memory directly. Then `data` points at the
// first request's bytes. Inputs in CUDA shared memory (a batch's requests have them all there or
// none: their shape key says so) are never read on the host: one request's is `data`, several
// requests' are `pieces`; FAILED_PRECONDITION when `path` is the CPU's.
absl::StatusOr<std::vector<StagedInput>> GatherInputs(const ModelSpec& spec, const Batch& batch, DevicePath& path);

// `error`, from copying input `input` of `batch` to the device (DevicePath::ToDevice or
// ToDeviceInto), with the input, its bytes and the shared-memory regions it came from named in front
// (a few of them, then how many more). Its code is kept.
absl::Status InputCopyError(const ModelSpec& spec, const Batch& batch, int input, size_t bytes,
                            const absl::Status& error);

// INTERNAL naming the output when forward() returned the wrong count, dtype, batch dim, dims
// (against the config's; -1 matches any) or device (not `device`). Like every helper here, its
// errors do not name the model: the instance that called it adds the model, worker and device.
absl::Status CheckForwardOutputs(const ModelSpec& spec, const std::vector<at::Tensor>& outputs, int64_t total,
                                 const c10::Device& device);

// The page-locked shared-memory destination of output `k` when the batch is one request that wants
// it there, it fits and `path` can copy straight into it (its `raw` is where, its `raw_name` names
// the region for an error); otherwise null.
const OutputTensor* DirectOutputDestination(const Batch& batch, int k, const at::Tensor& output, const DevicePath& path);

// Whether a request of the batch wants output `k` anywhere but GPU memory (so it must come to the host).
bool WantedOnHost(const Batch& batch, int k);

// Starts the device-to-device copy of each request's rows of output `k` into the CUDA shared-memory
// region it asked for (one copy a request on the worker's stream, inside the d2h span). A region too
// small, or a `path` on the CPU, fails that request alone (its `status`, naming model, output and
// region); errors from the path fail the batch, naming the output and the regions it was going to.
absl::Status CopyOutputsToDevice(const ModelSpec& spec, const Batch& batch, int k, const at::Tensor& output,
                                 DevicePath& path);

// Sets each request's output shapes and copies its rows from `host` (per output, valid bytes of the
// whole batch) into its response or region; a region too small fails that request alone. Where a
// response can send bytes it does not own (OutputTensor::lend_to) and its rows are at least
// kMinLentOutputBytes, they are lent instead: `path` lends each such output's host bytes once
// (DevicePath::LendHost), and every request views its rows of them; if it lends none, they are
// copied. Stamps timeline.output_done_ns with `clock`. True when some output was lent.
bool ScatterOutputs(const ModelSpec& spec, Batch& batch, const std::vector<at::Tensor>& outputs,
                    const std::vector<const char*>& host, int64_t total, DevicePath& path, const Clock* clock);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_BATCH_IO_H_
