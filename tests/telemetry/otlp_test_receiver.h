// OtlpTestReceiver: runs tests/telemetry/otlp_receiver/receiver.js (node, @grpc/grpc-js and the
// OpenTelemetry JS protobuf codec: code nobody in chronoserve wrote) as a child process and
// collects the spans it decodes. A reader thread parses its JSON lines; tests wait with timeouts.
// Needs `npm ci --prefix tests/telemetry/otlp_receiver` to have run (the constructor's status
// says so otherwise).
#ifndef CHRONOSERVE_TESTS_TELEMETRY_OTLP_TEST_RECEIVER_H_
#define CHRONOSERVE_TESTS_TELEMETRY_OTLP_TEST_RECEIVER_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace chronoserve::testing {

struct ReceivedSpan {
  std::string trace_id, span_id, parent_span_id, trace_state, name;
  int kind = 0;
  int status = 0;
  uint32_t flags = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::map<std::string, std::string> attributes;  // values as strings (ints decimal, bools true/false)
  std::map<std::string, std::string> resource;
  std::string scope;
};

class OtlpTestReceiver {
 public:
  // Starts the receiver on 127.0.0.1 (`port` 0 = any); with `fail_first` > 0 the first calls
  // are answered with gRPC `fail_code`; with `reject_spans` > 0 calls answered OK report that many
  // of their spans (at most all) rejected, as an OTLP partial success.
  static absl::StatusOr<std::unique_ptr<OtlpTestReceiver>> Start(int port = 0, int fail_first = 0,
                                                                 int fail_code = 14, int reject_spans = 0);
  ~OtlpTestReceiver();

  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // Waits until at least `n` spans arrived; false on timeout.
  bool WaitForSpans(size_t n, absl::Duration timeout);
  // Waits until at least `n` Export calls were answered (any outcome); false on timeout.
  bool WaitForExports(size_t n, absl::Duration timeout);
  std::vector<ReceivedSpan> spans() const;
  size_t export_calls() const;
  // The request metadata (headers) of each answered Export call, in order.
  std::vector<std::map<std::string, std::string>> export_metadata() const;

 private:
  OtlpTestReceiver() = default;
  void ReadLoop();
  void HandleLine(const std::string& line);

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::thread reader_;
  mutable absl::Mutex mu_;
  int port_ = 0;
  bool listening_ ABSL_GUARDED_BY(mu_) = false;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ReceivedSpan> spans_ ABSL_GUARDED_BY(mu_);
  size_t exports_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::map<std::string, std::string>> export_metadata_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_TELEMETRY_OTLP_TEST_RECEIVER_H_
