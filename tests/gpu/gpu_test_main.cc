// gtest main for the GPU suite: on a crash, prints the faulting address, the instruction pointer,
// the top of the stack and the mappings they fall in, since the device machine is reachable only
// through one-shot commands and a bare "SegFault" says nothing.
#include <execinfo.h>
#include <gtest/gtest.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace {
void PrintMapping(const char* what, uintptr_t addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0, offset = 0;
    char perms[8] = {0};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx", &lo, &hi, perms, &offset) == 4 && addr >= lo && addr < hi) {
      std::fprintf(stderr, "  %s 0x%lx = %s (+0x%lx)\n", what, addr, line.c_str(), addr - lo + offset);
      return;
    }
  }
  std::fprintf(stderr, "  %s 0x%lx is unmapped\n", what, addr);
}

void OnFatal(int sig, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  const uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP];
  const auto* rsp = reinterpret_cast<const uintptr_t*>(uc->uc_mcontext.gregs[REG_RSP]);
  std::fprintf(stderr, "\n*** signal %d at address %p\n", sig, info->si_addr);
  PrintMapping("rip", rip);
  for (int i = 0; i < 24; ++i) PrintMapping("stack word", rsp[i]);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_sigaction = OnFatal;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGABRT, &action, nullptr);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
