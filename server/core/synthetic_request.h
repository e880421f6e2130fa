// Synthetic requests for warm-up, keep-warm, benchmarks and the offline profiler: inputs of the
// spec's shapes, every output requested into caller-owned strings. An input that a model_warmup
// sample marks zero_data is all zeros (random values may be invalid for it, e.g. token ids); every
// other input is random (never all zeros). The loader bounds the sizes these requests can reach.
#ifndef CHRONOSERVE_SERVER_CORE_SYNTHETIC_REQUEST_H_
#define CHRONOSERVE_SERVER_CORE_SYNTHETIC_REQUEST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "server/core/infer_request.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// The dims (without the batch dim) a synthetic request gives input `t`: `dims_override`'s entry for
// it when that has the input's rank, else the config's dims; variable (-1) dims as 1.
std::vector<int64_t> SyntheticItemDims(const TensorSpec& t,
                                       const std::map<std::string, std::vector<int64_t>>& dims_override);

// Most input bytes one synthetic warm-up request may hold: 16 GiB. Far above any real batch of
// inputs (the default --max-queue-mib lets 1 GiB wait), it turns dims that cannot be meant (a
// typo's extra digits) into a load error instead of an allocation that fails or takes the host's
// memory during warm-up; the profiler's throughput search stops there too.
inline constexpr int64_t kMaxWarmupRequestBytes = int64_t{16} << 30;

// Input bytes of the request MakeSyntheticRequest builds for `items` items (dims from
// SyntheticItemDims); nullopt when the sum passes int64.
std::optional<int64_t> SyntheticRequestBytes(const ModelSpec& spec, int64_t items,
                                             const std::map<std::string, std::vector<int64_t>>& dims_override);

// A request of `items` items (ignored when the model does not batch). Variable (-1) dims take the
// per-input `dims_override` when it has the right rank, else 1. Outputs are written into
// `*output_scratch`, which must outlive the request. The request is marked synthetic.
std::unique_ptr<InferRequest> MakeSyntheticRequest(
    const ModelSpec& spec, int64_t items, std::vector<std::string>* output_scratch,
    std::mt19937_64& rng, const std::map<std::string, std::vector<int64_t>>& dims_override = {});

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_SYNTHETIC_REQUEST_H_
