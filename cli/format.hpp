// CLI room: turning API JSON values into table cells — strings, counts, sizes, maps, times.
// Tolerant of missing fields: a field the server did not send is a blank cell, never a crash.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mooring::cli {

// A scalar as text: strings as-is, numbers, true/false; null/missing -> ""; objects/arrays compact JSON.
std::string text(const nlohmann::json& value);
// obj[key] as text, "" when obj is not an object or has no such key.
std::string field(const nlohmann::json& obj, std::string_view key);
std::int64_t field_int(const nlohmann::json& obj, std::string_view key);
bool field_bool(const nlohmann::json& obj, std::string_view key);

// 1073741824 -> "1.0 GiB"; 0 -> "0 B"; below 1 KiB plain bytes.
std::string human_bytes(std::int64_t bytes);
// "10s", "500ms", "2m", "1h", "1m30s" -> milliseconds; nullopt when unparseable.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// {"a":"1","b":"2"} -> "a=1, b=2"; an empty or missing map -> "<none>".
std::string map_text(const nlohmann::json& obj);
// Topologies [{"Segments":{...}}] -> "zone=a; zone=b"; none -> "<none>".
std::string topologies_text(const nlohmann::json& list);

// An RFC 3339 time from the API with how far it is from `now`: "2026-01-02T03:04:05Z (in 12s)"
// or "(3m ago)". Unparseable text is returned as-is; empty stays empty.
std::string time_text(const std::string& rfc3339, std::chrono::system_clock::time_point now);
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);
// 75s -> "1m15s"; 3700s -> "1h1m"; below a second -> "0s".
std::string short_duration(std::chrono::seconds d);

}  // namespace mooring::cli
