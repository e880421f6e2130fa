// Triton's ModelConfig answer without a server: a model that is loading or failed, the config
// built from a ModelSpec (instance groups as resolved at load), and the field numbers Triton's
// model_config.proto / grpc_service.proto give the fields we send.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "proto/inference.grpc.pb.h"
#include "proto/model_config.pb.h"
#include "server/grpc/model_config_rpc.h"
#include "server/model_manager.h"
#include "server/scheduler/model_registry.h"

namespace chronoserve {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
namespace pb = ::chronoserve::config;

// As Triton: a model loading is UNAVAILABLE (worth retrying); one that failed to load is NOT_FOUND
// without a version (it has none to serve) and UNAVAILABLE for a named version; both say why.
TEST(ModelConfigAnswerTest, LoadingIsUnavailableAFailedModelNotFoundUnlessAVersionIsNamed) {
  server::ModelRegistry registry;
  registry.MarkLoading("slow");
  registry.MarkFailed("broken", absl::InvalidArgumentError("config.pbtxt:3: bad dims"));
  inference::ModelConfigRequest request;
  inference::ModelConfigResponse response;
  request.set_name("slow");
  absl::Status status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("slow"));
  request.set_name("broken");
  status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("model 'broken' failed to load: config.pbtxt:3: bad dims"));
  request.set_version("1");
  status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("bad dims"));
  request.set_version("one");
  status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "a bad version is a bad request: " << status;
  request.set_name("nope");
  status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "checked before the model is looked up: " << status;
  // A load the shutdown skipped or stopped is no load error: UNAVAILABLE, as the shutdown answers.
  registry.MarkFailed("skipped", absl::UnavailableError("not loaded: the server is shutting down"));
  request.set_name("skipped");
  request.clear_version();
  status = server::AnswerModelConfig(registry, request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("shutting down"));
}

TEST(ModelConfigFromSpecTest, CudaGraphsHostPolicyAndGpus) {
  server::ModelSpec spec;
  spec.name = "g";
  spec.platform = "pytorch_libtorch";
  spec.max_batch_size = 2;
  spec.cuda_graphs = true;
  server::InstanceGroupSpec group;
  group.name = "fast";  // a configured name is reported as it is
  group.kind = server::InstanceKind::kGpu;
  group.count = 3;
  group.gpus = {0, 1};
  group.host_policy = "gpu_0";
  spec.instance_groups = {group};
  const pb::ModelConfig c = server::ModelConfigFromSpec(spec);
  EXPECT_TRUE(c.optimization().cuda().graphs());
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), pb::ModelInstanceGroup::KIND_GPU);
  EXPECT_EQ(c.instance_group(0).count(), 3);
  EXPECT_THAT(c.instance_group(0).gpus(), ElementsAre(0, 1));
  EXPECT_EQ(c.instance_group(0).host_policy(), "gpu_0");
  EXPECT_EQ(c.instance_group(0).name(), "fast");
  EXPECT_FALSE(c.has_dynamic_batching());
}

// The groups as the ModelManager resolves them at load, on a machine with 3 GPUs and on one
// without (no GPU is needed: only the count is given), then reported: KIND_AUTO and KIND_GPU without
// gpus list the GPUs used; gpus listed stay as listed; count and host_policy as configured.
TEST(ModelConfigFromSpecTest, GroupsAreReportedAsResolvedAtLoad) {
  server::ModelSpec spec;
  spec.name = "placed";
  server::InstanceGroupSpec automatic;  // KIND_AUTO, 2 per GPU, no gpus
  automatic.count = 2;
  server::InstanceGroupSpec every;  // KIND_GPU without gpus: every visible GPU
  every.kind = server::InstanceKind::kGpu;
  every.host_policy = "gpu_1";
  server::InstanceGroupSpec listed;
  listed.kind = server::InstanceKind::kGpu;
  listed.gpus = {1, 1};  // listed twice: twice the workers on GPU 1
  listed.host_policy = "fast";
  server::InstanceGroupSpec cpu;
  cpu.kind = server::InstanceKind::kCpu;
  cpu.count = 3;
  spec.instance_groups = {automatic, every, listed, cpu};

  auto groups = server::ResolveInstanceGroups(spec, 3);
  ASSERT_TRUE(groups.ok()) << groups.status();
  server::ModelSpec loaded = spec;
  loaded.instance_groups = *groups;
  pb::ModelConfig c = server::ModelConfigFromSpec(loaded);
  ASSERT_EQ(c.instance_group_size(), 4);
  EXPECT_EQ(c.instance_group(0).kind(), pb::ModelInstanceGroup::KIND_GPU);
  EXPECT_THAT(c.instance_group(0).gpus(), ElementsAre(0, 1, 2));
  EXPECT_EQ(c.instance_group(0).count(), 2) << "per GPU, as configured";
  EXPECT_EQ(c.instance_group(0).host_policy(), "");
  EXPECT_EQ(c.instance_group(1).kind(), pb::ModelInstanceGroup::KIND_GPU);
  EXPECT_THAT(c.instance_group(1).gpus(), ElementsAre(0, 1, 2));
  EXPECT_EQ(c.instance_group(1).host_policy(), "gpu_1");
  EXPECT_EQ(c.instance_group(2).kind(), pb::ModelInstanceGroup::KIND_GPU);
  EXPECT_THAT(c.instance_group(2).gpus(), ElementsAre(1, 1));
  EXPECT_EQ(c.instance_group(2).host_policy(), "fast");
  EXPECT_EQ(c.instance_group(3).kind(), pb::ModelInstanceGroup::KIND_CPU);
  EXPECT_THAT(c.instance_group(3).gpus(), IsEmpty());
  EXPECT_EQ(c.instance_group(3).count(), 3);
  // The workers follow the same resolution: 2 x 3 GPUs, 3 GPUs, GPU 1 twice, 3 on the CPU.
  auto placed = server::PlaceInstances(spec, 3);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->size(), 6u + 3u + 2u + 3u);

  // Without a GPU, KIND_AUTO lands on the CPU (KIND_GPU groups could not load at all).
  spec.instance_groups = {automatic, cpu};
  groups = server::ResolveInstanceGroups(spec, 0);
  ASSERT_TRUE(groups.ok()) << groups.status();
  loaded.instance_groups = *groups;
  c = server::ModelConfigFromSpec(loaded);
  ASSERT_EQ(c.instance_group_size(), 2);
  EXPECT_EQ(c.instance_group(0).kind(), pb::ModelInstanceGroup::KIND_CPU);
  EXPECT_THAT(c.instance_group(0).gpus(), IsEmpty());
  EXPECT_EQ(c.instance_group(0).count(), 2);
  server::ModelSpec gpu_only = spec;
  gpu_only.instance_groups = {every};
  EXPECT_FALSE(server::ResolveInstanceGroups(gpu_only, 0).ok()) << "KIND_GPU without a GPU";
  // KIND_AUTO that names a GPU is a GPU group: refused without one (as Triton), never served on the
  // CPU and then reported as KIND_CPU with gpus, which no loader accepts.
  server::InstanceGroupSpec pinned;  // KIND_AUTO, gpus: [0]
  pinned.gpus = {0};
  server::ModelSpec auto_pinned = spec;
  auto_pinned.instance_groups = {pinned};
  auto refused = server::ResolveInstanceGroups(auto_pinned, 0);
  ASSERT_FALSE(refused.ok()) << "KIND_AUTO with gpus: [0] and no GPU";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model 'placed'"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("GPU(s) 0"));
  groups = server::ResolveInstanceGroups(auto_pinned, 2);
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_EQ((*groups)[0].kind, server::InstanceKind::kGpu);
  EXPECT_THAT((*groups)[0].gpus, ElementsAre(0));

  // A spec the ModelManager did not resolve (a runtime built elsewhere) is reported as configured.
  c = server::ModelConfigFromSpec(spec);
  EXPECT_EQ(c.instance_group(0).kind(), pb::ModelInstanceGroup::KIND_AUTO);
}

// Triton decodes the response with its own model_config.proto (package "inference"); the wire
// carries only field numbers. These are Triton's, from triton-inference-server/common
// protobuf/model_config.proto and protobuf/grpc_service.proto.
int Number(const google::protobuf::Descriptor* message, const char* field) {
  const auto* f = message->FindFieldByName(field);
  return f == nullptr ? -1 : f->number();
}

TEST(ModelConfigWireTest, FieldNumbersAreTritons) {
  EXPECT_EQ(Number(inference::ModelConfigRequest::descriptor(), "name"), 1);
  EXPECT_EQ(Number(inference::ModelConfigRequest::descriptor(), "version"), 2);
  EXPECT_EQ(Number(inference::ModelConfigResponse::descriptor(), "config"), 1);
  const auto* config = pb::ModelConfig::descriptor();
  EXPECT_EQ(Number(config, "name"), 1);
  EXPECT_EQ(Number(config, "platform"), 2);
  EXPECT_EQ(Number(config, "version_policy"), 3);
  EXPECT_EQ(Number(config, "max_batch_size"), 4);
  EXPECT_EQ(Number(config, "input"), 5);
  EXPECT_EQ(Number(config, "output"), 6);
  EXPECT_EQ(Number(config, "instance_group"), 7);
  EXPECT_EQ(Number(config, "default_model_filename"), 8);
  EXPECT_EQ(Number(config, "dynamic_batching"), 11);
  EXPECT_EQ(Number(config, "optimization"), 12);
  EXPECT_EQ(Number(config, "parameters"), 14);
  EXPECT_EQ(Number(config, "model_warmup"), 16);
  EXPECT_EQ(Number(config, "backend"), 17);
  EXPECT_EQ(Number(pb::ModelOptimizationPolicy::descriptor(), "cuda"), 3);
  EXPECT_EQ(Number(pb::ModelOptimizationPolicy::Cuda::descriptor(), "graphs"), 1);
  const auto* group = pb::ModelInstanceGroup::descriptor();
  EXPECT_EQ(Number(group, "name"), 1);
  EXPECT_EQ(Number(group, "count"), 2);
  EXPECT_EQ(Number(group, "gpus"), 3);
  EXPECT_EQ(Number(group, "kind"), 4);
  EXPECT_EQ(Number(group, "host_policy"), 9);
  EXPECT_EQ(Number(pb::ModelInput::descriptor(), "data_type"), 2);
  EXPECT_EQ(Number(pb::ModelInput::descriptor(), "dims"), 4);
  EXPECT_EQ(Number(pb::ModelOutput::descriptor(), "data_type"), 2);
  EXPECT_EQ(Number(pb::ModelOutput::descriptor(), "dims"), 3);
  const auto* batching = pb::ModelDynamicBatching::descriptor();
  EXPECT_EQ(Number(batching, "preferred_batch_size"), 1);
  EXPECT_EQ(Number(batching, "max_queue_delay_microseconds"), 2);
  EXPECT_EQ(Number(batching, "default_queue_policy"), 6);
  const auto* queue = pb::ModelQueuePolicy::descriptor();
  EXPECT_EQ(Number(queue, "timeout_action"), 1);
  EXPECT_EQ(Number(queue, "default_timeout_microseconds"), 2);
  EXPECT_EQ(Number(queue, "max_queue_size"), 4);
  const auto* warmup = pb::ModelWarmup::descriptor();
  EXPECT_EQ(Number(warmup, "batch_size"), 2);
  EXPECT_EQ(Number(warmup, "inputs"), 3);
  EXPECT_EQ(Number(warmup, "count"), 4);
  const auto* warmup_input = pb::ModelWarmup::Input::descriptor();
  EXPECT_EQ(Number(warmup_input, "data_type"), 1);
  EXPECT_EQ(Number(warmup_input, "dims"), 2);
  EXPECT_EQ(Number(warmup_input, "zero_data"), 3);
  EXPECT_EQ(Number(warmup_input, "random_data"), 4);
  EXPECT_EQ(pb::TYPE_FP32, 11);
  EXPECT_EQ(pb::TYPE_BF16, 14);
}

}  // namespace
}  // namespace chronoserve
