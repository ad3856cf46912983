#include "services/nodeagent/volumes/mount_table.hpp"

#include <fstream>
#include <sstream>

namespace mooring::nodeagent {

namespace fs = std::filesystem;

namespace {

std::string unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    const auto digit = [](char c) { return c >= '0' && c <= '7'; };
    if (field[i] == '\\' && i + 3 < field.size() && digit(field[i + 1]) && digit(field[i + 2]) &&
        digit(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += field[i];
  }
  return out;
}

// Mountinfo spells paths without symlinks; ours may go through one (e.g. a /tmp symlink).
std::string normal_path(const fs::path& path) {
  std::error_code ec;
  auto canonical = fs::weakly_canonical(path, ec);
  return (ec ? path.lexically_normal() : canonical).string();
}

}  // namespace

std::vector<std::string> parse_mount_points(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // mount_id parent_id major:minor root mount_point ...
    std::size_t pos = 0;
    std::string_view field;
    for (int i = 0; i < 5; ++i) {
      while (pos < line.size() && line[pos] == ' ') ++pos;
      const std::size_t next = line.find(' ', pos);
      field = line.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
      pos = next == std::string_view::npos ? line.size() : next;
    }
    if (!field.empty()) out.push_back(unescape(field));
  }
  return out;
}

ProcMountTable::ProcMountTable(fs::path mountinfo) : mountinfo_(std::move(mountinfo)) {}

bool ProcMountTable::is_mounted(const fs::path& path) const {
  std::ifstream in(mountinfo_);
  std::stringstream text;
  text << in.rdbuf();
  const std::string wanted = normal_path(path);
  for (const auto& point : parse_mount_points(text.str())) {
    if (point == wanted) return true;
  }
  return false;
}

}  // namespace mooring::nodeagent
