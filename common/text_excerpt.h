// Excerpt: a client's value quoted in an error message, cut to `max` bytes with its full length
// named, so that what the message says after it (what was expected) survives gRPC's limit on a
// status message's length.
#ifndef CHRONOSERVE_COMMON_TEXT_EXCERPT_H_
#define CHRONOSERVE_COMMON_TEXT_EXCERPT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace chronoserve {

inline std::string Excerpt(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TEXT_EXCERPT_H_
