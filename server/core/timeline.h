// Timeline: the host timestamps of one request plus the batch's GPU spans, turned into a
// RequestTiming exactly once (Finalize) when the response is handed to gRPC. All host times are
// steady-clock nanoseconds. Written by one thread at a time as the request moves along.
#ifndef CHRONOSERVE_SERVER_CORE_TIMELINE_H_
#define CHRONOSERVE_SERVER_CORE_TIMELINE_H_

#include <cstdint>

#include "common/timing.h"

namespace chronoserve::server {

// What a worker measured for one executed batch; shared by every request in it.
struct BatchTiming {
  int64_t dequeued_ns = 0;   // worker took the batch
  // The worker began on the batch's inputs: later than dequeued_ns when it first answered requests
  // dropped with the batch (that time is neither queueing nor staging). 0: at dequeued_ns.
  int64_t stage_from_ns = 0;
  int64_t staged_ns = 0;     // inputs gathered into staging
  int64_t gpu_done_ns = 0;   // device work observed complete (host clock)
  int64_t h2d_ns = 0;
  int64_t compute_ns = 0;
  int64_t launch_ns = 0;
  int64_t d2h_ns = 0;
  // From h2d's end to the batch's last event (event delta), with request timing on a pipelining
  // (GPU) instance: h2d may end before compute starts (copied behind another batch, or a graph's
  // pad rows zeroed in between). 0 when not measured (h2d is then placed where compute starts).
  // For placing the h2d span in traces.
  int64_t h2d_end_to_done_ns = 0;
  int64_t batch_size = 0;
  int64_t worker = -1;
  int64_t gpu = -1;
  int64_t sm_clock_mhz = 0;
  int64_t idle_before_us = 0;
  bool cold = false;
  bool device_timed = false;
  bool cuda_graph = false;  // the forward was a CUDA graph replay
  bool exact_device_timing = false;  // the stream was held until the batch was enqueued
  bool inputs_in_place = false;  // every input went to the device from where it lay (no gather)
  // At least one output went to its responses from the worker's own buffer, lent, not copied
  // (OutputTensor::lend_to).
  bool outputs_lent = false;
  // --request-timing: false = no span events, no launch timer, no device idle tracking; h2d,
  // compute, launch, d2h, sm_clock_mhz and idle_before_us stay 0 and the response carries no timing.
  bool request_timing = true;

  // Where `input_stage` begins.
  int64_t stage_start_ns() const { return stage_from_ns > 0 ? stage_from_ns : dequeued_ns; }
};

class Timeline {
 public:
  int64_t received_ns = 0;     // handler entered with the whole request
  int64_t enqueued_ns = 0;     // validated and queued
  int64_t output_done_ns = 0;  // this request's outputs scattered into its response

  // `counts_batch`: this request carries the batch's per-batch figures into the metrics. The worker
  // marks one request per executed batch; the others are counted per request only.
  void SetBatch(const BatchTiming& batch, bool counts_batch = false) {
    batch_ = batch;
    counts_batch_ = counts_batch;
  }
  const BatchTiming& batch() const { return batch_; }
  bool counts_batch() const { return counts_batch_; }
  // Its batch completed: the device work was observed done and this request's outputs scattered.
  // A batch that failed in between has no trustworthy device spans (metrics and traces skip them).
  bool batch_completed() const { return batch_.gpu_done_ns > 0 && output_done_ns > 0; }

  // Computes every span with `responded_ns` as the end of server_total. Spans that a failed or
  // never-executed request did not reach stay 0. Idempotent: later calls return the first result.
  const RequestTiming& Finalize(int64_t responded_ns);
  bool finalized() const { return finalized_; }
  const RequestTiming& timing() const { return timing_; }

 private:
  BatchTiming batch_;
  bool counts_batch_ = false;
  RequestTiming timing_;
  bool finalized_ = false;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_TIMELINE_H_
