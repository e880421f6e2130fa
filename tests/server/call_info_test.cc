// What the dispatcher reads from a call besides its message: the deadline, from gRPC's timespec
// (system_clock nanoseconds overflow past the year 2262), and the W3C tracestate list.
#include <gtest/gtest.h>

#include "server/grpc/infer_dispatcher.h"

namespace chronoserve::server {
namespace {

gpr_timespec At(int64_t secs, int32_t nanos) {
  gpr_timespec t;
  t.tv_sec = secs;
  t.tv_nsec = nanos;
  t.clock_type = GPR_CLOCK_MONOTONIC;
  return t;
}

TEST(CallInfoTest, RemainingDeadlineFromGrpcsTimespec) {
  const gpr_timespec now = At(1'000, 250'000'000);
  EXPECT_EQ(RemainingDeadlineNs(At(1'002, 750'000'000), now), 2'500'000'000) << "2.5 s ahead";
  EXPECT_EQ(RemainingDeadlineNs(At(1'000, 250'000'001), now), 1);
  EXPECT_EQ(RemainingDeadlineNs(At(1'000, 250'000'000), now), 0) << "due now";
  EXPECT_EQ(RemainingDeadlineNs(At(999, 900'000'000), now), 0) << "passed: 0, not negative";
  EXPECT_EQ(RemainingDeadlineNs(gpr_inf_future(GPR_CLOCK_MONOTONIC), now), std::nullopt) << "infinite";
  const int64_t year = int64_t{365} * 86400;
  EXPECT_EQ(RemainingDeadlineNs(At(1'000 + 500 * year, 0), now), std::nullopt)
      << "500 years: no deadline (its nanoseconds since 1970 would not fit a system_clock time_point)";
  EXPECT_EQ(RemainingDeadlineNs(At(1'000 + 99 * year, 250'000'000), now), 99 * year * 1'000'000'000)
      << "99 years still counts";
}

TEST(CallInfoTest, SeveralTracestateHeadersAreOneList) {
  EXPECT_EQ(JoinTracestate({"congo=t61rcWkgMzE"}), "congo=t61rcWkgMzE");
  EXPECT_EQ(JoinTracestate({"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"}), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
}

}  // namespace
}  // namespace chronoserve::server
