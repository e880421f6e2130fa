// The project's version, for the server (`--version`, ServerMetadata, the traces' service.version)
// and chronobench (its client spans' service.version).
#ifndef CHRONOSERVE_COMMON_VERSION_H_
#define CHRONOSERVE_COMMON_VERSION_H_

namespace chronoserve {

inline constexpr const char* kChronoserveVersion = "0.1.0";

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_VERSION_H_
