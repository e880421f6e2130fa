// bench_grpc_floor: the round trip that no inference request can beat on this host, so that the
// e2e - GPU spans figure of bench_serve_latency can be read against it. For every --url given
// (host:port or unix:PATH of a running chronoserve): ServerLive, the emptiest KServe call, closed
// loop at concurrency 1, back to back and after --idle-gap-ms gaps. With --raw-sockets also a
// 64-byte ping-pong between two threads of this process over TCP loopback and over a Unix socket
// pair, without gRPC: the kernel's and the host's share of the round trip. With --raw-spin the
// ping-pong runs twice more: with the echo thread polling its socket instead of sleeping in read(),
// and with both threads never sleeping (the measuring one busy-waits through the idle gap too), so
// what an idle gap costs without waking any thread shows beside what it costs with. Prints
// p50/p90/p99 in µs and writes JSON.
//
//   bench_grpc_floor -u 127.0.0.1:8001 -u unix:/tmp/chronoserve.sock --raw-sockets --raw-spin --json floor.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "benchmarks/percentile.h"
#include "client/inference_client.h"
#include "common/cli_integer.h"
#include "common/clock.h"

namespace {

using chronoserve::bench::PercentileUs;

struct Series {
  std::string path;  // what was measured
  std::string mode;  // back_to_back | idle_<N>ms
  std::vector<int64_t> ns;
};

// Runs `round_trip` `warmup` times unmeasured, then `n` times back to back, then `idle_n` times each
// after `idle_gap_ms` of sleep (of a busy wait with `spin_gap`). A failed round trip ends the run
// with an error.
bool Measure(const std::string& path, const std::function<bool()>& round_trip, int warmup, int n, int idle_n,
             int idle_gap_ms, std::vector<Series>* out, bool spin_gap = false) {
  for (int i = 0; i < warmup; ++i) {
    if (!round_trip()) return false;
  }
  Series b2b{path, "back_to_back", {}};
  for (int i = 0; i < n; ++i) {
    const int64_t t0 = chronoserve::SteadyClock::Now();
    if (!round_trip()) return false;
    b2b.ns.push_back(chronoserve::SteadyClock::Now() - t0);
  }
  out->push_back(std::move(b2b));
  if (idle_n > 0 && idle_gap_ms > 0) {
    Series idle{path, "idle_" + std::to_string(idle_gap_ms) + "ms", {}};
    for (int i = 0; i < idle_n; ++i) {
      if (spin_gap) {
        const int64_t until = chronoserve::SteadyClock::Now() + int64_t{idle_gap_ms} * 1000000;
        while (chronoserve::SteadyClock::Now() < until) {
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(idle_gap_ms));
      }
      const int64_t t0 = chronoserve::SteadyClock::Now();
      if (!round_trip()) return false;
      idle.ns.push_back(chronoserve::SteadyClock::Now() - t0);
    }
    out->push_back(std::move(idle));
  }
  return true;
}

// A connected pair of stream sockets: TCP over 127.0.0.1 (Nagle off) or a Unix socket pair.
bool SocketPair(bool tcp, int fds[2]) {
  if (!tcp) return socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return false;
  }
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fds[0], reinterpret_cast<sockaddr*>(&addr), len) != 0) return false;
  fds[1] = accept(listener, nullptr, nullptr);
  close(listener);
  const int one = 1;
  setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fds[1] >= 0;
}

// Reads n bytes: blocked in read(), or with `spin` polling without ever sleeping.
bool ReadFull(int fd, char* buf, size_t n, bool spin = false) {
  while (n > 0) {
    const ssize_t r = spin ? recv(fd, buf, n, MSG_DONTWAIT) : read(fd, buf, n);
    if (spin && r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Who never sleeps in a raw ping-pong: nobody (both block in read()), the echo thread (it polls
// its socket without blocking, as a server that spins would), or both threads (the measuring one
// also busy-waits through the idle gap and polls for the answer).
enum class Spin { kNone, kEcho, kBoth };

const char* SpinSuffix(Spin spin) {
  return spin == Spin::kNone ? "" : spin == Spin::kEcho ? ", echo spins" : ", both spin";
}

// 64 bytes there and back between this thread and an echo thread.
bool RawSockets(bool tcp, Spin spin, int warmup, int n, int idle_n, int idle_gap_ms, std::vector<Series>* out) {
  int fds[2];
  if (!SocketPair(tcp, fds)) return false;
  std::thread echo([fd = fds[1], spin] {
    char buf[64];
    while (ReadFull(fd, buf, sizeof(buf), spin != Spin::kNone) && write(fd, buf, sizeof(buf)) == sizeof(buf)) {
    }
  });
  char msg[64];
  for (size_t i = 0; i < sizeof(msg); ++i) msg[i] = static_cast<char>('a' + i % 26);
  const bool both = spin == Spin::kBoth;
  const bool ok = Measure(std::string(tcp ? "raw TCP loopback" : "raw Unix socket pair") + SpinSuffix(spin),
                          [&] {
                            char back[64];
                            return write(fds[0], msg, sizeof(msg)) == sizeof(msg) &&
                                   ReadFull(fds[0], back, sizeof(back), both);
                          },
                          warmup, n, idle_n, idle_gap_ms, out, both);
  shutdown(fds[0], SHUT_RDWR);
  echo.join();
  close(fds[0]);
  close(fds[1]);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_grpc_floor: ServerLive round trips (and raw socket ping-pong): the transport floor"};
  std::vector<std::string> urls;
  int requests = 2000, warmup = 200, idle_requests = 20, idle_gap_ms = 1000;
  bool raw = false, raw_spin = false;
  std::string json_path;
  app.add_option("-u,--url", urls, "host:port or unix:PATH of a running chronoserve (repeatable)");
  app.add_option("-n,--requests", requests, "Measured round trips back to back")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--warmup-requests", warmup, "Unmeasured round trips first")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 100000000));
  app.add_option("--idle-requests", idle_requests, "Round trips after an idle gap (0 = none)")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 100000000));
  app.add_option("--idle-gap-ms", idle_gap_ms, "Idle gap before each of those")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 3600000));
  app.add_flag("--raw-sockets", raw, "Also a 64-byte ping-pong between two threads, TCP loopback and Unix socket pair");
  app.add_flag("--raw-spin", raw_spin,
               "With --raw-sockets, also the ping-pongs with the echo thread polling without sleeping, and with "
               "both threads never sleeping (busy-waiting through the idle gap): what is left of an idle gap's "
               "cost when no thread has to be woken");
  app.add_option("--json", json_path, "Write the figures here");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  if (urls.empty() && !raw) {
    std::fprintf(stderr, "give --url and/or --raw-sockets\n");
    return 2;
  }
  std::vector<Series> series;
  for (const std::string& url : urls) {
    auto client = chronoserve::client::InferenceClient::Connect(url);
    auto live = client->ServerLive();
    if (!live.ok() || !*live) {
      std::fprintf(stderr, "%s: ServerLive failed: %s\n", url.c_str(),
                   live.ok() ? "not live" : std::string(live.status().message()).c_str());
      return 1;
    }
    if (!Measure("gRPC ServerLive " + url, [&] { return client->ServerLive().ok(); }, warmup, requests,
                 idle_requests, idle_gap_ms, &series)) {
      std::fprintf(stderr, "%s: a ServerLive call failed\n", url.c_str());
      return 1;
    }
  }
  if (raw) {
    for (bool tcp : {true, false}) {
      for (Spin spin : {Spin::kNone, Spin::kEcho, Spin::kBoth}) {
        if (spin != Spin::kNone && !raw_spin) continue;
        if (!RawSockets(tcp, spin, warmup, requests, idle_requests, idle_gap_ms, &series)) {
          std::fprintf(stderr, "raw %s ping-pong%s failed\n", tcp ? "TCP" : "Unix", SpinSuffix(spin));
          return 1;
        }
      }
    }
  }
  nlohmann::json record;
  record["series"] = nlohmann::json::array();
  std::printf("%-46s %-14s %7s %8s %8s %8s\n", "round trip", "mode", "n", "p50 us", "p90 us", "p99 us");
  for (const Series& s : series) {
    const double p50 = PercentileUs(s.ns, 50), p90 = PercentileUs(s.ns, 90), p99 = PercentileUs(s.ns, 99);
    std::printf("%-46s %-14s %7zu %8.1f %8.1f %8.1f\n", s.path.c_str(), s.mode.c_str(), s.ns.size(), p50, p90, p99);
    record["series"].push_back(
        {{"path", s.path}, {"mode", s.mode}, {"n", s.ns.size()}, {"p50_us", p50}, {"p90_us", p90}, {"p99_us", p99}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << record.dump(2) << "\n";
  return 0;
}
