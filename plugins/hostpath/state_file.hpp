// mooring-hostpath: the lock that lets several plugin processes share one data dir. The state
// files themselves are durable slot files (shared/durable).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace mooring::hostpath {

// An exclusive advisory lock (flock) on `path`, held for the object's lifetime. Lets several
// plugin processes share one data dir (controller + node plugins on one machine).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace mooring::hostpath
