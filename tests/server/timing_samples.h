// A RequestTiming with every field set to a distinct value, and a field-by-field comparison: for the
// tests of the timing.* parameters on the wire (timing_params_test, response_view_test).
#ifndef CHRONOSERVE_TESTS_SERVER_TIMING_SAMPLES_H_
#define CHRONOSERVE_TESTS_SERVER_TIMING_SAMPLES_H_

#include <gtest/gtest.h>

#include "common/timing.h"

namespace chronoserve::testing {

// Spans base + 1 .. base + 9, server_total base + 100; the flags (and gpu, sm clock) set or not.
inline RequestTiming SampleTiming(int64_t base, bool flags) {
  RequestTiming t;
  t.queue_ns = base + 1;
  t.input_stage_ns = base + 2;
  t.h2d_ns = base + 3;
  t.compute_ns = base + 4;
  t.launch_ns = base + 5;
  t.d2h_ns = base + 6;
  t.output_stage_ns = base + 7;
  t.server_total_ns = base + 100;
  t.admit_ns = base + 8;
  t.handback_ns = base + 9;
  t.batch_size = 3;
  t.worker = 1;
  t.gpu = flags ? 0 : -1;
  t.sm_clock_mhz = flags ? 1980 : 0;
  t.idle_before_us = base / 1000 + 9;
  t.cold = flags;
  t.device_timed = flags;
  t.cuda_graph = flags;
  t.exact_device_timing = !flags;
  return t;
}

// Every field the timing.* parameters carry is the same in `a` and `b`.
inline void ExpectSameTiming(const RequestTiming& a, const RequestTiming& b) {
  for (const TimingParamField& f : TimingParamFields()) {
    if (f.int_member != nullptr) EXPECT_EQ(a.*f.int_member, b.*f.int_member) << f.key;
    if (f.bool_member != nullptr) EXPECT_EQ(a.*f.bool_member, b.*f.bool_member) << f.key;
  }
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TIMING_SAMPLES_H_
