// config.pbtxt's model_warmup turned into WarmupSpecs, and the bound on the synthetic requests the
// server builds from a config before the model reports READY (its own warm-up at every batch size up
// to max_batch_size, the model_warmup samples, the serving warm-up). A config that would make one of
// them absurdly large fails that model's load here instead of an allocation failing later. Internal
// to the repository loader; pure functions, no threads.
#ifndef CHRONOSERVE_SERVER_REPOSITORY_WARMUP_CONFIG_H_
#define CHRONOSERVE_SERVER_REPOSITORY_WARMUP_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/model_config.pb.h"
#include "server/core/model_spec.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::server {

// Checks that the synthetic request the server's own warm-up builds at its largest (max_batch_size
// items, variable dims as ModelSpec::SyntheticDims) stays within kMaxWarmupRequestBytes
// (synthetic_request.h). `spec` has its inputs, max_batch_size and warm-ups converted.
absl::Status CheckLargestWarmupBatch(const ModelSpec& spec, const std::string& source);

// Validates config.model_warmup() against `spec` (inputs and max_batch_size converted) and appends
// one WarmupSpec per sample to spec->warmups. Every listed input's dims are stored resolved (empty
// dims of a fixed-shape input become the input's dims).
absl::Status ConvertWarmups(const config::ModelConfig& config, const std::string& source,
                            ModelSpec* spec);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_REPOSITORY_WARMUP_CONFIG_H_
