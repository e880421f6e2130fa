#include "server/telemetry/nvml_sampler.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chronoserve::server::telemetry {

// The few NVML types and entry points we use, declared here so nvml.h is not needed to build.
// Values as in NVIDIA's nvml.h (stable ABI).
using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;
constexpr int kNvmlClockSm = 1;   // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;  // NVML_CLOCK_MEM
constexpr int kNvmlTemperatureGpu = 0;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;  // nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;  // _v2
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;  // _v2
  NvmlReturn (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned int) = nullptr;
};

namespace {

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

std::string ErrorText(const NvmlApi& api, NvmlReturn r) {
  return absl::StrCat(api.error_string != nullptr ? api.error_string(r) : "NVML error", " (", r, ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmlSampler>> NvmlSampler::Create(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load ", library, ": ", why != nullptr ? why : "?"));
  }
  auto api = std::make_unique<NvmlApi>();
  const bool bound = Bind(handle, "nvmlInit_v2", &api->init) && Bind(handle, "nvmlShutdown", &api->shutdown) &&
                     Bind(handle, "nvmlErrorString", &api->error_string) &&
                     Bind(handle, "nvmlDeviceGetCount_v2", &api->device_count) &&
                     Bind(handle, "nvmlDeviceGetHandleByIndex_v2", &api->handle_by_index) &&
                     Bind(handle, "nvmlDeviceGetHandleByUUID", &api->handle_by_uuid) &&
                     Bind(handle, "nvmlDeviceGetClockInfo", &api->clock_info) &&
                     Bind(handle, "nvmlDeviceGetPowerUsage", &api->power_usage) &&
                     Bind(handle, "nvmlDeviceGetUtilizationRates", &api->utilization) &&
                     Bind(handle, "nvmlDeviceGetMemoryInfo", &api->memory_info) &&
                     Bind(handle, "nvmlDeviceGetTemperature", &api->temperature) &&
                     Bind(handle, "nvmlSystemGetDriverVersion", &api->driver_version);
  if (!bound) {
    dlclose(handle);
    return absl::NotFoundError(absl::StrCat(library, " lacks an NVML entry point we need"));
  }
  if (NvmlReturn r = api->init(); r != 0) {
    const std::string text = ErrorText(*api, r);
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat("nvmlInit: ", text));
  }
  std::unique_ptr<NvmlSampler> sampler(new NvmlSampler(handle, std::move(api)));
  if (absl::Status s = sampler->MapDevices(); !s.ok()) return s;
  return sampler;
}

NvmlSampler::NvmlSampler(void* handle, std::unique_ptr<NvmlApi> api) : handle_(handle), api_(std::move(api)) {
  char version[96] = {0};
  if (api_->driver_version(version, sizeof(version)) == 0) description_ = absl::StrCat("NVML, driver ", version);
}

NvmlSampler::~NvmlSampler() {
  api_->shutdown();
  dlclose(handle_);
}

// CUDA ordinal i is the i-th entry of CUDA_VISIBLE_DEVICES (an NVML index or a GPU UUID), or NVML
// index i when the variable is unset.
absl::Status NvmlSampler::MapDevices() {
  unsigned int count = 0;
  if (NvmlReturn r = api_->device_count(&count); r != 0) {
    return absl::UnavailableError(absl::StrCat("nvmlDeviceGetCount: ", ErrorText(*api_, r)));
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> entries;
  if (visible == nullptr) {
    for (unsigned int i = 0; i < count; ++i) entries.push_back(absl::StrCat(i));
  } else {
    entries = absl::StrSplit(visible, ',', absl::SkipWhitespace());
  }
  for (std::string& entry : entries) {
    absl::string_view e = absl::StripAsciiWhitespace(entry);
    NvmlDevice device = nullptr;
    unsigned int index = 0;
    NvmlReturn r = absl::SimpleAtoi(e, &index) ? api_->handle_by_index(index, &device)
                                              : api_->handle_by_uuid(std::string(e).c_str(), &device);
    if (r != 0) break;  // CUDA stops at the first invalid entry too
    devices_.push_back(device);
  }
  absl::StrAppend(&description_, description_.empty() ? "NVML" : "", ", ", devices_.size(), " GPU(s)");
  return absl::OkStatus();
}

absl::StatusOr<GpuSample> NvmlSampler::Sample(int gpu) {
  if (gpu < 0 || gpu >= DeviceCount()) return absl::OutOfRangeError(absl::StrCat("no GPU ", gpu));
  NvmlDevice d = devices_[gpu];
  GpuSample s;
  unsigned int v = 0;
  if (api_->clock_info(d, kNvmlClockSm, &v) == 0) s.sm_clock_mhz = v;
  if (api_->clock_info(d, kNvmlClockMem, &v) == 0) s.memory_clock_mhz = v;
  if (api_->power_usage(d, &v) == 0) s.power_mw = v;
  if (api_->temperature(d, kNvmlTemperatureGpu, &v) == 0) s.temperature_c = v;
  NvmlUtilization u{};
  if (api_->utilization(d, &u) == 0) {
    s.utilization_gpu_pct = u.gpu;
    s.utilization_memory_pct = u.memory;
  }
  NvmlMemory m{};
  if (NvmlReturn r = api_->memory_info(d, &m); r == 0) {
    s.memory_used_bytes = static_cast<int64_t>(m.used);
    s.memory_total_bytes = static_cast<int64_t>(m.total);
  } else if (s.sm_clock_mhz < 0) {
    return absl::UnavailableError(absl::StrCat("GPU ", gpu, ": ", ErrorText(*api_, r)));
  }
  return s;
}

}  // namespace chronoserve::server::telemetry
