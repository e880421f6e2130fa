// ShutdownSignals: takes SIGTERM/SIGINT on a thread of its own, from before the models load to the
// process's exit. The first signal stops a Start still loading models (Server::StopLoading) and
// wakes WaitForFirst, after which main drains with Server::Shutdown; a second one, during loading
// or the drain, ends the process at once with exit code 128 + the signal, as an operator who sends
// it twice expects. Owned by nobody: the watcher is detached and never destroyed, so the process
// may exit while it waits.
//
//   ShutdownSignals* signals = ShutdownSignals::Watch(mask);  // mask blocked in every thread
//   signals->SetServer(server);   // before server->Start()
//   signals->WaitForFirst();  server->Shutdown();
#ifndef CHRONOSERVE_SERVER_SHUTDOWN_SIGNALS_H_
#define CHRONOSERVE_SERVER_SHUTDOWN_SIGNALS_H_

#include <signal.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace chronoserve::server {

class Server;

class ShutdownSignals {
 public:
  // Starts the watcher for `signals`, which the caller has blocked in every thread
  // (pthread_sigmask before any thread starts) so that only the watcher's sigwait takes them.
  static ShutdownSignals* Watch(const sigset_t& signals);

  // The server whose loading the first signal stops; null before that server is destroyed. When
  // the first signal came before, the server is told at once.
  void SetServer(Server* server);
  void WaitForFirst() { first_.WaitForNotification(); }

 private:
  ShutdownSignals() = default;
  void Run(sigset_t signals);

  absl::Notification first_;
  absl::Mutex mu_;
  Server* server_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool signalled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHUTDOWN_SIGNALS_H_
