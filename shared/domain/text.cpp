#include "shared/domain/text.hpp"

namespace mooring::domain {

bool valid_utf8(std::string_view text) { return utf8_prefix(text) == text.size(); }

std::size_t utf8_prefix(std::string_view text) {
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* p = begin;
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    // The sequence's length and the range its second byte must fall in (RFC 3629, table 3-7 of
    // the Unicode standard): the narrower ranges exclude overlongs, surrogates and > U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      break;
    }
    if (static_cast<std::size_t>(end - p) < len || p[1] < lo || p[1] > hi) break;
    bool ok = true;
    for (std::size_t i = 2; i < len; ++i) ok = ok && p[i] >= 0x80 && p[i] <= 0xBF;
    if (!ok) break;
    p += len;
  }
  return static_cast<std::size_t>(p - begin);
}

}  // namespace mooring::domain
