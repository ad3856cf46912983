// What the two ways of starting a child (spawn.cpp's posix_spawn, walls.cpp's clone) share:
// descriptor copies out of the child's way, and argv/envp arrays. Private to the process room.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace mooring::nodeagent::parts {

// Owns the descriptors made for one spawn (duplicates, /dev/null) and closes them after it.
struct Owned {
  std::vector<int> fds;
  ~Owned() { close_all(); }
  void close_all() {
    for (const int fd : fds) ::close(fd);
    fds.clear();
  }
  // A close-on-exec copy of `fd` numbered at least `floor`: a source can then never be one of
  // the child's target numbers (0..floor-1), so one dup2 cannot overwrite another's source, and
  // closing from `floor` in the child takes the copies away.
  int above(int fd, int floor) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (copy >= 0) fds.push_back(copy);
    return copy;
  }
  // /dev/null, numbered at least `floor` (one per spawn).
  int null_above(int floor) {
    if (null_fd < 0) {
      const int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (fd < 0) return -1;
      null_fd = above(fd, floor);
      ::close(fd);
    }
    return null_fd;
  }
  int null_fd = -1;
};

inline std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

inline std::vector<std::string> environment(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace mooring::nodeagent::parts
