#include "plugins/hostpath/mount_table.hpp"

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace mooring::hostpath {
namespace {

std::error_code errno_code() { return {errno, std::generic_category()}; }

}  // namespace

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
