#include "tests/telemetry/otlp_test_receiver.h"

#include "absl/strings/numbers.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace chronoserve::testing {
namespace {

std::string AsString(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::map<std::string, std::string> Flatten(const nlohmann::json& obj) {
  std::map<std::string, std::string> out;
  for (auto it = obj.begin(); it != obj.end(); ++it) out[it.key()] = AsString(it.value());
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OtlpTestReceiver>> OtlpTestReceiver::Start(int port, int fail_first, int fail_code,
                                                                          int reject_spans) {
  const std::string dir = CHRONOSERVE_OTLP_RECEIVER_DIR;
  if (!std::filesystem::exists(dir + "/node_modules/@opentelemetry/otlp-transformer")) {
    return absl::FailedPreconditionError(
        absl::StrCat("the OTLP test receiver's packages are missing: run `npm ci --prefix ", dir, "`"));
  }
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, in[1]);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string script = dir + "/receiver.js";
  std::vector<std::string> args = {"node", script, "--port", std::to_string(port), "--fail-first",
                                   std::to_string(fail_first), "--fail-code", std::to_string(fail_code),
                                   "--reject", std::to_string(reject_spans)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::unique_ptr<OtlpTestReceiver> r(new OtlpTestReceiver());
  const int rc = posix_spawnp(&r->pid_, "node", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  r->stdin_fd_ = in[1];
  r->stdout_fd_ = out[0];
  if (rc != 0) {
    r->pid_ = -1;
    return absl::FailedPreconditionError("cannot start `node` (is Node.js installed?)");
  }
  r->reader_ = std::thread([raw = r.get()] { raw->ReadLoop(); });
  absl::MutexLock lock(&r->mu_);
  auto ready = [raw = r.get()]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(raw->mu_) { return raw->listening_ || raw->eof_; };
  if (!r->mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(30)) || !r->listening_) {
    return absl::DeadlineExceededError("the OTLP test receiver did not start listening within 30 s");
  }
  return r;
}

OtlpTestReceiver::~OtlpTestReceiver() {
  if (stdin_fd_ >= 0) close(stdin_fd_);  // the receiver exits when its stdin closes
  if (pid_ > 0) {
    kill(pid_, SIGTERM);  // the child we started; it exits on SIGTERM (and on stdin EOF)
    // Never an unbounded wait: its stdout closes as it exits (the reader sees EOF); past 10 s, or if
    // it is not yet reapable then (an exit still under way), SIGKILL it and reap, as Subprocess does.
    bool closed;
    {
      absl::MutexLock lock(&mu_);
      closed = mu_.AwaitWithTimeout(absl::Condition(&eof_), absl::Seconds(10));
    }
    if (!closed || waitpid(pid_, nullptr, WNOHANG) != pid_) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (reader_.joinable()) reader_.join();
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

void OtlpTestReceiver::ReadLoop() {
  std::string buffer;
  char chunk[65536];
  while (true) {
    const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      HandleLine(buffer.substr(0, newline));
      buffer.erase(0, newline + 1);
    }
  }
  absl::MutexLock lock(&mu_);
  eof_ = true;
}

void OtlpTestReceiver::HandleLine(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  const std::string type = j.value("type", "");
  absl::MutexLock lock(&mu_);
  if (type == "listening") {
    port_ = j.value("port", 0);
    listening_ = true;
  } else if (type == "export") {
    ++exports_;
    export_metadata_.push_back(j.contains("metadata") ? Flatten(j["metadata"]) : std::map<std::string, std::string>{});
  } else if (type == "span") {
    ReceivedSpan s;
    s.trace_id = j.value("traceId", "");
    s.span_id = j.value("spanId", "");
    s.parent_span_id = j.value("parentSpanId", "");
    s.trace_state = j.value("traceState", "");
    s.name = j.value("name", "");
    s.kind = j.value("kind", 0);
    s.status = j.value("status", 0);
    s.flags = j.value("flags", 0u);
    // Decimal strings; anything else (a codec quirk) is recorded as -1 for the test to see.
    if (!absl::SimpleAtoi(j.value("startNs", "0"), &s.start_ns)) s.start_ns = -1;
    if (!absl::SimpleAtoi(j.value("endNs", "0"), &s.end_ns)) s.end_ns = -1;
    s.attributes = Flatten(j["attributes"]);
    s.resource = Flatten(j["resource"]);
    s.scope = j.value("scope", "");
    spans_.push_back(std::move(s));
  }
}

bool OtlpTestReceiver::WaitForSpans(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return spans_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

bool OtlpTestReceiver::WaitForExports(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exports_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::vector<ReceivedSpan> OtlpTestReceiver::spans() const {
  absl::MutexLock lock(&mu_);
  return spans_;
}

std::vector<std::map<std::string, std::string>> OtlpTestReceiver::export_metadata() const {
  absl::MutexLock lock(&mu_);
  return export_metadata_;
}

size_t OtlpTestReceiver::export_calls() const {
  absl::MutexLock lock(&mu_);
  return exports_;
}

}  // namespace chronoserve::testing
