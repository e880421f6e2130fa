// OtlpFileExporter: writes spans to a file as OTLP/JSON lines, the format of OpenTelemetry's file
// exporter and of the collector's `otlpjsonfile` receiver: one ExportTraceServiceRequest a line, in
// the OTLP/JSON encoding (lowerCamelCase field names, trace and span ids as lower-case hex, enums as
// integers, 64-bit integers as decimal strings). The file is opened for appending at Create, so a
// restart adds to it; each Export appends its lines with one write and returns once the kernel has
// them (no fsync). A failed write (a full disk) fails that Export: its spans are counted as dropped
// by the processor, and later exports try again. A write that failed part way is cut back off the
// file; where it cannot be (another process appended since), and where the file was found ending
// inside a line (a server killed mid-write), the next line starts on a line of its own, so one torn
// line never takes a whole line with it. Owned by the BatchSpanProcessor; Export runs on its
// export thread.
#ifndef CHRONOSERVE_COMMON_OTLP_OTLP_FILE_EXPORTER_H_
#define CHRONOSERVE_COMMON_OTLP_OTLP_FILE_EXPORTER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/otlp/otlp_encoder.h"
#include "common/otlp/span_exporter.h"

namespace chronoserve::otlp {

// `request` in the OTLP/JSON encoding, on one line (no newline at the end).
std::string OtlpJsonLine(const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request);

class OtlpFileExporter final : public SpanExporter {
 public:
  // Opens (creates, mode 0644 before the umask) `path` for appending. An error names the path and
  // why (a missing directory, no permission, a directory in its place). `regular_only` (a file a
  // client named): a link in the path's last part, or anything but a regular file there (a pipe, a
  // device), is refused, and opening never blocks. A pipe or device the operator named
  // (--trace-file /dev/stdout) is written without blocking: a reader that stops reading makes an
  // Export fail at its deadline, or at once at Shutdown, instead of holding the export thread.
  static absl::StatusOr<std::unique_ptr<OtlpFileExporter>> Create(const std::string& path,
                                                                 const OtlpResource& resource,
                                                                 bool regular_only = false);
  ~OtlpFileExporter() override;

  absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time deadline) override;
  // Later Exports fail at once, and one waiting for a pipe to take its line gives up within
  // kShutdownPollMs; the file is closed at destruction.
  void Shutdown() override;

  static constexpr int kShutdownPollMs = 50;

 private:
  OtlpFileExporter(std::string path, int fd, const OtlpResource& resource, bool torn);

  const std::string path_;
  const int fd_;
  const OtlpResource resource_;
  std::atomic<bool> shut_down_{false};
  bool torn_;  // the file ends inside a line (only the export thread reads and writes it)
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_OTLP_FILE_EXPORTER_H_
