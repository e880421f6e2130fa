// Subprocess: runs a program with its stdout+stderr captured by a reader thread, so tests can
// wait for a log line or for exit with a timeout that fails the test (never a sleep). Used to
// start the real chronoserve binary, chronobench itself and headless Chromium. Owned by one test
// thread; the reader thread is internal. The destructor terminates a still-running child.
#ifndef CHRONOSERVE_TESTS_CLIENT_SUBPROCESS_H_
#define CHRONOSERVE_TESTS_CLIENT_SUBPROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace chronoserve::testing {

class Subprocess {
 public:
  // `env`: "NAME=value" entries the child's environment has besides (or in place of) this
  // process's own; this process's environment is left as it is.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv,
                                                           const std::vector<std::string>& env = {});
  ~Subprocess();

  // Waits until the output contains `text`; DEADLINE_EXCEEDED (with the output so far) on
  // timeout, FAILED_PRECONDITION if the child exited first.
  absl::Status WaitForOutput(const std::string& text, absl::Duration timeout);
  // Waits for exit; the exit code (128+signal if killed), DEADLINE_EXCEEDED on timeout.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);
  std::string output() const;
  // Sends `signo` to the child itself (not its group), e.g. SIGTERM to test a graceful stop. For
  // SIGSTOP, returns once the child is stopped; after 10 s without that it fails the test and returns.
  void Signal(int signo);

 private:
  Subprocess(pid_t pid, int fd);
  void ReadLoop();

  pid_t pid_;
  int fd_;
  // Set by the destructor when the child was killed and its output still had not ended: a process
  // that left the child's group holds the pipe open, so the reader stops waiting for its end.
  std::atomic<bool> abandon_output_{false};
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::string output_ ABSL_GUARDED_BY(mu_);
  std::optional<int> exit_code_ ABSL_GUARDED_BY(mu_);
};

// Runs to completion within `timeout` (with `env` as Subprocess::Start's); returns {exit code, output}.
absl::StatusOr<std::pair<int, std::string>> RunProgram(const std::vector<std::string>& argv, absl::Duration timeout,
                                                       const std::vector<std::string>& env = {});

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_SUBPROCESS_H_
