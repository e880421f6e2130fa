#include "server/shutdown_signals.h"

#include <cstdlib>
#include <thread>

#include "common/log.h"
#include "server/server.h"

namespace chronoserve::server {

ShutdownSignals* ShutdownSignals::Watch(const sigset_t& signals) {
  auto* watcher = new ShutdownSignals;
  std::thread([watcher, signals] { watcher->Run(signals); }).detach();
  return watcher;
}

void ShutdownSignals::SetServer(Server* server) {
  absl::MutexLock lock(&mu_);
  server_ = server;
  if (server_ != nullptr && signalled_) server_->StopLoading();
}

void ShutdownSignals::Run(sigset_t signals) {
  int number = 0;
  // sigwait fails only for a set with an invalid signal in it, which ours never has.
  if (sigwait(&signals, &number) != 0) {
    CS_LOG(ERROR) << "cannot wait for SIGTERM/SIGINT; the server stops only when killed";
    return;
  }
  CS_LOG(INFO) << "received signal " << number
               << ": shutting down (a model still loading stops; the requests in flight are answered first); "
                  "a second SIGTERM/SIGINT exits at once";
  {
    absl::MutexLock lock(&mu_);
    signalled_ = true;
    if (server_ != nullptr) server_->StopLoading();
  }
  first_.Notify();
  if (sigwait(&signals, &number) != 0) return;
  CS_LOG(WARNING) << "received signal " << number << " again: exiting now, without answering the requests in flight";
  std::_Exit(128 + number);
}

}  // namespace chronoserve::server
