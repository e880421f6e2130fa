// Triton's ModelConfig RPC: the real server on 127.0.0.1, real gRPC, our generated stub. The
// answer built without a server, and the field numbers Triton's protos give the fields we send:
// model_config_answer_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/cpu_set.h"
#include "proto/inference.grpc.pb.h"
#include "proto/model_config.pb.h"
#include "server/backend/torch_backend.h"
#include "server/model_manager.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
namespace pb = ::chronoserve::config;

// A KIND_AUTO group without gpus, as loaded here: KIND_GPU on every visible GPU, in order, when
// there is one (a GPU machine); else KIND_CPU with no gpus (CI).
void ExpectAutoGroupWhereItLanded(const pb::ModelInstanceGroup& group) {
  std::vector<int> gpus;
  for (int g = 0; g < server::CudaDeviceCount(); ++g) gpus.push_back(g);
  if (gpus.empty()) {
    EXPECT_EQ(group.kind(), pb::ModelInstanceGroup::KIND_CPU);
    EXPECT_THAT(group.gpus(), IsEmpty());
  } else {
    EXPECT_EQ(group.kind(), pb::ModelInstanceGroup::KIND_GPU);
    EXPECT_THAT(group.gpus(), ElementsAreArray(gpus));
  }
}

// ModelConfig of `name` through `stub`, with a deadline that fails the test.
grpc::Status CallModelConfig(inference::GRPCInferenceService::Stub& stub, const std::string& name,
                             const std::string& version, inference::ModelConfigResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  inference::ModelConfigRequest request;
  request.set_name(name);
  request.set_version(version);
  return stub.ModelConfig(&ctx, request, response);
}

std::unique_ptr<inference::GRPCInferenceService::Stub> Connect(const server::Server& server) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials()));
}

// A batched model with every setting the server keeps, a variable-dim model, and one unbatched.
constexpr char kMlpExtra[] = R"(dynamic_batching {
  preferred_batch_size: [ 4, 2 ]
  max_queue_delay_microseconds: 1500
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 90000 max_queue_size: 32 }
}
parameters { key: "tag" value { string_value: "blue" } }
model_warmup {
  name: "sample"
  batch_size: 2
  count: 3
  inputs { key: "INPUT__0" value { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } }
}
)";

class ModelConfigRpcTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    repo_ = std::make_unique<testing::TempDir>("cs_model_config");
    examples::ModelOptions mlp;
    mlp.max_batch_size = 8;
    mlp.dynamic_batching = false;  // written in full by kMlpExtra
    mlp.instance_count = 2;
    mlp.instance_kind = "KIND_CPU";
    mlp.extra_config = kMlpExtra;
    ASSERT_TRUE(examples::WriteMlp(repo_->path(), "mlp", mlp).ok());
    examples::ModelOptions addsub;
    addsub.max_batch_size = 4;
    addsub.max_queue_delay_us = 700;
    ASSERT_TRUE(examples::WriteAddSub(repo_->path(), "addsub", addsub).ok());
    examples::ModelOptions plain;
    plain.max_batch_size = 0;
    plain.dynamic_batching = false;
    ASSERT_TRUE(examples::WriteScaleModel(repo_->path(), "scale_nobatch", DataType::kInt32, plain).ok());
    auto options = testing::TestServerOptions(repo_->path());
    options.grpc_infer_threads = GetParam();  // ModelConfig on the callback API (0) or the queues
    server_ = testing::StartServer(options);
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }

  grpc::Status Call(const std::string& name, const std::string& version, inference::ModelConfigResponse* response) {
    return CallModelConfig(*stub_, name, version, response);
  }

  std::unique_ptr<testing::TempDir> repo_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_P(ModelConfigRpcTest, BatchedModelCarriesEverySettingTheServerKeeps) {
  inference::ModelConfigResponse response;
  grpc::Status status = Call("mlp", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::ModelConfig& c = response.config();
  EXPECT_EQ(c.name(), "mlp");
  EXPECT_EQ(c.platform(), "pytorch_libtorch");
  EXPECT_EQ(c.backend(), "pytorch");
  EXPECT_EQ(c.max_batch_size(), 8);
  EXPECT_EQ(c.default_model_filename(), "model.pt");
  EXPECT_EQ(c.version_policy().ShortDebugString(), "latest { num_versions: 1 }")
      << "none in config.pbtxt: Triton's default, as Triton answers it";
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "INPUT__0");
  EXPECT_EQ(c.input(0).data_type(), pb::TYPE_FP32);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(64));  // without the batch dim, as in config.pbtxt
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).name(), "OUTPUT__0");
  EXPECT_THAT(c.output(0).dims(), ElementsAre(16));
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).name(), "mlp_0");
  EXPECT_EQ(c.instance_group(0).kind(), pb::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_THAT(c.instance_group(0).gpus(), IsEmpty());
  EXPECT_EQ(c.instance_group(0).host_policy(), "") << "as configured";
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ElementsAre(2, 4));  // as the batcher sorts them
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 1500u);
  const auto& policy = c.dynamic_batching().default_queue_policy();
  EXPECT_EQ(policy.timeout_action(), pb::ModelQueuePolicy::DELAY);
  EXPECT_EQ(policy.default_timeout_microseconds(), 90000u);
  EXPECT_EQ(policy.max_queue_size(), 32u);
  ASSERT_EQ(c.parameters().count("tag"), 1u);
  EXPECT_EQ(c.parameters().at("tag").string_value(), "blue");
  ASSERT_EQ(c.model_warmup_size(), 1);
  const pb::ModelWarmup& w = c.model_warmup(0);
  EXPECT_EQ(w.name(), "sample");
  EXPECT_EQ(w.batch_size(), 2u);
  EXPECT_EQ(w.count(), 3u);
  ASSERT_EQ(w.inputs().count("INPUT__0"), 1u);
  EXPECT_EQ(w.inputs().at("INPUT__0").data_type(), pb::TYPE_FP32);
  EXPECT_THAT(w.inputs().at("INPUT__0").dims(), ElementsAre(64));
  EXPECT_TRUE(w.inputs().at("INPUT__0").random_data());
}

TEST_P(ModelConfigRpcTest, VariableDimsAndDefaultsFilledIn) {
  inference::ModelConfigResponse response;
  grpc::Status status = Call("addsub", "1", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::ModelConfig& c = response.config();
  EXPECT_EQ(c.max_batch_size(), 4);
  ASSERT_EQ(c.input_size(), 2);
  EXPECT_EQ(c.input(1).name(), "INPUT__1");
  EXPECT_THAT(c.input(0).dims(), ElementsAre(-1));
  EXPECT_THAT(c.input(1).dims(), ElementsAre(-1));
  ASSERT_EQ(c.output_size(), 2);
  EXPECT_THAT(c.output(1).dims(), ElementsAre(-1));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 700u);
  EXPECT_EQ(c.dynamic_batching().default_queue_policy().timeout_action(), pb::ModelQueuePolicy::REJECT);
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_EQ(c.model_warmup_size(), 0);
}

// addsub's group is KIND_AUTO without gpus; Triton reports where it was loaded, and so do we. In CI
// there is no GPU: KIND_CPU, no gpus. On a GPU machine: KIND_GPU on every visible GPU.
TEST_P(ModelConfigRpcTest, KindAutoIsReportedAsTheDeviceItLoadedOn) {
  inference::ModelConfigResponse response;
  grpc::Status status = Call("addsub", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.config().instance_group_size(), 1);
  const pb::ModelInstanceGroup& group = response.config().instance_group(0);
  ExpectAutoGroupWhereItLanded(group);
  EXPECT_EQ(group.count(), 1) << "count stays per GPU, as configured";
  EXPECT_EQ(group.host_policy(), "");
}

TEST_P(ModelConfigRpcTest, UnbatchedModelHasNoDynamicBatching) {
  inference::ModelConfigResponse response;
  grpc::Status status = Call("scale_nobatch", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.config().max_batch_size(), 0);
  EXPECT_FALSE(response.config().has_dynamic_batching());
  ASSERT_EQ(response.config().input_size(), 1);
  EXPECT_EQ(response.config().input(0).data_type(), pb::TYPE_INT32);
  EXPECT_THAT(response.config().input(0).dims(), ElementsAre(3));
}

TEST_P(ModelConfigRpcTest, UnknownModelOrVersionIsNotFound) {
  inference::ModelConfigResponse response;
  grpc::Status status = Call("no_such_model", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("no_such_model"));
  status = Call("mlp", "2", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("mlp"));
  EXPECT_FALSE(response.has_config());
}

// A malformed model name is INVALID_ARGUMENT, as on ModelInfer, not NOT_FOUND.
TEST_P(ModelConfigRpcTest, AMalformedModelNameIsInvalidArgument) {
  inference::ModelConfigResponse response;
  for (const std::string& name : {std::string(""), std::string("../mlp"), std::string(300, 'n')}) {
    grpc::Status status = Call(name, "", &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    EXPECT_THAT(status.error_message(), HasSubstr("model name")) << name;
  }
}

TEST_P(ModelConfigRpcTest, VersionThatIsNoIntegerIsInvalidArgument) {
  inference::ModelConfigResponse response;
  for (const char* version : {"one", "-1", "1.5"}) {
    grpc::Status status = Call("mlp", version, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << version;
    EXPECT_THAT(status.error_message(), HasSubstr(version));
    // Every RPC that names a version judges it the same way (the registry parses it).
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    inference::ModelMetadataRequest metadata;
    metadata.set_name("mlp");
    metadata.set_version(version);
    inference::ModelMetadataResponse answer;
    EXPECT_EQ(stub_->ModelMetadata(&ctx, metadata, &answer).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << version;
  }
}

INSTANTIATE_TEST_SUITE_P(InferApis, ModelConfigRpcTest, ::testing::Values(0, 2), testing::InferApiName);

// host_policy is reported as configured, as Triton does, whichever --host-policy pins the workers:
// a KIND_AUTO group pinned by the device default (--host-policy cpu) still says "", so a config
// copied from the answer loads on a server started without that policy.
TEST(ModelConfigHostPolicyTest, HostPolicyIsReportedAsConfigured) {
  testing::TempDir repo("cs_model_config_policy");
  examples::ModelOptions grouped;
  grouped.max_batch_size = 4;
  grouped.instance_count = 2;  // the writer's group: 2 x KIND_AUTO, no host_policy
  // A second instance_group entry (a repeated field may be given again): one CPU worker pinned by "named".
  grouped.extra_config = "instance_group [ { kind: KIND_CPU host_policy: \"named\" } ]\n";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "grouped", grouped).ok());
  auto options = testing::TestServerOptions(repo.path());
  const std::string nice = std::to_string(std::min(CurrentThreadNice() + 2, 19));  // raising needs no privilege
  auto policies = server::ParseHostPolicies({"cpu,nice=" + nice, "named,nice=" + nice});
  ASSERT_TRUE(policies.ok()) << policies.status();
  options.host_policies = *policies;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  inference::ModelConfigResponse response;
  grpc::Status status = CallModelConfig(*stub, "grouped", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::ModelConfig& c = response.config();
  ASSERT_EQ(c.instance_group_size(), 2);
  const pb::ModelInstanceGroup& automatic = c.instance_group(0);
  EXPECT_EQ(automatic.name(), "grouped_0");
  EXPECT_EQ(automatic.count(), 2);
  ExpectAutoGroupWhereItLanded(automatic);
  EXPECT_EQ(automatic.host_policy(), "") << "not the default policy (cpu / gpu_<id>) that pins its workers";
  EXPECT_EQ(c.instance_group(1).name(), "grouped_1");
  EXPECT_EQ(c.instance_group(1).kind(), pb::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(1).count(), 1);
  EXPECT_EQ(c.instance_group(1).host_policy(), "named");
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
