#include "shared/domain/units.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace mooring::domain {
namespace {

// The multiplier a unit stands for, after an optional "B" was taken off ("GiB" -> "Gi").
std::optional<std::int64_t> multiplier(std::string_view unit) {
  static constexpr std::pair<std::string_view, std::int64_t> kUnits[] = {
      {"", 1},
      {"K", 1000LL},
      {"k", 1000LL},
      {"M", 1000LL * 1000},
      {"G", 1000LL * 1000 * 1000},
      {"T", 1000LL * 1000 * 1000 * 1000},
      {"Ki", 1LL << 10},
      {"Mi", 1LL << 20},
      {"Gi", 1LL << 30},
      {"Ti", 1LL << 40},
  };
  for (const auto& [name, factor] : kUnits)
    if (unit == name) return factor;
  return std::nullopt;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<std::int64_t> parse_size(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  const auto whole_text = text.substr(0, i);
  std::string_view fraction_text;
  if (i < text.size() && text[i] == '.') {
    const auto start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction_text = text.substr(start, i - start);
    if (fraction_text.empty()) return std::nullopt;
  }
  if (whole_text.empty()) return std::nullopt;

  auto unit = text.substr(i);
  while (unit.starts_with(' ')) unit.remove_prefix(1);
  if (unit.size() > 1 && unit.ends_with('B')) unit.remove_suffix(1);  // "GiB" -> "Gi", "GB" -> "G"
  if (unit == "B") unit = {};
  const auto factor = multiplier(unit);
  if (!factor) return std::nullopt;

  std::int64_t whole = 0;
  const auto [end, ec] = std::from_chars(whole_text.data(), whole_text.data() + whole_text.size(), whole);
  if (ec != std::errc{} || end != whole_text.data() + whole_text.size()) return std::nullopt;
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (whole > kMax / *factor) return std::nullopt;
  std::int64_t bytes = whole * *factor;
  if (!fraction_text.empty()) {
    // Fewer digits than a double holds exactly matter here: a fraction of at most 2^40 bytes.
    const double fraction = std::stod("0." + std::string(fraction_text.substr(0, 15)));
    const auto extra = static_cast<std::int64_t>(std::llround(fraction * static_cast<double>(*factor)));
    if (bytes > kMax - extra) return std::nullopt;
    bytes += extra;
  }
  return bytes;
}

}  // namespace mooring::domain
