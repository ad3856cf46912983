// CLI room: human output. A table with aligned columns (two spaces between columns, no trailing
// blanks) and a key/value block ("Key  = value", Nomad-style). Widths count UTF-8 characters.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mooring::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Missing cells are blank; extra cells are an error of the caller and are dropped.
  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  std::size_t size() const { return rows_.size(); }
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

class KeyValues {
 public:
  void add(std::string key, std::string value) { rows_.emplace_back(std::move(key), std::move(value)); }
  std::string render() const;

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

// Characters, not bytes, so names with accents still line up.
std::size_t display_width(const std::string& s);

}  // namespace mooring::cli
