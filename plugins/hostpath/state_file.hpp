// mooring-hostpath: durable small files. State is replaced atomically (temp file, fsync,
// rename, fsync of the directory) so a kill -9 leaves either the old or the new version.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace mooring::hostpath {

// Writes `content` to `path` atomically and durably.
std::error_code write_file_atomic(const std::filesystem::path& path, std::string_view content);

// The whole file, or nullopt when it does not exist (other errors are reported in `ec`).
std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec);

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
