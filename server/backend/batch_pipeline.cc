#include "server/backend/batch_pipeline.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace chronoserve::server {

absl::StatusOr<int> PipelineDepthFromSpec(const ModelSpec& spec) {
  auto it = spec.parameters.find(kPipelineDepthKey);
  if (it == spec.parameters.end()) return kMaxPipelineDepth;
  const absl::string_view value = absl::StripAsciiWhitespace(it->second);
  if (value == "1") return 1;
  if (value == "2") return 2;
  return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': parameter ", kPipelineDepthKey, " = \"",
                                                 it->second, "\": expected \"1\" (no pipelining) or \"2\""));
}

}  // namespace chronoserve::server
