// WallMinusSteadyNs: the offset from readings that lay close together, taken again when a
// preemption came between them.
#include "common/clock.h"

#include <gtest/gtest.h>

#include <vector>

namespace chronoserve {
namespace {

// Steady readings from a script, one per call.
class ScriptedClock final : public Clock {
 public:
  explicit ScriptedClock(std::vector<int64_t> readings) : readings_(std::move(readings)) {}
  int64_t NowNs() const override { return readings_.at(next_++); }
  size_t taken() const { return next_; }

 private:
  std::vector<int64_t> readings_;
  mutable size_t next_ = 0;
};

// The wall clock 1'700'000'000 s after its epoch when the steady clock reads 0, and every call to it
// one further µs on.
struct ScriptedWall {
  int64_t operator()() { return kBase + 1'000 * calls++; }
  static constexpr int64_t kBase = 1'700'000'000'000'000'000;
  int calls = 0;
};

TEST(WallMinusSteadyTest, ReadingsCloseTogetherAreTakenOnce) {
  ScriptedClock steady({5'000'000, 5'000'800});  // 0.8 µs apart
  ScriptedWall wall;
  const int64_t offset = WallMinusSteadyNs(steady, [&] { return wall(); });
  EXPECT_EQ(steady.taken(), 2u);
  EXPECT_EQ(wall.calls, 1);
  EXPECT_EQ(offset, ScriptedWall::kBase - 5'000'400);  // the wall reading against the midpoint
}

TEST(WallMinusSteadyTest, ReadingsAPreemptionSplitAreTakenAgain) {
  // First try: 350 µs between the steady readings (preempted around the wall reading). Second: 1 µs.
  ScriptedClock steady({1'000'000, 1'350'000, 2'000'000, 2'001'000});
  ScriptedWall wall;
  const int64_t offset = WallMinusSteadyNs(steady, [&] { return wall(); });
  EXPECT_EQ(steady.taken(), 4u);
  EXPECT_EQ(wall.calls, 2);
  EXPECT_EQ(offset, ScriptedWall::kBase + 1'000 - 2'000'500);
}

TEST(WallMinusSteadyTest, AlwaysSplitKeepsTheClosestOfThreeTries) {
  ScriptedClock steady({0, 90'000, 100'000, 130'000, 200'000, 260'000});  // 90, 30 and 60 µs apart
  ScriptedWall wall;
  const int64_t offset = WallMinusSteadyNs(steady, [&] { return wall(); });
  EXPECT_EQ(steady.taken(), 6u);
  EXPECT_EQ(wall.calls, 3);
  EXPECT_EQ(offset, ScriptedWall::kBase + 1'000 - 115'000);  // the second try's
}

TEST(WallMinusSteadyTest, TheRealClocksGiveTheWallClocksReading) {
  const int64_t before = WallNowNs();
  const int64_t steady = SteadyClock::Now();
  const int64_t unix_ns = steady + WallMinusSteadyNs(*SteadyClock::Get(), WallNowNs);
  const int64_t after = WallNowNs();
  // Within the two wall readings, give or take a preemption's worth of the VM's scheduling.
  EXPECT_GE(unix_ns, before - 50'000'000);
  EXPECT_LE(unix_ns, after + 50'000'000);
}

}  // namespace
}  // namespace chronoserve
