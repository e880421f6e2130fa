// Exact device timing without a GPU: the config parameter, and which batches the worker holds (a
// shape only after its first runs; nothing once disabled). The hold itself is in the GPU suite.
#include "server/backend/exact_device_timing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;

ModelSpec WithParameter(const char* value) {
  ModelSpec spec;
  spec.name = "policy";
  if (value != nullptr) spec.parameters[kExactDeviceTimingKey] = value;
  return spec;
}

TEST(ExactDeviceTimingConfigTest, OffUnlessAskedFor) {
  auto absent = ExactDeviceTimingFromSpec(WithParameter(nullptr));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(*absent);
  for (const char* yes : {"true", "TRUE", " True ", "1"}) {
    auto on = ExactDeviceTimingFromSpec(WithParameter(yes));
    ASSERT_TRUE(on.ok()) << yes << ": " << on.status();
    EXPECT_TRUE(*on) << yes;
  }
  for (const char* no : {"false", "False", "0"}) {
    auto off = ExactDeviceTimingFromSpec(WithParameter(no));
    ASSERT_TRUE(off.ok()) << no << ": " << off.status();
    EXPECT_FALSE(*off) << no;
  }
}

TEST(ExactDeviceTimingConfigTest, BadValueNamesModelKeyAndValue) {
  for (const char* bad : {"yes please", "", "2"}) {
    auto parsed = ExactDeviceTimingFromSpec(WithParameter(bad));
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("model 'policy'"));
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("exact_device_timing"));
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(std::string("\"") + bad + "\""));
  }
}

TEST(HoldScheduleTest, EachShapeIsHeldOnlyAfterItsFirstRuns) {
  HoldSchedule holds(true);
  for (int run = 0; run < HoldSchedule::kUnheldRuns; ++run) {
    EXPECT_FALSE(holds.ShouldHold(-1, 8, 1024)) << "eager batch of 8, run " << run;
  }
  EXPECT_TRUE(holds.ShouldHold(-1, 8, 1024));
  EXPECT_TRUE(holds.ShouldHold(-1, 8, 1024));
  // Another batch size, another input size (variable dims), a graph replay: new shapes.
  EXPECT_FALSE(holds.ShouldHold(-1, 4, 512));
  EXPECT_FALSE(holds.ShouldHold(-1, 8, 2048));
  EXPECT_FALSE(holds.ShouldHold(8, 8, 1024));
  EXPECT_FALSE(holds.ShouldHold(8, 8, 1024));
  EXPECT_TRUE(holds.ShouldHold(8, 8, 1024));
}

TEST(HoldScheduleTest, TracksABoundedNumberOfShapes) {
  HoldSchedule holds(true);
  for (size_t shape = 0; shape < HoldSchedule::kMaxShapes; ++shape) holds.ShouldHold(-1, 1, shape);
  for (int run = 0; run < 2 * HoldSchedule::kUnheldRuns; ++run) {
    EXPECT_FALSE(holds.ShouldHold(-1, 1, HoldSchedule::kMaxShapes)) << "one shape too many: never held";
  }
  for (int run = 1; run < HoldSchedule::kUnheldRuns; ++run) holds.ShouldHold(-1, 1, 0);
  EXPECT_TRUE(holds.ShouldHold(-1, 1, 0)) << "tracked shapes still are";
}

TEST(HoldScheduleTest, DisabledHoldsNothing) {
  HoldSchedule off(false);
  for (int run = 0; run < 5; ++run) EXPECT_FALSE(off.ShouldHold(-1, 1, 16));
  HoldSchedule on(true);
  for (int run = 0; run < HoldSchedule::kUnheldRuns; ++run) on.ShouldHold(-1, 1, 16);
  ASSERT_TRUE(on.ShouldHold(-1, 1, 16));
  on.Disable();
  EXPECT_FALSE(on.enabled());
  EXPECT_FALSE(on.ShouldHold(-1, 1, 16)) << "after the watchdog had to break a hold";
}

TEST(HoldScheduleTest, ABrokenHoldSendsItsShapeBackToUnheldRunsAndRepeatedBreaksStopHolding) {
  HoldSchedule holds(true);
  auto qualify = [&holds](int64_t items) {
    for (int run = 0; run < HoldSchedule::kUnheldRuns; ++run) {
      EXPECT_FALSE(holds.ShouldHold(-1, items, 64)) << "items " << items << ", unheld run " << run;
    }
    return holds.ShouldHold(-1, items, 64);
  };
  ASSERT_TRUE(qualify(1));
  ASSERT_TRUE(qualify(2));
  ASSERT_TRUE(holds.ShouldHold(-1, 1, 64));  // the last held shape is batch 1
  for (int b = 1; b < HoldSchedule::kMaxBreaks; ++b) {
    EXPECT_TRUE(holds.Broke()) << "break " << b << " keeps holding on";
    EXPECT_TRUE(holds.ShouldHold(-1, 2, 64)) << "other shapes stay held";
    EXPECT_TRUE(qualify(1)) << "the broken shape is held again after its unheld runs";
  }
  EXPECT_FALSE(holds.Broke()) << "the last allowed break turns holding off";
  EXPECT_FALSE(holds.enabled());
  EXPECT_FALSE(holds.ShouldHold(-1, 2, 64));
}

}  // namespace
}  // namespace chronoserve::server
