// Excerpt: a client's value quoted in an error message, cut to `max` bytes (at a character) with its
// full length named, so that what the message says after it (what was expected) survives gRPC's
// limit on a status message's length. Utf8PrefixLength: where to cut text so that no UTF-8 character
// is split.
#ifndef CHRONOSERVE_COMMON_TEXT_EXCERPT_H_
#define CHRONOSERVE_COMMON_TEXT_EXCERPT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace chronoserve {

// The length of the longest prefix of `text` of at most `max_bytes` bytes that splits no UTF-8
// character. Error messages travel in proto3 strings (a stream's error_message, a span's status),
// whose readers refuse invalid UTF-8: half a character would fail the read (and end a stream for
// every later response). Backs up at most 3 bytes (a character is at most 4), so text that is not
// UTF-8 at the cut is still cut near `max_bytes`.
inline size_t Utf8PrefixLength(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t cut = max_bytes;
  auto continues = [&text](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  for (int back = 0; back < 3 && cut > 0 && continues(cut); ++back) --cut;
  return cut;
}

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// as protobuf's proto3 strings and Prometheus' label values must be.
inline bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;   // overlong
      if (c == 0xED) high = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;   // overlong
      if (c == 0xF4) high = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // cut short
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      if (k == 1 ? (b < low || b > high) : (b & 0xC0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
}

inline std::string Excerpt(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, Utf8PrefixLength(text, max))) + "... (" + std::to_string(text.size()) +
         " bytes)";
}

// A name a client chose (a tensor, a shared-memory region or its key; a shape) quoted in an error before what
// was expected: cut at 200 bytes, so that the expectation survives a status message's 1 KiB cut.
inline std::string ClientName(std::string_view name) { return Excerpt(name, 200); }

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TEXT_EXCERPT_H_
