// One of each: an exclusive lock on a file that a service holds for its whole life (flock, so the
// kernel releases it when the process dies, even by kill -9). The holder's pid is written into the
// file, so a second instance is refused with an error that names who holds it.
#pragma once

#include <filesystem>
#include <string>

#include "shared/domain/result.hpp"

namespace mooring::durable {

class InstanceLock {
 public:
  // Locks `path` (created 0600, its directory too). `what` names the holder in the refusal:
  // "node agent of data dir /var/lib/mooring/agent is already running (pid 4242; lock /…/lock)".
  // `busy` (optional) tells that refusal (another process holds the lock) from an I/O error.
  static domain::Expected<InstanceLock> acquire(const std::filesystem::path& path, const std::string& what,
                                                bool* busy = nullptr);

  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;
  ~InstanceLock();  // releases the lock (closing the descriptor)

  const std::filesystem::path& path() const { return path_; }

 private:
  InstanceLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace mooring::durable
