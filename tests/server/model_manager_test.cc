// PlaceInstances: where a model's workers run, from its instance groups and the visible GPUs.
#include "server/model_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace chronoserve::server {
namespace {

ModelSpec WithGroups(std::vector<InstanceGroupSpec> groups) {
  ModelSpec spec;
  spec.name = "m";
  spec.instance_groups = std::move(groups);
  return spec;
}

std::vector<int> Gpus(const std::vector<DevicePlacement>& placements) {
  std::vector<int> gpus;
  for (const DevicePlacement& p : placements) gpus.push_back(p.gpu);
  return gpus;
}

TEST(PlaceInstancesTest, GroupsBecomeWorkersOnTheirDevices) {
  InstanceGroupSpec cpu{InstanceKind::kCpu, 3, {}, ""};
  auto placed = PlaceInstances(WithGroups({cpu}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{-1, -1, -1}));

  InstanceGroupSpec automatic{InstanceKind::kAuto, 2, {}, ""};
  placed = PlaceInstances(WithGroups({automatic}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{0, 0, 1, 1})) << "count workers on every visible GPU";
  placed = PlaceInstances(WithGroups({automatic}), 0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{-1, -1})) << "KIND_AUTO without a GPU runs on the CPU";

  InstanceGroupSpec listed{InstanceKind::kGpu, 1, {1}, ""};
  placed = PlaceInstances(WithGroups({listed}), 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(Gpus(*placed), (std::vector<int>{1}));
}

TEST(PlaceInstancesTest, RefusesWhatCannotBePlacedNamingTheModel) {
  InstanceGroupSpec gpu{InstanceKind::kGpu, 1, {}, ""};
  auto placed = PlaceInstances(WithGroups({gpu}), 0);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("model 'm': instance_group asks for KIND_GPU"));

  InstanceGroupSpec missing{InstanceKind::kGpu, 1, {3}, ""};
  placed = PlaceInstances(WithGroups({missing}), 2);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("lists GPU 3 but only 2 GPU(s)"));

  // Each group passes the loader's 256, but together they ask for 5 x 256 workers.
  InstanceGroupSpec big{InstanceKind::kCpu, 256, {}, ""};
  placed = PlaceInstances(WithGroups({big, big, big, big, big}), 0);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(placed.status().message()),
              ::testing::HasSubstr("model 'm': its instance groups ask for 1280 workers; at most 1024 per model"));
  InstanceGroupSpec repeated{InstanceKind::kGpu, 256, {0, 0, 0, 0, 0}, ""};
  EXPECT_FALSE(PlaceInstances(WithGroups({repeated}), 1).ok()) << "a GPU listed five times";
  // Counted before anything is placed: 256 workers on a GPU listed 10^6 times (2.56e8 placements,
  // gigabytes) is refused at once, naming the count.
  InstanceGroupSpec flood{InstanceKind::kGpu, 256, std::vector<int>(1'000'000, 0), ""};
  placed = PlaceInstances(WithGroups({flood}), 1);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(std::string(placed.status().message()), ::testing::HasSubstr("ask for 256000000 workers"));
  EXPECT_TRUE(PlaceInstances(WithGroups({big, big, big, big}), 0).ok()) << "1024 is allowed";
}

}  // namespace
}  // namespace chronoserve::server
