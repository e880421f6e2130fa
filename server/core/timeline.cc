#include "server/core/timeline.h"

#include <algorithm>

namespace chronoserve::server {
namespace {
// A span between two host stamps; 0 when either end was never reached.
int64_t Span(int64_t start_ns, int64_t end_ns) {
  if (start_ns <= 0 || end_ns <= 0) return 0;
  return std::max<int64_t>(0, end_ns - start_ns);
}
}  // namespace

const RequestTiming& Timeline::Finalize(int64_t responded_ns) {
  if (finalized_) return timing_;
  finalized_ = true;
  RequestTiming& t = timing_;
  t.server_total_ns = Span(received_ns, responded_ns);
  t.queue_ns = Span(enqueued_ns, batch_.dequeued_ns);
  t.input_stage_ns = Span(batch_.stage_start_ns(), batch_.staged_ns);
  t.h2d_ns = std::max<int64_t>(0, batch_.h2d_ns);
  t.compute_ns = std::max<int64_t>(0, batch_.compute_ns);
  t.launch_ns = std::max<int64_t>(0, batch_.launch_ns);
  t.d2h_ns = std::max<int64_t>(0, batch_.d2h_ns);
  t.output_stage_ns = Span(batch_.gpu_done_ns, output_done_ns);
  t.admit_ns = Span(received_ns, enqueued_ns);
  t.handback_ns = Span(output_done_ns, responded_ns);
  t.batch_size = batch_.batch_size;
  t.worker = batch_.worker;
  t.gpu = batch_.gpu;
  t.sm_clock_mhz = batch_.sm_clock_mhz;
  t.idle_before_us = batch_.idle_before_us;
  t.cold = batch_.cold;
  t.device_timed = batch_.device_timed;
  t.cuda_graph = batch_.cuda_graph;
  t.exact_device_timing = batch_.exact_device_timing;
  return t;
}

}  // namespace chronoserve::server
