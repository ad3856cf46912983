#include "shared/mounts/mount_point.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace mooring::mounts {

namespace fs = std::filesystem;

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  const auto digit = [](char c) { return c >= '0' && c <= '7'; };
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && digit(field[i + 1]) && digit(field[i + 2]) && digit(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += field[i];
  }
  return out;
}

}  // namespace

std::string canonical_mount_path(const fs::path& path) {
  std::error_code ec;
  const auto canonical = fs::weakly_canonical(path, ec);
  std::string s = (ec ? path.lexically_normal() : canonical).string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<std::string> parse_mount_points(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
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

bool is_mount_point_in_mountinfo(const fs::path& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  const std::string wanted = canonical_mount_path(path);
  for (const auto& point : parse_mount_points(text.str())) {
    if (point == wanted) return true;
  }
  return false;
}

bool is_mount_point(const fs::path& path) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, 0, &st) != 0) {
    // A path that cannot be looked up is no mount point; anything else (EPERM on a foreign
    // mount, ENOSYS) gets the slow but certain answer.
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return is_mount_point_in_mountinfo(path);
  }
  if (!(st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return is_mount_point_in_mountinfo(path);
  return (st.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

}  // namespace mooring::mounts
