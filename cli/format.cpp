#include "cli/format.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace mooring::cli {

using nlohmann::json;

std::string text(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it == obj.end() ? "" : text(*it);
}

std::int64_t field_int(const json& obj, std::string_view key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  return it->is_number_float() ? static_cast<std::int64_t>(it->get<double>()) : it->get<std::int64_t>();
}

bool field_bool(const json& obj, std::string_view key) {
  if (!obj.is_object()) return false;
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

std::string human_bytes(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view t) {
  if (t.empty()) return std::nullopt;
  double total = 0;
  std::size_t i = 0;
  while (i < t.size()) {
    std::size_t start = i;
    while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    double v = 0;
    try {
      v = std::stod(std::string(t.substr(start, i - start)));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    std::size_t ustart = i;
    while (i < t.size() && std::isalpha(static_cast<unsigned char>(t[i]))) ++i;
    auto unit = t.substr(ustart, i - ustart);
    if (unit == "ms")
      total += v;
    else if (unit == "s" || (unit.empty() && start == 0 && i == t.size()))
      total += v * 1000;
    else if (unit == "m")
      total += v * 60'000;
    else if (unit == "h")
      total += v * 3'600'000;
    else
      return std::nullopt;
  }
  if (!std::isfinite(total) || total > 1e15) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(total));
}

std::string map_text(const json& obj) {
  if (!obj.is_object() || obj.empty()) return "<none>";
  std::string out;
  for (auto it = obj.begin(); it != obj.end(); ++it)
    out += (out.empty() ? "" : ", ") + it.key() + "=" + text(it.value());
  return out;
}

std::string topologies_text(const json& list) {
  if (!list.is_array() || list.empty()) return "<none>";
  std::string out;
  for (const auto& t : list) {
    auto segs = t.is_object() && t.contains("Segments") ? t["Segments"] : t;
    out += (out.empty() ? "" : "; ") + map_text(segs);
  }
  return out;
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view t) {
  int y, mo, d, h, mi, s;
  int consumed = 0;
  std::string str(t);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &consumed) != 6)
    return std::nullopt;
  std::string_view rest = t.substr(static_cast<std::size_t>(consumed));
  double frac = 0;
  if (!rest.empty() && rest.front() == '.') {
    std::size_t n = 1;
    while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
    std::string fraction = "0";  // not "0" + std::string(...): GCC 12 -O3 -Wrestrict false positive (bug 105329)
    fraction.append(rest.substr(0, n));
    frac = std::stod(fraction);
    rest.remove_prefix(n);
  }
  long offset = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &oh, &om) != 2) return std::nullopt;
    offset = (rest[0] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
  } else {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  std::time_t secs = timegm(&tm);
  if (secs == static_cast<std::time_t>(-1)) return std::nullopt;
  auto tp = std::chrono::system_clock::from_time_t(secs - offset);
  return tp + std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(frac));
}

std::string short_duration(std::chrono::seconds d) {
  auto s = d.count();
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  if (s < 86400) return std::to_string(s / 3600) + "h" + (s % 3600 / 60 ? std::to_string(s % 3600 / 60) + "m" : "");
  return std::to_string(s / 86400) + "d" + (s % 86400 / 3600 ? std::to_string(s % 86400 / 3600) + "h" : "");
}

std::string time_text(const std::string& rfc3339, std::chrono::system_clock::time_point now) {
  if (rfc3339.empty()) return "";
  auto tp = parse_rfc3339(rfc3339);
  if (!tp) return rfc3339;
  auto diff = std::chrono::round<std::chrono::seconds>(*tp - now);
  if (diff.count() >= 0) return rfc3339 + " (in " + short_duration(diff) + ")";
  return rfc3339 + " (" + short_duration(-diff) + " ago)";
}

}  // namespace mooring::cli
