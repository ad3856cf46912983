#include "tests/support/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mooring::test {

void write_file(const std::filesystem::path& path, std::string_view content) {
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << content;
  }
  std::filesystem::rename(tmp, path);
}

std::string read_file(const std::filesystem::path& path) {
  // read(2), not a filebuf: libstdc++'s filebuf throws from underflow when a read fails, which a
  // /proc/<pid>/ file does (ESRCH) when its process exits while it is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout, std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace mooring::test
