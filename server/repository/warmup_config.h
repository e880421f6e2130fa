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

namespace chronoserve::server {

// Most input bytes one synthetic warm-up request may hold: 16 GiB. Far above any real batch of
// inputs (the default --max-queue-mib lets 1 GiB wait), it turns dims that cannot be meant (a
// typo's extra digits) into a load error instead of an allocation that fails or takes the host's
// memory during warm-up.
inline constexpr int64_t kMaxWarmupRequestBytes = int64_t{16} << 30;

// Checks that the synthetic request the server's own warm-up builds at its largest (max_batch_size
// items, variable dims as 1) stays within kMaxWarmupRequestBytes. `spec` has its inputs and
// max_batch_size converted.
absl::Status CheckLargestWarmupBatch(const ModelSpec& spec, const std::string& source);

// Validates config.model_warmup() against `spec` (inputs and max_batch_size converted) and appends
// one WarmupSpec per sample to spec->warmups. Every listed input's dims are stored resolved (empty
// dims of a fixed-shape input become the input's dims).
absl::Status ConvertWarmups(const config::ModelConfig& config, const std::string& source,
                            ModelSpec* spec);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_REPOSITORY_WARMUP_CONFIG_H_
