#include "tests/support/mountinfo.hpp"

#include <sys/mount.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mooring::test {
namespace {

std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool is_at_or_below(const std::string& path, const std::string& prefix) {
  if (path == prefix) return true;
  if (prefix == "/") return true;
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 && path[prefix.size()] == '/';
}

}  // namespace

bool MountInfo::read_only() const {
  std::stringstream ss(options);
  for (std::string opt; std::getline(ss, opt, ',');) {
    if (opt == "ro") return true;
  }
  return false;
}

std::vector<MountInfo> parse_mountinfo(std::string_view text) {
  std::vector<MountInfo> out;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string tok; ls >> tok;) f.push_back(tok);
    if (f.size() < 7) continue;
    MountInfo m;
    try {
      m.mount_id = std::stoi(f[0]);
      m.parent_id = std::stoi(f[1]);
    } catch (const std::exception&) {
      continue;
    }
    m.root = unescape(f[3]);
    m.mount_point = unescape(f[4]);
    m.options = f[5];
    std::size_t sep = 6;
    while (sep < f.size() && f[sep] != "-") ++sep;
    if (sep + 1 < f.size()) m.fs_type = f[sep + 1];
    if (sep + 2 < f.size()) m.source = unescape(f[sep + 2]);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<MountInfo> read_mountinfo() {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_mountinfo(ss.str());
}

std::string canonical_path(const std::filesystem::path& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) p = path.lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::optional<MountInfo> find_mount(const std::filesystem::path& path) {
  const std::string want = canonical_path(path);
  std::optional<MountInfo> found;
  for (auto& m : read_mountinfo()) {
    if (m.mount_point == want) found = std::move(m);  // later lines are stacked on top
  }
  return found;
}

bool is_mounted(const std::filesystem::path& path) { return find_mount(path).has_value(); }

std::vector<MountInfo> mounts_under(const std::filesystem::path& prefix) {
  const std::string want = canonical_path(prefix);
  std::vector<std::pair<std::size_t, MountInfo>> found;  // (position in mountinfo, mount)
  std::size_t pos = 0;
  for (auto& m : read_mountinfo()) {
    if (is_at_or_below(m.mount_point, want)) found.emplace_back(pos, std::move(m));
    ++pos;
  }
  // Deepest path first; on one path the later (upper, stacked) mount first.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    if (a.second.mount_point.size() != b.second.mount_point.size())
      return a.second.mount_point.size() > b.second.mount_point.size();
    return a.first > b.first;
  });
  std::vector<MountInfo> out;
  for (auto& [p, m] : found) out.push_back(std::move(m));
  return out;
}

bool unmount_all_under(const std::filesystem::path& prefix) {
  for (int round = 0; round < 4; ++round) {
    const auto mounts = mounts_under(prefix);
    if (mounts.empty()) return true;
    for (const auto& m : mounts) {
      if (::umount2(m.mount_point.c_str(), 0) != 0) ::umount2(m.mount_point.c_str(), MNT_DETACH);
    }
  }
  return mounts_under(prefix).empty();
}

}  // namespace mooring::test
