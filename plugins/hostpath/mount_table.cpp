#include "plugins/hostpath/mount_table.hpp"

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mooring::hostpath {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' &&
        s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::error_code errno_code() { return {errno, std::generic_category()}; }

}  // namespace

bool MountEntry::read_only() const {
  std::stringstream ss(options);
  for (std::string opt; std::getline(ss, opt, ',');) {
    if (opt == "ro") return true;
  }
  return false;
}

std::vector<MountEntry> parse_mount_table(std::string_view text) {
  std::vector<MountEntry> out;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string tok; ls >> tok;) f.push_back(tok);
    if (f.size() < 7) continue;
    MountEntry e;
    try {
      e.mount_id = std::stoi(f[0]);
      e.parent_id = std::stoi(f[1]);
    } catch (const std::exception&) {
      continue;
    }
    e.root = unescape(f[3]);
    e.mount_point = unescape(f[4]);
    e.options = f[5];
    std::size_t sep = 6;
    while (sep < f.size() && f[sep] != "-") ++sep;
    if (sep + 1 < f.size()) e.fs_type = f[sep + 1];
    if (sep + 2 < f.size()) e.source = unescape(f[sep + 2]);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<MountEntry> read_mount_table() {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_mount_table(ss.str());
}

std::string canonical_mount_path(const std::filesystem::path& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(path, ec);
  if (ec) p = path.lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool is_mount_point(const std::filesystem::path& path) {
  const std::string want = canonical_mount_path(path);
  for (const auto& m : read_mount_table()) {
    if (m.mount_point == want) return true;
  }
  return false;
}

std::error_code bind_mount(const std::filesystem::path& source, const std::filesystem::path& target, bool read_only) {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) return errno_code();
  if (read_only) {
    if (::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      const auto ec = errno_code();
      ::umount2(target.c_str(), MNT_DETACH);
      return ec;
    }
  }
  return {};
}

std::error_code unmount_all(const std::filesystem::path& path) {
  // Bounded: a path can carry a few stacked mounts, never an unbounded number.
  for (int layer = 0; layer < 16 && is_mount_point(path); ++layer) {
    int busy_tries = 0;
    for (;;) {
      if (::umount2(path.c_str(), 0) == 0) break;
      if (errno == EINVAL || errno == ENOENT) return {};  // not a mount point (any more)
      if (errno == EBUSY && ++busy_tries < 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (errno == EBUSY) {
        // Something still holds the mount open; detach it so the path is free. The filesystem
        // stays alive for the holder, which is the least harmful outcome.
        if (::umount2(path.c_str(), MNT_DETACH) == 0) break;
      }
      return errno_code();
    }
  }
  return {};
}

std::string check_mount_privilege(const std::filesystem::path& scratch_dir) {
  std::error_code ec;
  const auto src = scratch_dir / ("mount-check-src." + std::to_string(::getpid()));
  const auto dst = scratch_dir / ("mount-check-dst." + std::to_string(::getpid()));
  std::filesystem::create_directories(src, ec);
  std::filesystem::create_directories(dst, ec);
  std::string reason;
  if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    const int err = errno;
    reason = std::string("cannot bind-mount (") + std::strerror(err) + "): the node service needs root or " +
             "CAP_SYS_ADMIN (euid=" + std::to_string(::geteuid()) + ")";
  } else {
    ::umount2(dst.c_str(), MNT_DETACH);
  }
  std::filesystem::remove(src, ec);
  std::filesystem::remove(dst, ec);
  return reason;
}

}  // namespace mooring::hostpath
