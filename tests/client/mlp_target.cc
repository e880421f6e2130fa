#include "tests/client/mlp_target.h"

#include "absl/status/status.h"
#include "client/chronobench/request_factory.h"
#include "client/inference_client.h"
#include "common/status_macros.h"
#include "tools/example_models.h"

namespace chronoserve::testing {

absl::StatusOr<MlpTarget> StartMlpTarget(const std::string& dir_prefix, uint64_t seed) {
  const std::string dir = MakeTestDir(dir_prefix);
  if (dir.empty()) return absl::InternalError("cannot make a test directory");
  RETURN_IF_ERROR(examples::WriteMlp(dir + "/models", "mlp", examples::ModelOptions{}));
  MlpTarget target;
  ASSIGN_OR_RETURN(target.server, StartTestServer(dir + "/models"));
  ASSIGN_OR_RETURN(auto metadata, client::InferenceClient::Connect(target.server.url)->ModelMetadata("mlp"));
  ASSIGN_OR_RETURN(auto factory, client::bench::RequestFactory::Create(metadata, client::bench::InputOptions{}, seed));
  ASSIGN_OR_RETURN(target.request, factory.Build("", 1));
  return target;
}

}  // namespace chronoserve::testing
