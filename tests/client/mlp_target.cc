#include "tests/client/mlp_target.h"

#include "absl/status/status.h"
#include "client/chronobench/request_factory.h"
#include "client/inference_client.h"
#include "common/status_macros.h"
#include "tools/example_models.h"

namespace chronoserve::testing {
namespace {

constexpr std::chrono::seconds kCallTimeout(30);  // a stuck server fails the set-up, never hangs it

}  // namespace

absl::StatusOr<MlpTarget> StartMlpTarget(const std::string& dir_prefix, uint64_t seed) {
  MlpTarget target;
  ASSIGN_OR_RETURN(TestDir dir, TestDir::Create(dir_prefix));
  target.dir = std::make_unique<TestDir>(std::move(dir));
  const std::string models = target.dir->path() + "/models";
  RETURN_IF_ERROR(examples::WriteMlp(models, "mlp", examples::ModelOptions{}));
  ASSIGN_OR_RETURN(target.server, StartTestServer(models));
  ASSIGN_OR_RETURN(auto metadata, client::InferenceClient::Connect(target.server.url, kCallTimeout)->ModelMetadata("mlp"));
  ASSIGN_OR_RETURN(auto factory, client::bench::RequestFactory::Create(metadata, client::bench::InputOptions{}, seed));
  ASSIGN_OR_RETURN(target.request, factory.Build("", 1));
  return target;
}

}  // namespace chronoserve::testing
