// bench_arena_copy: what the copy of a request's input into the input arena costs on this host
// (docs/TIMING.md `admit`; BENCHMARKS §45, where the receiving threads spent about 100 µs a request
// in libc's memmove for the policy net's 819 KB batch-128 input). Times one copy of --bytes from a
// buffer that a "receiving" thread has just written (as the kernel's recv writes gRPC's slices)
// into page-locked memory (mlock), with libc's memcpy and with non-temporal (cache-bypassing)
// stores, in three placements:
//   same thread, fixed     the copying thread wrote the source; the region is the ring's start
//                          every time (the arena at concurrency 1 starts again at 0 once empty)
//   other thread, fixed    another thread wrote the source (gRPC may read on one thread and
//                          proceed on another)
//   other thread, ring     as above, the region moving through a --ring-mib ring (under load)
// Each figure is the median of --iterations copies; variants interleave block by block.
// Usage: bench_arena_copy [--bytes 819200] [--ring-mib 6] [--iterations 2000] [--json PATH]
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cache_bypass.h"

namespace {

// A "receiving" thread that fills the source on request, so the copier reads bytes another core wrote.
class Writer {
 public:
  explicit Writer(std::vector<char>* src) : src_(src), thread_([this] { Run(); }) {}
  ~Writer() {
    stop_.store(true);
    thread_.join();
  }
  void Fill(int round) {
    round_.store(round, std::memory_order_release);
    while (done_.load(std::memory_order_acquire) != round) {
    }
  }

 private:
  void Run() {
    int seen = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      const int round = round_.load(std::memory_order_acquire);
      if (round == seen) continue;
      std::memset(src_->data(), round & 0xff, src_->size());
      seen = round;
      done_.store(round, std::memory_order_release);
    }
  }
  std::vector<char>* src_;
  std::atomic<int> round_{0}, done_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 819200, ring_mib = 6;
  int iterations = 2000;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--ring-mib") ring_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--iterations") iterations = std::atoi(argv[i + 1]);
    else if (flag == "--json") json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const size_t ring = std::max(ring_mib << 20, bytes);
  char* arena = static_cast<char*>(std::aligned_alloc(4096, (ring + 4095) / 4096 * 4096));
  std::memset(arena, 1, ring);
  const bool locked = mlock(arena, ring) == 0;  // page-locked, as the GPU arena is
  std::vector<char> src(bytes);
  Writer writer(&src);

  struct Variant {
    const char* placement;
    bool other_thread;
    bool ring;
    bool stream;
    std::vector<double> us;
    size_t offset = 0;
  };
  std::vector<Variant> variants;
  for (const auto& [placement, other, moving] :
       {std::tuple{"same thread, fixed", false, false}, std::tuple{"other thread, fixed", true, false},
        std::tuple{"other thread, ring", true, true}}) {
    for (bool stream : {false, true}) variants.push_back({placement, other, moving, stream, {}});
  }
  int round = 0;
  constexpr int kBlock = 50;
  for (int done = 0; done < iterations; done += kBlock) {
    for (Variant& v : variants) {
      for (int i = 0; i < kBlock; ++i) {
        ++round;
        if (v.other_thread) {
          writer.Fill(round);
        } else {
          std::memset(src.data(), round & 0xff, bytes);
        }
        if (v.ring) {
          v.offset += bytes;
          if (v.offset + bytes > ring) v.offset = 0;
        }
        char* dst = arena + v.offset;
        const auto start = std::chrono::steady_clock::now();
        chronoserve::CopyForDevice(dst, src.data(), bytes,
                                    v.stream ? chronoserve::CacheStore::kStreaming : chronoserve::CacheStore::kCached);
        const auto end = std::chrono::steady_clock::now();
        if (dst[bytes - 1] != static_cast<char>(round & 0xff)) {
          std::fprintf(stderr, "copy mismatch\n");
          return 1;
        }
        v.us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      }
    }
  }
  std::printf("%zu bytes, ring %zu MiB, %d copies per figure, destination %s\n", bytes, ring >> 20, iterations,
              locked ? "page-locked" : "NOT page-locked (mlock failed)");
  std::printf("%-22s %14s %14s %10s\n", "placement", "memcpy p50 us", "stream p50 us", "stream/memcpy");
  nlohmann::json out = {{"bytes", bytes}, {"ring_mib", ring >> 20}, {"iterations", iterations},
                        {"page_locked", locked}, {"rows", nlohmann::json::array()}};
  for (size_t i = 0; i < variants.size(); i += 2) {
    const double plain = Median(variants[i].us), stream = Median(variants[i + 1].us);
    std::printf("%-22s %14.1f %14.1f %10.2f\n", variants[i].placement, plain, stream, stream / plain);
    out["rows"].push_back({{"placement", variants[i].placement}, {"memcpy_p50_us", plain},
                           {"stream_p50_us", stream}, {"memcpy_gb_per_s", bytes / plain / 1e3},
                           {"stream_gb_per_s", bytes / stream / 1e3}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  std::free(arena);
  return 0;
}
