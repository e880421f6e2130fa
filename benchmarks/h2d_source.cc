// bench_h2d_source: why the same host→device copy of a request's input takes about 40 µs on one
// server and 130-200 µs on another, or after an idle second (BENCHMARKS §51, §69: the policy net's
// 819 KB batch-128 input from the page-locked input arena). Times one cudaMemcpyAsync of --bytes
// into device memory with CUDA events, on one non-blocking stream of GPU 0, from:
//   host_alloc      cudaHostAlloc (portable), as the server's input arena
//   registered_4k   mmap'd pages advised MADV_NOHUGEPAGE, then cudaHostRegister (portable)
//   registered_thp  mmap'd 2 MiB-aligned pages advised MADV_HUGEPAGE, then cudaHostRegister
// each at a fixed offset (the arena at concurrency 1) or moving through a --ring-mib ring (under
// load), with the source written by the CPU just before the copy, by the copying thread or by
// another one that then sleeps (as gRPC's receiving thread writes the arena in `admit`, then the
// worker copies it), or not written. Those eighteen run back to back, in interleaved blocks.
// Then the server's own case (host_alloc, ring, written by --gap-writer) after idle gaps of
// --gaps-ms, three ways:
//   idle           the process sleeps through the gap
//   device_work    every --warm-period-ms a memset of 8 MiB in device memory on another stream
//                  (what a keep-warm replay does: device work, no copy over PCIe)
//   h2d_traffic    every --warm-period-ms a 64 KiB copy from page-locked memory on another stream
// With NVML (libnvidia-ml.so.1) each gap sample also reads the PCIe link's current generation and
// width and the GPU's performance state just before its copy, and the generation again after it.
// With --stores beyond "cached", the writer also stores the bytes past the caches (non-temporal
// stores) or writes them and evicts their lines (common/cache_bypass.h): the server's remedies to
// test; each store adds back-to-back rows (host_alloc, written by another thread) and gap rows, with
// the writing's own time beside the copy's. --writer-cpu / --copier-cpu pin the two threads.
// Then --regions more rings allocated as the arena is, each timed alone with its first page's frame:
// whether a region's place in memory decides its speed.
// Prints tables (nearest-rank median and p90 µs, GB/s at the median) and writes JSON.
//
//   bench_h2d_source --bytes 819200 --ring-mib 6 --json h2d_source.json
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "benchmarks/cuda_ok.h"
#include "benchmarks/percentile.h"
#include "common/cache_bypass.h"

namespace {

using chronoserve::CacheStore;
using chronoserve::CacheStoreName;
using chronoserve::CopyForDevice;
using chronoserve::bench::CudaOk;
using chronoserve::bench::PercentileUs;

constexpr size_t kHugePage = 2u << 20;

// The few NVML calls this needs, bound at run time (values as in NVIDIA's nvml.h).
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*handle_by_index)(unsigned, Device*) = nullptr;
  int (*link_gen)(Device, unsigned*) = nullptr;
  int (*link_width)(Device, unsigned*) = nullptr;
  int (*pstate)(Device, int*) = nullptr;
  Device device = nullptr;

  bool Open() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("/usr/local/nvidia/lib64/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    handle_by_index = reinterpret_cast<int (*)(unsigned, Device*)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    link_gen = reinterpret_cast<int (*)(Device, unsigned*)>(dlsym(lib, "nvmlDeviceGetCurrPcieLinkGeneration"));
    link_width = reinterpret_cast<int (*)(Device, unsigned*)>(dlsym(lib, "nvmlDeviceGetCurrPcieLinkWidth"));
    pstate = reinterpret_cast<int (*)(Device, int*)>(dlsym(lib, "nvmlDeviceGetPerformanceState"));
    return init != nullptr && handle_by_index != nullptr && link_gen != nullptr && link_width != nullptr &&
           pstate != nullptr && init() == 0 && handle_by_index(0, &device) == 0;
  }
  int Gen() const {
    unsigned g = 0;
    return link_gen(device, &g) == 0 ? static_cast<int>(g) : -1;
  }
  int Width() const {
    unsigned w = 0;
    return link_width(device, &w) == 0 ? static_cast<int>(w) : -1;
  }
  int PState() const {
    int p = -1;
    return pstate(device, &p) == 0 ? p : -1;
  }
};

// A page-locked source region.
struct Region {
  std::string kind;
  char* base = nullptr;
  size_t bytes = 0;
  void* mapping = nullptr;  // mmap'd regions: what to unmap
  size_t mapping_bytes = 0;
  long anon_huge_kib = -1;  // from /proc/self/smaps, mmap'd regions only
};

// AnonHugePages of the mapping that holds `address`, in KiB (-1 if not found).
long AnonHugeKib(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    long kib = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kib) == 1) return kib;
  }
  return -1;
}

// The physical page frame behind `address` (/proc/self/pagemap; -1 if unreadable, 0 without
// CAP_SYS_ADMIN). In a VM that is the guest's frame.
long long PageFrame(const void* address) {
  const int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return -1;
  const uint64_t page = reinterpret_cast<uintptr_t>(address) / 4096;
  uint64_t entry = 0;
  const ssize_t got = pread(fd, &entry, sizeof(entry), static_cast<off_t>(page * sizeof(entry)));
  close(fd);
  if (got != static_cast<ssize_t>(sizeof(entry))) return -1;
  return static_cast<long long>(entry & ((1ull << 55) - 1));
}

bool MakeHostAlloc(size_t bytes, Region* r) {
  r->kind = "host_alloc";
  r->bytes = bytes;
  void* p = nullptr;
  if (!CudaOk(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc")) return false;
  r->base = static_cast<char*>(p);
  std::memset(r->base, 1, bytes);
  return true;
}

bool MakeRegistered(size_t bytes, bool huge, Region* r) {
  r->kind = huge ? "registered_thp" : "registered_4k";
  r->bytes = bytes;
  r->mapping_bytes = bytes + kHugePage;
  r->mapping = mmap(nullptr, r->mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r->mapping == MAP_FAILED) {
    std::perror("mmap");
    r->mapping = nullptr;
    return false;
  }
  const auto start = (reinterpret_cast<uintptr_t>(r->mapping) + kHugePage - 1) & ~(kHugePage - 1);
  r->base = reinterpret_cast<char*>(start);
  if (madvise(r->base, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) std::perror("madvise");
  std::memset(r->base, 1, bytes);
  r->anon_huge_kib = AnonHugeKib(r->base);
  return CudaOk(cudaHostRegister(r->base, bytes, cudaHostRegisterPortable), "cudaHostRegister");
}

void Release(Region* r) {
  if (r->mapping != nullptr) {
    cudaHostUnregister(r->base);
    munmap(r->mapping, r->mapping_bytes);
  } else if (r->base != nullptr) {
    cudaFreeHost(r->base);
  }
  r->base = nullptr;
}

// Who writes a request's bytes into the source just before its copy.
enum class Writer { kNone, kThisThread, kOtherThread };

const char* WriterSuffix(Writer w) {
  switch (w) {
    case Writer::kNone:
      return "";
    case Writer::kThisThread:
      return " written";
    case Writer::kOtherThread:
      return " written by another thread";
  }
  return "";
}

// Pins the calling thread to `cpu` (nothing for a negative one).
void PinTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
}

// Writes `bytes` at `dst` as `store` says; how long that took, in ns.
int64_t TimedWrite(char* dst, const std::vector<char>& bytes, CacheStore store) {
  const auto start = std::chrono::steady_clock::now();
  CopyForDevice(dst, bytes.data(), bytes.size(), store);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

// A thread that writes `bytes` where it is told and says when it is done, as gRPC's receiving
// thread writes a request into the arena before the worker copies it. Between writes it sleeps on
// a condition variable, so its core may go idle as a receiving thread's does, and nothing spins
// through the idle gaps. The hand-off's wake-ups fall before the copy's first event: not timed.
class OtherWriter {
 public:
  OtherWriter(const std::vector<char>* bytes, int cpu) : bytes_(bytes), cpu_(cpu), thread_([this] { Loop(); }) {}
  ~OtherWriter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Has the thread write the bytes at `dst` as `store` says; returns how long the writing took (ns)
  // and on which CPU it ran.
  int64_t Write(char* dst, CacheStore store, int* cpu) {
    std::unique_lock<std::mutex> lock(mu_);
    target_ = dst;
    store_ = store;
    cv_.notify_all();
    cv_.wait(lock, [this] { return target_ == nullptr; });
    *cpu = written_on_;
    return write_ns_;
  }

 private:
  void Loop() {
    PinTo(cpu_);
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || target_ != nullptr; });
      if (stop_) return;
      write_ns_ = TimedWrite(target_, *bytes_, store_);
      written_on_ = sched_getcpu();
      target_ = nullptr;
      cv_.notify_all();
    }
  }
  const std::vector<char>* bytes_;
  const int cpu_;
  std::mutex mu_;
  std::condition_variable cv_;
  char* target_ = nullptr;                   // guarded by mu_
  CacheStore store_ = CacheStore::kCached;  // guarded by mu_
  int64_t write_ns_ = 0;                    // guarded by mu_
  int written_on_ = -1;                     // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::thread thread_;      // last: starts once the rest is ready
};

struct Copier {
  cudaStream_t stream = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  void* device = nullptr;
  void* scratch = nullptr;        // device_work's memset target
  char* side_host = nullptr;      // h2d_traffic's source
  std::vector<char> incoming;     // what the CPU writes into the region (a request's bytes)
  std::unique_ptr<OtherWriter> other;
  size_t bytes = 0;

  bool Init(size_t n, int writer_cpu) {
    bytes = n;
    incoming.resize(n);
    std::mt19937 rng(20261206);
    for (auto& c : incoming) c = static_cast<char>(rng());
    other = std::make_unique<OtherWriter>(&incoming, writer_cpu);
    void* side_buffer = nullptr;
    if (!CudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream") ||
        !CudaOk(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "side stream") ||
        !CudaOk(cudaEventCreate(&start), "event") || !CudaOk(cudaEventCreate(&end), "event") ||
        !CudaOk(cudaMalloc(&device, n), "cudaMalloc") || !CudaOk(cudaMalloc(&scratch, 8u << 20), "cudaMalloc") ||
        !CudaOk(cudaHostAlloc(&side_buffer, 64u << 10, cudaHostAllocPortable), "cudaHostAlloc(side)")) {
      return false;
    }
    side_host = static_cast<char*>(side_buffer);
    return true;
  }

  // What one copy's writing was: how long it took and where.
  struct Written {
    int64_t ns = 0;
    int writer_cpu = -1;
    int copier_cpu = -1;
  };

  // One timed copy from `src`, in ns (negative on error), its bytes written first by `writer` as
  // `store` says.
  int64_t Copy(const char* src, Writer writer, CacheStore store = CacheStore::kCached, Written* written = nullptr) {
    Written w;
    if (writer == Writer::kThisThread) {
      w.ns = TimedWrite(const_cast<char*>(src), incoming, store);
      w.writer_cpu = sched_getcpu();
    }
    if (writer == Writer::kOtherThread) w.ns = other->Write(const_cast<char*>(src), store, &w.writer_cpu);
    w.copier_cpu = sched_getcpu();
    if (written != nullptr) *written = w;
    if (!CudaOk(cudaEventRecord(start, stream), "record") ||
        !CudaOk(cudaMemcpyAsync(device, src, bytes, cudaMemcpyHostToDevice, stream), "copy") ||
        !CudaOk(cudaEventRecord(end, stream), "record") || !CudaOk(cudaEventSynchronize(end), "sync")) {
      return -1;
    }
    float ms = 0;
    return CudaOk(cudaEventElapsedTime(&ms, start, end), "elapsed") ? std::llround(ms * 1e6) : -1;
  }

  // Waits `gap_ms`, doing `warm` every `period_ms` on the side stream.
  void Gap(int gap_ms, const std::string& warm, int period_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(gap_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (warm == "device_work") {
        cudaMemsetAsync(scratch, 3, 8u << 20, side);
        cudaStreamSynchronize(side);
      } else if (warm == "h2d_traffic") {
        cudaMemcpyAsync(scratch, side_host, 64u << 10, cudaMemcpyHostToDevice, side);
        cudaStreamSynchronize(side);
      }
      const auto next = std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds(period_ms));
      std::this_thread::sleep_until(next);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_h2d_source: one input's host-to-device copy by source memory, placement and idle gap"};
  size_t bytes = 819200;
  int ring_mib = 6;
  int blocks = 8;
  int per_block = 50;
  std::vector<int> gaps_ms = {10, 50, 200, 1000};
  int gap_samples = 12;
  int warm_period_ms = 20;
  int more_regions = 16;
  std::string gap_writer = "other";
  std::vector<std::string> store_names = {"cached"};
  std::vector<std::string> ways = {"idle", "device_work", "h2d_traffic"};
  int writer_cpu = -1;
  int copier_cpu = -1;
  std::string json_path;
  app.add_option("--bytes", bytes, "bytes a copy (default: the policy net's batch-128 input)");
  app.add_option("--ring-mib", ring_mib, "the ring the source moves through (the server's arena)");
  app.add_option("--blocks", blocks, "back to back: blocks a variant, interleaved");
  app.add_option("--per-block", per_block, "back to back: copies a block");
  app.add_option("--gaps-ms", gaps_ms, "idle gaps before a copy (comma-separated)")->delimiter(',');
  app.add_option("--gap-samples", gap_samples, "copies a gap and way");
  app.add_option("--warm-period-ms", warm_period_ms, "device_work / h2d_traffic period during a gap");
  app.add_option("--gap-writer", gap_writer, "who writes the source before a gap sample's copy: this or other "
                 "(thread; §70's calls 1-2 ran this)")
      ->check(CLI::IsMember({"this", "other"}));
  app.add_option("--stores", store_names, "how the writer stores a request's bytes (comma-separated): cached "
                 "(memcpy, as the server's admit), streaming (non-temporal stores), evicted (memcpy, then "
                 "CLFLUSHOPT); beyond cached, each adds back-to-back rows and gap rows")
      ->delimiter(',')
      ->check(CLI::IsMember(chronoserve::CacheStoreNames()));
  app.add_option("--ways", ways, "what the process does during a gap (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"idle", "device_work", "h2d_traffic"}));
  app.add_option("--writer-cpu", writer_cpu, "pin the other writing thread to this CPU (default: not pinned)");
  app.add_option("--copier-cpu", copier_cpu, "pin the copying thread to this CPU (default: not pinned)");
  app.add_option("--regions", more_regions, "further cudaHostAlloc rings, each timed on its own (placement)");
  app.add_option("--json", json_path, "write the figures here");
  CLI11_PARSE(app, argc, argv);
  const size_t ring_bytes = static_cast<size_t>(ring_mib) << 20;
  if (bytes == 0 || bytes > ring_bytes) {
    std::fprintf(stderr, "--bytes must be 1..%zu (the ring)\n", ring_bytes);
    return 2;
  }

  std::vector<CacheStore> stores;
  for (const std::string& name : store_names) {
    CacheStore store = CacheStore::kCached;
    chronoserve::ParseCacheStore(name.c_str(), &store);
    stores.push_back(store);
  }
  PinTo(copier_cpu);
  if (!CudaOk(cudaSetDevice(0), "cudaSetDevice")) return 1;
  Copier copier;
  if (!copier.Init(bytes, writer_cpu)) return 1;
  std::vector<Region> regions(3);
  if (!MakeHostAlloc(ring_bytes, &regions[0]) || !MakeRegistered(ring_bytes, false, &regions[1]) ||
      !MakeRegistered(ring_bytes, true, &regions[2])) {
    return 1;
  }
  Nvml nvml;
  const bool have_nvml = nvml.Open();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench_h2d_source: %zu bytes a copy on %s, ring %d MiB; NVML %s\n", bytes, prop.name, ring_mib,
              have_nvml ? "read" : "not found");
  for (const Region& r : regions) {
    if (r.anon_huge_kib < 0) continue;
    std::printf("  %s: AnonHugePages %ld kB of %zu\n", r.kind.c_str(), r.anon_huge_kib, r.bytes >> 10);
  }

  // Back to back: 3 sources x {fixed, ring} x {written here, written by another thread, not},
  // interleaved block by block.
  struct Variant {
    int region;
    bool ring;
    Writer writer;
    CacheStore store = CacheStore::kCached;
    size_t offset = 0;
    std::vector<int64_t> ns;
    std::vector<int64_t> write_ns;
    std::string Name(const std::vector<Region>& rs) const {
      return rs[region].kind + (ring ? " ring" : " fixed") + WriterSuffix(writer) +
             (store == CacheStore::kCached ? "" : absl::StrCat(", ", CacheStoreName(store)));
    }
  };
  std::vector<Variant> variants;
  for (int r = 0; r < 3; ++r) {
    for (bool ring : {false, true}) {
      for (Writer w : {Writer::kThisThread, Writer::kOtherThread, Writer::kNone}) {
        variants.push_back(Variant{r, ring, w});
      }
    }
  }
  // The server's arena (host_alloc) written by another thread, each further way of storing.
  for (CacheStore store : stores) {
    if (store == CacheStore::kCached) continue;
    for (bool ring : {false, true}) variants.push_back(Variant{0, ring, Writer::kOtherThread, store});
  }
  for (int i = 0; i < 50; ++i) copier.Copy(regions[0].base, Writer::kThisThread);  // warm-up, not counted
  for (int b = 0; b < blocks; ++b) {
    for (size_t k = 0; k < variants.size(); ++k) {
      Variant& v = variants[(k + b) % variants.size()];
      for (int i = 0; i < per_block; ++i) {
        const char* src = regions[v.region].base + v.offset;
        Copier::Written written;
        const int64_t ns = copier.Copy(src, v.writer, v.store, &written);
        if (ns < 0) return 1;
        v.ns.push_back(ns);
        if (v.writer != Writer::kNone) v.write_ns.push_back(written.ns);
        if (v.ring) v.offset = v.offset + 2 * bytes <= ring_bytes ? v.offset + bytes : 0;
      }
    }
  }
  nlohmann::json out;
  out["device"] = prop.name;
  out["bytes"] = bytes;
  out["ring_mib"] = ring_mib;
  for (const Region& r : regions) out["anon_huge_kib"][r.kind] = r.anon_huge_kib;
  std::printf("\nback to back (%d x %d copies each; write: the CPU's writing of the bytes)\n%-66s %9s %9s %8s %12s\n",
              blocks, per_block, "source", "p50 us", "p90 us", "GB/s", "write p50 us");
  for (const Variant& v : variants) {
    const double p50 = PercentileUs(v.ns, 50);
    const double write_p50 = v.write_ns.empty() ? 0.0 : PercentileUs(v.write_ns, 50);
    std::printf("%-66s %9.1f %9.1f %8.2f %12.1f\n", v.Name(regions).c_str(), p50, PercentileUs(v.ns, 90),
                static_cast<double>(bytes) / (p50 * 1e3), write_p50);
    out["back_to_back"].push_back({{"source", v.Name(regions)}, {"p50_us", p50}, {"p90_us", PercentileUs(v.ns, 90)},
                                   {"write_p50_us", write_p50}, {"samples", v.ns.size()}});
  }

  // Placement: as many more rings as --regions, each allocated as the server's arena is, each timed
  // alone (written, fixed): does a region's place in memory decide its copy speed?
  std::printf("\nplacement: %d more host_alloc rings, %d written copies each at their start\n", more_regions,
              per_block * 2);
  std::printf("%6s %9s %9s %18s\n", "ring", "p50 us", "p90 us", "first page frame");
  std::vector<Region> more(static_cast<size_t>(std::max(more_regions, 0)));
  for (size_t k = 0; k < more.size(); ++k) {
    if (!MakeHostAlloc(ring_bytes, &more[k])) return 1;
    std::vector<int64_t> ns;
    for (int i = 0; i < per_block * 2; ++i) {
      const int64_t t = copier.Copy(more[k].base, Writer::kThisThread);
      if (t < 0) return 1;
      ns.push_back(t);
    }
    const long long frame = PageFrame(more[k].base);
    const std::string frame_text = frame > 0 ? absl::StrCat(absl::Hex(frame)) : "not readable";
    std::printf("%6zu %9.1f %9.1f %18s\n", k, PercentileUs(ns, 50), PercentileUs(ns, 90), frame_text.c_str());
    out["placement"].push_back({{"ring", k}, {"p50_us", PercentileUs(ns, 50)}, {"p90_us", PercentileUs(ns, 90)},
                                {"page_frame", frame}});
  }
  for (Region& r : more) Release(&r);

  // After idle gaps: the server's case, each way and store, interleaved sample by sample.
  std::printf("\nafter a gap: host_alloc ring, written by %s thread, %d copies a gap, way and store (PCIe gen "
              "before -> after, P-state; the writing's p50 and the CPUs writer/copier ran on)\n",
              gap_writer == "this" ? "the copying" : "another", gap_samples);
  std::printf("%8s %-12s %-10s %9s %9s %9s %9s %s\n", "gap ms", "way", "store", "p50 us", "p90 us", "max us",
              "write us", "link (gen x width, P) / CPUs");
  size_t offset = 0;
  const size_t cases = ways.size() * stores.size();
  for (int gap : gaps_ms) {
    std::vector<std::vector<int64_t>> ns(cases), write_ns(cases);
    std::vector<std::ostringstream> links(cases), cpus(cases);
    for (int s = 0; s < gap_samples; ++s) {
      for (size_t c = 0; c < cases; ++c) {
        const size_t w = c / stores.size();
        const CacheStore store = stores[c % stores.size()];
        copier.Gap(gap, ways[w], warm_period_ms);
        int gen_before = -1, width = -1, pstate = -1;
        if (have_nvml) {
          gen_before = nvml.Gen();
          width = nvml.Width();
          pstate = nvml.PState();
        }
        Copier::Written written;
        const int64_t t = copier.Copy(regions[0].base + offset,
                                     gap_writer == "this" ? Writer::kThisThread : Writer::kOtherThread, store, &written);
        if (t < 0) return 1;
        offset = offset + 2 * bytes <= ring_bytes ? offset + bytes : 0;
        ns[c].push_back(t);
        write_ns[c].push_back(written.ns);
        if (have_nvml) {
          links[c] << (s > 0 ? " " : "") << gen_before << "->" << nvml.Gen() << "x" << width << ",P" << pstate;
        }
        cpus[c] << (s > 0 ? " " : "") << written.writer_cpu << "/" << written.copier_cpu;
        out["after_gap"].push_back({{"gap_ms", gap},
                                    {"way", ways[w]},
                                    {"store", CacheStoreName(store)},
                                    {"us", static_cast<double>(t) / 1000.0},
                                    {"write_us", static_cast<double>(written.ns) / 1000.0},
                                    {"writer_cpu", written.writer_cpu},
                                    {"copier_cpu", written.copier_cpu},
                                    {"pcie_gen_before", gen_before},
                                    {"pcie_width", width},
                                    {"pstate", pstate}});
      }
    }
    for (size_t c = 0; c < cases; ++c) {
      std::printf("%8d %-12s %-10s %9.1f %9.1f %9.1f %9.1f %s / %s\n", gap, ways[c / stores.size()].c_str(),
                  CacheStoreName(stores[c % stores.size()]), PercentileUs(ns[c], 50), PercentileUs(ns[c], 90),
                  PercentileUs(ns[c], 100), PercentileUs(write_ns[c], 50), links[c].str().c_str(),
                  cpus[c].str().c_str());
    }
  }
  for (Region& r : regions) Release(&r);
  if (!json_path.empty()) {
    std::ofstream(json_path) << out.dump(2) << "\n";
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}
