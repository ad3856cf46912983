// shared/durable internals used by both the slot files and the journal (not for other rooms).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>

#include "shared/durable/durable_file.hpp"

namespace mooring::durable::detail {

inline std::error_code last_error() { return {errno, std::generic_category()}; }

// Writes all of `data` at `offset` (pwrite, so the descriptor's position does not matter).
inline std::error_code write_at(int fd, std::string_view data, std::uint64_t offset) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return last_error();
    }
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

// A number at the start of `text` (in `base`); `text` is left after it.
inline bool parse_u64(std::string_view& text, std::uint64_t& out, int base) {
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  if (err != std::errc{} || end == text.data()) return false;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return true;
}

// hash64 of `content` as the 16 hex digits the headers carry.
inline std::string hash_hex(std::string_view content) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash64(content)));
  return hex;
}

}  // namespace mooring::durable::detail
