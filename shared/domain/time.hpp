// Domain: time points and durations as the API and storage spell them. Millisecond precision
// everywhere (the wire protos carry Unix milliseconds); Time{} (the epoch) means "unset".
#pragma once

#include "shared/domain/result.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace mooring::domain {

using Duration = std::chrono::milliseconds;
using Time = std::chrono::sys_time<std::chrono::milliseconds>;

Time now();
inline bool is_set(Time t) { return t != Time{}; }
inline std::int64_t to_unix_ms(Time t) { return t.time_since_epoch().count(); }
inline Time from_unix_ms(std::int64_t ms) { return Time{Duration{ms}}; }

// RFC 3339 in UTC with milliseconds: "2026-11-22T01:51:58.123Z".
std::string format_time(Time t);
// Accepts RFC 3339 with or without fractional seconds, "Z" or a "+hh:mm"/"-hh:mm" offset.
Expected<Time> parse_time(std::string_view text);

// Go-style durations: "30s", "1m30s", "250ms", "1h", "1.5s", "0s". Units: h, m, s, ms, us/µs, ns
// (sub-millisecond parts are truncated). Negative durations are rejected: no Mooring knob
// means anything negative.
Expected<Duration> parse_duration(std::string_view text);
// Shortest Go-style spelling: 90000ms -> "1m30s", 250ms -> "250ms", 0 -> "0s", 1500ms -> "1.5s".
std::string format_duration(Duration d);

}  // namespace mooring::domain
