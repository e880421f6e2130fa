// Helpers the ModelQueue tests share (model_queue_test.cc, model_queue_drop_test.cc): requests,
// batch policies, and the result a due batch is taken with.
#ifndef CHRONOSERVE_TESTS_SERVER_MODEL_QUEUE_TEST_UTIL_H_
#define CHRONOSERVE_TESTS_SERVER_MODEL_QUEUE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "server/scheduler/model_queue.h"

namespace chronoserve::testing {

// A request of `items` batch items with shape key `key`, and a cancel flag the test can set.
inline std::unique_ptr<server::InferRequest> Request(int64_t items = 1, const std::string& key = "[3];") {
  auto r = std::make_unique<server::InferRequest>();
  r->batch_items = items;
  r->set_shape_key(key);
  r->cancelled = std::make_shared<server::CancelFlag>();
  return r;
}

// Where a batch is due the tests take it with TryNextBatch, which never waits: a regression fails
// the test instead of blocking it forever in NextBatch.
inline constexpr server::ModelQueue::WaitResult kBatch = server::ModelQueue::WaitResult::kBatch;

inline server::BatchPolicyConfig Dynamic(int max, int64_t delay_ns) {
  server::BatchPolicyConfig c;
  c.max_batch_size = max;
  c.dynamic = true;
  c.max_queue_delay_ns = delay_ns;
  return c;
}

// A request whose one input holds `mib` MiB of its own bytes (or of a client's shared memory).
inline std::unique_ptr<server::InferRequest> RequestHolding(double mib, bool shared_memory = false) {
  auto r = Request();
  server::InputTensor in;
  in.index = 0;
  in.Own(std::string(static_cast<size_t>(mib * (1 << 20)), '\x5a'));
  in.shared_memory = shared_memory;
  r->inputs.push_back(std::move(in));
  return r;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_MODEL_QUEUE_TEST_UTIL_H_
