#include "cli/table.hpp"

#include <algorithm>

namespace mooring::cli {

namespace {

// Control characters (a newline in an error message) would break the columns.
std::string one_line(const std::string& s) {
  std::string out = s;
  for (auto& ch : out)
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  return out;
}

void pad(std::string& line, const std::string& cell, std::size_t width) {
  line += cell;
  line.append(width - std::min(width, display_width(cell)), ' ');
}

void trim_right(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

}  // namespace

std::size_t display_width(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (auto& c : cells) c = one_line(c);
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths(headers_.size(), 0);
  for (std::size_t i = 0; i < headers_.size(); ++i) widths[i] = display_width(headers_[i]);
  for (const auto& row : rows_)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) line += "  ";
      pad(line, cells[i], widths[i]);
    }
    trim_right(line);
    out += line + "\n";
  };
  emit(headers_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string KeyValues::render() const {
  std::size_t width = 0;
  for (const auto& [k, _] : rows_) width = std::max(width, display_width(k));
  std::string out;
  for (const auto& [k, v] : rows_) {
    std::string line;
    pad(line, k, width);
    line += " = " + one_line(v);
    trim_right(line);
    out += line + "\n";
  }
  return out;
}

}  // namespace mooring::cli
