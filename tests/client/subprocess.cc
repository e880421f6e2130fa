#include "tests/client/subprocess.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace chronoserve::testing {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv,
                                                              const std::vector<std::string>& env) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment, made before the fork (nothing but async-signal-safe calls after it):
  // this process's, less the names `env` sets, then `env`.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const absl::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& own : env) replaced |= absl::string_view(own).substr(0, own.find('=')) == name;
    if (!replaced) envp.push_back(*e);
  }
  for (const std::string& own : env) envp.push_back(const_cast<char*>(own.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so helpers it starts (Chromium's) are stopped with it
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  return std::unique_ptr<Subprocess>(new Subprocess(pid, fds[0]));
}

Subprocess::Subprocess(pid_t pid, int fd) : pid_(pid), fd_(fd) {
  reader_ = std::thread([this] { ReadLoop(); });
}

Subprocess::~Subprocess() {
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = !exit_code_.has_value();
  }
  if (running) {
    kill(-pid_, SIGTERM);
    if (!WaitForExit(absl::Seconds(20)).ok()) {
      kill(-pid_, SIGKILL);
      if (!WaitForExit(absl::Seconds(20)).ok()) {
        ADD_FAILURE() << "pid " << pid_ << " killed, but its output had not ended 20 s later: a process "
                      << "outside its group holds the pipe; no longer read";
        abandon_output_.store(true);
      }
    }
  }
  reader_.join();
  close(fd_);
}

void Subprocess::ReadLoop() {
  char buf[4096];
  while (true) {
    // Polled, so that the destructor can end a wait for output that will never end, or that a
    // process outside the child's group keeps writing.
    if (abandon_output_.load()) break;
    pollfd readable{fd_, POLLIN, 0};
    const int ready = poll(&readable, 1, /*timeout_ms=*/100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mu_);
    output_.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  absl::MutexLock lock(&mu_);
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::Status Subprocess::WaitForOutput(const std::string& text, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto seen = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return output_.find(text) != std::string::npos || exit_code_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  if (output_.find(text) != std::string::npos) return absl::OkStatus();
  if (exit_code_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("exited (", *exit_code_, ") before printing '", text, "':\n", output_));
  }
  return absl::DeadlineExceededError(absl::StrCat("no '", text, "' within ", absl::FormatDuration(timeout), ":\n", output_));
}

absl::StatusOr<int> Subprocess::WaitForExit(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto exited = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return exit_code_.has_value(); };
  mu_.AwaitWithTimeout(absl::Condition(&exited), timeout);
  if (!exit_code_.has_value()) {
    return absl::DeadlineExceededError(absl::StrCat("still running after ", absl::FormatDuration(timeout), ":\n", output_));
  }
  return *exit_code_;
}

std::string Subprocess::output() const {
  absl::MutexLock lock(&mu_);
  return output_;
}

void Subprocess::Signal(int signo) {
  {
    absl::MutexLock lock(&mu_);
    if (exit_code_.has_value()) return;
    kill(pid_, signo);  // not reaped yet, so the pid is still ours
  }
  if (signo != SIGSTOP) return;
  // kill() returns before the child's threads have stopped: a request sent at once could still be
  // answered. Wait (bounded) until /proc says stopped ('T').
  const std::string stat_path = absl::StrCat("/proc/", pid_, "/stat");
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    std::ifstream stat(stat_path);
    std::string line;
    if (!std::getline(stat, line)) return;  // gone
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') return;
    std::this_thread::yield();
  }
  ADD_FAILURE() << "pid " << pid_ << " was sent SIGSTOP but /proc did not show it stopped within 10 s";
}

absl::StatusOr<std::pair<int, std::string>> RunProgram(const std::vector<std::string>& argv, absl::Duration timeout,
                                                       const std::vector<std::string>& env) {
  auto process = Subprocess::Start(argv, env);
  if (!process.ok()) return process.status();
  auto code = (*process)->WaitForExit(timeout);
  if (!code.ok()) return code.status();
  return std::make_pair(*code, (*process)->output());
}

}  // namespace chronoserve::testing
