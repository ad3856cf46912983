#include "shared/mounts/volume_group.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mooring::mounts {
namespace {

namespace fs = std::filesystem;

std::string chgrp_one(const fs::path& p, gid_t gid) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return "stat " + p.string() + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return {};  // a link's target is not ours to change
  if (::lchown(p.c_str(), static_cast<uid_t>(-1), gid) != 0) return "chown " + p.string() + ": " + std::strerror(errno);
  mode_t mode = (st.st_mode & 07777) | S_IRGRP | S_IWGRP;
  if (S_ISDIR(st.st_mode) || (st.st_mode & S_IXUSR)) mode |= S_IXGRP;
  if (S_ISDIR(st.st_mode)) mode |= S_ISGID;  // new files inherit the group
  if (::chmod(p.c_str(), mode) != 0) return "chmod " + p.string() + ": " + std::strerror(errno);
  return {};
}

}  // namespace

GroupChange give_tree_to_group(const fs::path& root, gid_t gid, bool always) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return {.error = "stat " + root.string() + ": " + std::strerror(errno)};
  if (!always && st.st_gid == gid && (st.st_mode & S_IWGRP) && (st.st_mode & S_ISGID)) return {};
  if (auto e = chgrp_one(root, gid); !e.empty()) return {.error = e};
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec))
    if (auto e = chgrp_one(it->path(), gid); !e.empty()) return {.walked = true, .error = e};
  if (ec) return {.walked = true, .error = "walk " + root.string() + ": " + ec.message()};
  return {.walked = true};
}

}  // namespace mooring::mounts
