// RequestTiming: where one request's time went (../shared/TIMING.md), and its two wire encodings:
// KServe response parameters ("timing.queue_ns" = int64 ns, ...) and the W3C Server-Timing header
// ("queue;dur=0.012, h2d;dur=0.019, ..."; milliseconds). The server encodes, clients decode, so
// both sides share the names defined here.
#ifndef CHRONOSERVE_COMMON_TIMING_H_
#define CHRONOSERVE_COMMON_TIMING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

struct RequestTiming {
  // Spans, nanoseconds. For a request that ran in a batch, h2d/compute/launch/d2h are the batch's.
  int64_t queue_ns = 0;         // enqueued -> a worker took the batch
  int64_t input_stage_ns = 0;   // batch taken -> inputs gathered into staging
  int64_t h2d_ns = 0;           // host->device copy (CUDA events; host clock on CPU)
  int64_t compute_ns = 0;       // the model's forward (CUDA events; host clock on CPU)
  int64_t launch_ns = 0;        // host time spent enqueueing the forward
  int64_t d2h_ns = 0;           // device->host copy
  int64_t output_stage_ns = 0;  // GPU work observed done -> response built
  int64_t server_total_ns = 0;  // request received by the handler -> response handed to gRPC
  // Host spans around the stages (0 from servers before them, and where a request never got there):
  int64_t admit_ns = 0;     // received by the handler -> enqueued (read, validated, inputs into the arena)
  int64_t handback_ns = 0;  // outputs in the response (output_stage's end) -> timing finalised to answer
  // Attributes.
  int64_t batch_size = 0;       // executed batch size (items)
  int64_t worker = -1;          // worker (stream) index within the model
  int64_t gpu = -1;             // CUDA device ordinal, -1 on CPU
  int64_t sm_clock_mhz = 0;     // SM clock sampled at batch start, 0 when unknown
  int64_t idle_before_us = 0;   // how long the device had no work before this batch
  bool cold = false;            // first batch on this worker after load
  bool device_timed = false;    // true: GPU spans from CUDA events; false: host clock
  bool cuda_graph = false;      // the forward was a CUDA graph replay (false when absent: older servers)
  // The worker held its stream until the batch was enqueued, so h2d/compute/d2h are device time
  // only (exact_device_timing; false when absent: older servers).
  bool exact_device_timing = false;

  // server_total minus the stages: handler + scheduling overhead; never negative when valid. (These
  // and IsConsistent sum in 128 bits: a client decodes spans a server sent, whatever their values.)
  int64_t remainder_ns() const;
  // What of the remainder neither admit nor handback holds: inputs staged -> device work observed
  // done, less h2d + compute + d2h (enqueueing before the first event, waiting behind a batch ahead,
  // noticing the last event). Meaningful only when the server reported admit (admit_ns > 0).
  int64_t device_gap_ns() const;
  // Every span >= 0 and the stages, admit and handback sum to at most server_total.
  bool IsConsistent() const;
};

// One response parameter. Exactly one of the values is meaningful, as `kind` says.
struct TimingParam {
  enum class Kind { kInt64, kBool, kString };
  std::string key;
  Kind kind = Kind::kInt64;
  int64_t int_value = 0;
  bool bool_value = false;
  std::string string_value;
};

// Prefix of every timing parameter key.
inline constexpr absl::string_view kTimingParamPrefix = "timing.";
// Name of the gRPC trailing-metadata entry.
inline constexpr absl::string_view kServerTimingKey = "server-timing";

// One timing parameter's full key and where its value lives in a RequestTiming: an int64 member,
// a bool member, or (kString: "clock") `bool_member` device_timed written as "cuda_event" / "host".
// The table lets the server write and clients read the parameters without building a key or a
// TimingParam per response (both showed in profiles under load).
struct TimingParamField {
  std::string key;  // "timing.queue_ns"
  TimingParam::Kind kind = TimingParam::Kind::kInt64;
  int64_t RequestTiming::*int_member = nullptr;
  bool RequestTiming::*bool_member = nullptr;
};
// Every timing parameter, in the order EncodeTimingParams lists them.
const std::vector<TimingParamField>& TimingParamFields();
// The "timing.clock" value for `device_timed`.
inline const char* TimingClockValue(bool device_timed) { return device_timed ? "cuda_event" : "host"; }

// The parameters the server puts in a ModelInferResponse.
std::vector<TimingParam> EncodeTimingParams(const RequestTiming& timing);

// Rebuilds a RequestTiming from response parameters; `lookup(key)` returns the parameter if present
// (its `key` need not be filled).
// NOT_FOUND when the response carries no timing at all.
absl::StatusOr<RequestTiming> DecodeTimingParams(
    const std::function<std::optional<TimingParam>(const std::string& key)>& lookup);
// The same, with each parameter looked up by its field's index in TimingParamFields(): for a
// client that meets the entries in wire order and files each under TimingParamFieldIndex().
absl::StatusOr<RequestTiming> DecodeTimingParamsByField(
    const std::function<std::optional<TimingParam>(size_t field)>& lookup);
// The index in TimingParamFields() of the parameter called `key` ("timing.queue_ns"), or -1.
int TimingParamFieldIndex(absl::string_view key);

// "queue;dur=0.012, input_stage;dur=0.003, h2d;dur=0.019, ..., total;dur=0.171" (ms, 3 decimals).
std::string EncodeServerTiming(const RequestTiming& timing);

// One parsed Server-Timing metric.
struct ServerTimingMetric {
  std::string name;
  double dur_ms = 0;
};
// Parses a Server-Timing header value; INVALID_ARGUMENT on malformed entries.
absl::StatusOr<std::vector<ServerTimingMetric>> ParseServerTiming(absl::string_view header);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TIMING_H_
