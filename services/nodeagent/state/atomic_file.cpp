#include "services/nodeagent/state/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace mooring::nodeagent {
namespace {

std::error_code last_error() { return {errno, std::generic_category()}; }

std::error_code write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return last_error();
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

std::error_code write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  std::error_code ec;
  const auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  std::filesystem::create_directories(dir, ec);
  if (ec) return ec;
  // A unique temp name so two writers never share one temp file: the pid tells processes apart,
  // the counter writers within one (no /dev/urandom read per write).
  static std::atomic<std::uint64_t> sequence{0};
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++sequence);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return last_error();
  ec = write_all(fd, content);
  if (!ec && ::fsync(fd) != 0) ec = last_error();
  ::close(fd);
  if (!ec && ::rename(tmp.c_str(), path.c_str()) != 0) ec = last_error();
  if (ec) {
    ::unlink(tmp.c_str());
    return ec;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself must survive a crash
    ::close(dfd);
  }
  return {};
}

std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec) {
  ec.clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || !std::filesystem::exists(path)) return std::nullopt;
    ec = last_error();
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    ec = std::make_error_code(std::errc::io_error);
    return std::nullopt;
  }
  return ss.str();
}

}  // namespace mooring::nodeagent
