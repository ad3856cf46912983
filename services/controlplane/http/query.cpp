#include "services/controlplane/http/query.hpp"

#include <cctype>
#include <cstdint>
#include <limits>

namespace mooring::controlplane::http {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query_pairs(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto key = percent_decode(part.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1), true);
    if (!key || !value) return std::nullopt;
    out.emplace_back(std::move(*key), std::move(*value));
  }
  return out;
}

std::optional<QueryParams> parse_query(std::string_view query) {
  auto pairs = parse_query_pairs(query);
  if (!pairs) return std::nullopt;
  QueryParams out;
  for (auto& [k, v] : *pairs) out[k] = std::move(v);
  return out;
}

std::vector<std::string> query_values(std::string_view target, std::string_view name) {
  std::vector<std::string> out;
  if (auto pairs = parse_query_pairs(split_target(target).second))
    for (auto& [k, v] : *pairs)
      if (k == name) out.push_back(std::move(v));
  return out;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
  auto q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  // Bare integer: seconds.
  bool all_digits = true;
  for (char c : text) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
  if (all_digits) {
    if (text.size() > 9) return std::nullopt;
    return std::chrono::seconds(std::stoll(std::string(text)));
  }
  // Sum of <number><unit> terms, computed in nanoseconds with overflow checks.
  constexpr std::int64_t max_ns = std::numeric_limits<std::int64_t>::max() / 2;
  std::int64_t total_ns = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    std::string number(text.substr(start, i - start));
    if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
    std::size_t ustart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(ustart, i - ustart);
    double scale;
    if (unit == "ns")
      scale = 1;
    else if (unit == "us" || unit == "µs")
      scale = 1e3;
    else if (unit == "ms")
      scale = 1e6;
    else if (unit == "s")
      scale = 1e9;
    else if (unit == "m")
      scale = 60e9;
    else if (unit == "h")
      scale = 3600e9;
    else
      return std::nullopt;
    double value = std::stod(number) * scale;
    if (value > static_cast<double>(max_ns) || total_ns + static_cast<std::int64_t>(value) > max_ns)
      return std::nullopt;
    total_ns += static_cast<std::int64_t>(value);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(total_ns));
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  auto h = ms / 3'600'000;
  ms %= 3'600'000;
  auto m = ms / 60'000;
  ms %= 60'000;
  auto s = ms / 1000;
  ms %= 1000;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  if (ms) out += std::to_string(ms) + "ms";
  return out;
}

}  // namespace mooring::controlplane::http
