// gtest main for the GPU suite: prints a backtrace on a crash, since the device machine is only
// reachable through one-shot commands and a bare "SegFault" says nothing.
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

namespace {
void PrintBacktrace(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "\n*** fatal signal; backtrace:\n";
  (void)!write(STDERR_FILENO, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  signal(SIGSEGV, PrintBacktrace);
  signal(SIGABRT, PrintBacktrace);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
