// Time and duration spellings. Durations are parsed in nanoseconds with overflow checks and
// truncated to milliseconds, so "1.5s" and "1500ms" are the same value.
#include "shared/domain/time.hpp"

#include <cstdio>
#include <limits>

namespace mooring::domain {
namespace {

using std::chrono::days;
using std::chrono::floor;
using std::chrono::sys_days;
using std::chrono::year_month_day;

bool read_digits(std::string_view text, std::size_t& pos, std::size_t count, int& out) {
  if (pos + count > text.size()) return false;
  int value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  pos += count;
  out = value;
  return true;
}

bool expect(std::string_view text, std::size_t& pos, char a, char b = '\0') {
  if (pos >= text.size()) return false;
  if (text[pos] != a && (b == '\0' || text[pos] != b)) return false;
  ++pos;
  return true;
}

Error duration_error(std::string_view text, std::string_view why) {
  return error("invalid duration \"" + std::string(text) + "\": " + std::string(why) +
               " (expected e.g. \"30s\", \"1m30s\", \"250ms\")");
}

// Nanoseconds per unit; 0 when the unit is unknown.
std::int64_t unit_nanos(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") return 1'000;
  if (unit == "ms") return 1'000'000;
  if (unit == "s") return 1'000'000'000;
  if (unit == "m") return 60'000'000'000;
  if (unit == "h") return 3'600'000'000'000;
  return 0;
}

}  // namespace

Time now() { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); }

std::string format_time(Time t) {
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const std::chrono::hh_mm_ss hms{t - day};
  const int year = static_cast<int>(ymd.year());
  const unsigned fields[] = {
      static_cast<unsigned>(ymd.month()),           static_cast<unsigned>(ymd.day()),
      static_cast<unsigned>(hms.hours().count()),   static_cast<unsigned>(hms.minutes().count()),
      static_cast<unsigned>(hms.seconds().count()), static_cast<unsigned>(hms.subseconds().count())};
  if (year < 0 || year > 9999) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02u:%02u:%02u.%03uZ", year, fields[0], fields[1], fields[2],
                  fields[3], fields[4], fields[5]);
    return buf;
  }
  // By hand: every stored allocation event's time is spelled on each commit of its allocation,
  // and snprintf was a visible share of the control plane's thread (issue 21).
  std::string out = "0000-00-00T00:00:00.000Z";
  auto put = [&out](std::size_t at, unsigned value, int width) {
    for (int i = width - 1; i >= 0; --i, value /= 10)
      out[at + static_cast<std::size_t>(i)] = static_cast<char>('0' + value % 10);
  };
  put(0, static_cast<unsigned>(year), 4);
  put(5, fields[0], 2);
  put(8, fields[1], 2);
  put(11, fields[2], 2);
  put(14, fields[3], 2);
  put(17, fields[4], 2);
  put(20, fields[5], 3);
  return out;
}

Expected<Time> parse_time(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return error("invalid time \"" + std::string(text) + "\": " + std::string(why) +
                 " (expected RFC 3339, e.g. \"2026-01-02T03:04:05Z\")");
  };
  std::size_t pos = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!read_digits(text, pos, 4, y) || !expect(text, pos, '-') || !read_digits(text, pos, 2, mo) ||
      !expect(text, pos, '-') || !read_digits(text, pos, 2, d) || !expect(text, pos, 'T', 't') ||
      !read_digits(text, pos, 2, h) || !expect(text, pos, ':') || !read_digits(text, pos, 2, mi) ||
      !expect(text, pos, ':') || !read_digits(text, pos, 2, s)) {
    return bad("malformed");
  }
  const year_month_day ymd{std::chrono::year{y}, std::chrono::month{static_cast<unsigned>(mo)},
                           std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return bad("out of range");
  std::int64_t millis = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 3) millis = millis * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad("empty fraction");
    for (int i = digits; i < 3; ++i) millis *= 10;
  }
  std::chrono::minutes offset{0};
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!read_digits(text, pos, 2, oh) || !expect(text, pos, ':') || !read_digits(text, pos, 2, om) || oh > 23 ||
        om > 59) {
      return bad("malformed offset");
    }
    offset = std::chrono::minutes{sign * (oh * 60 + om)};
  } else {
    return bad("missing time zone (Z or +hh:mm)");
  }
  if (pos != text.size()) return bad("trailing characters");
  return Time{sys_days{ymd}} + std::chrono::hours{h} + std::chrono::minutes{mi} + std::chrono::seconds{s} +
         Duration{millis} - offset;
}

Expected<Duration> parse_duration(std::string_view text) {
  if (text.empty()) return duration_error(text, "empty");
  std::size_t pos = 0;
  if (text[0] == '-') return duration_error(text, "negative");
  if (text[0] == '+') ++pos;
  if (text.substr(pos) == "0") return Duration{0};
  if (pos >= text.size()) return duration_error(text, "no number");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t total = 0;  // nanoseconds
  while (pos < text.size()) {
    std::int64_t whole = 0;
    bool any = false;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (whole > (kMax - 9) / 10) return duration_error(text, "too large");
      whole = whole * 10 + (text[pos] - '0');
      ++pos;
      any = true;
    }
    std::int64_t frac = 0, scale = 1;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        if (scale < 1'000'000'000'000'000LL) {  // digits beyond nanosecond precision are dropped
          frac = frac * 10 + (text[pos] - '0');
          scale *= 10;
        }
        ++pos;
        any = true;
      }
    }
    if (!any) return duration_error(text, "expected a number");
    const std::size_t unit_start = pos;
    while (pos < text.size() && text[pos] != '.' && (text[pos] < '0' || text[pos] > '9')) ++pos;
    const std::string_view unit = text.substr(unit_start, pos - unit_start);
    if (unit.empty()) return duration_error(text, "missing unit (h, m, s, ms, us, ns)");
    const std::int64_t per = unit_nanos(unit);
    if (per == 0) return duration_error(text, "unknown unit \"" + std::string(unit) + "\"");
    if (whole > kMax / per) return duration_error(text, "too large");
    std::int64_t part = whole * per;
    // frac/scale of a unit, computed without overflow: per <= 3.6e12 and frac < scale <= 1e18.
    const long double fractional = static_cast<long double>(frac) * per / static_cast<long double>(scale);
    part += static_cast<std::int64_t>(fractional);
    if (part < 0 || total > kMax - part) return duration_error(text, "too large");
    total += part;
  }
  return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds{total});
}

std::string format_duration(Duration d) {
  if (d.count() == 0) return "0s";
  std::string out;
  std::int64_t ms = d.count();
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms < 1000) return out + std::to_string(ms) + "ms";
  const std::int64_t hours = ms / 3'600'000;
  ms %= 3'600'000;
  const std::int64_t minutes = ms / 60'000;
  ms %= 60'000;
  const std::int64_t seconds = ms / 1000;
  const std::int64_t frac = ms % 1000;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  out += std::to_string(seconds);
  if (frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "s";
}

}  // namespace mooring::domain
