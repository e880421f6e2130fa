// SwitchableExporter (TraceSetting's trace_file): exports go to the destination current when they
// start; Replace shuts the one before down; with none an export fails; after Shutdown a destination
// put in is shut down at once.
#include "server/telemetry/switchable_exporter.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/time/clock.h"

namespace chronoserve::server::telemetry {
namespace {

// Counts the spans it was handed and whether it was shut down.
struct Counts {
  size_t spans = 0;
  bool shut_down = false;
};
class CountingExporter final : public otlp::SpanExporter {
 public:
  explicit CountingExporter(Counts* counts) : counts_(counts) {}
  absl::StatusOr<otlp::ExportResult> Export(const std::vector<otlp::SpanData>& spans, absl::Time) override {
    counts_->spans += spans.size();
    return otlp::ExportResult{};
  }
  void Shutdown() override { counts_->shut_down = true; }

 private:
  Counts* const counts_;
};

TEST(SwitchableExporterTest, ExportsGoToTheCurrentDestinationAndTheOneBeforeIsShutDown) {
  const std::vector<otlp::SpanData> three(3);
  SwitchableExporter exporter;
  const auto none = exporter.Export(three, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition) << "no destination yet";

  Counts first, second, late;
  exporter.Replace(std::make_unique<CountingExporter>(&first));
  ASSERT_TRUE(exporter.Export(three, absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(first.spans, 3u);
  exporter.Replace(std::make_unique<CountingExporter>(&second));
  EXPECT_TRUE(first.shut_down) << "the file before is closed";
  ASSERT_TRUE(exporter.Export(three, absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(first.spans, 3u);
  EXPECT_EQ(second.spans, 3u);
  EXPECT_FALSE(second.shut_down);

  exporter.Shutdown();
  EXPECT_TRUE(second.shut_down);
  exporter.Replace(std::make_unique<CountingExporter>(&late));
  EXPECT_TRUE(late.shut_down) << "a destination put in after Shutdown is shut down too";
}

}  // namespace
}  // namespace chronoserve::server::telemetry
