#include "plugins/hostpath/loop_device.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace mooring::hostpath {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kLoopMajor = 7;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

std::string errno_text(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

// The device node for loop index `n`; made when /dev is not a devtmpfs that made it (containers).
std::string loop_node(int n, std::string& error) {
  const std::string path = "/dev/loop" + std::to_string(n);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return path;
  if (::mknod(path.c_str(), S_IFBLK | 0660, makedev(kLoopMajor, static_cast<unsigned>(n))) != 0 && errno != EEXIST) {
    error = errno_text("mknod " + path);
    return {};
  }
  return path;
}

std::string read_trimmed(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  std::getline(in, text);
  return text;
}

std::string canonical_or_same(const fs::path& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p.string() : c.string();
}

}  // namespace

bool is_block_volume(const fs::path& volume_dir) {
  std::error_code ec;
  return fs::is_regular_file(volume_dir / kBlockImage, ec);
}

std::string attach_loop(const fs::path& file, bool read_only, std::string& error) {
  Fd backing(::open(file.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
  if (!backing.ok()) {
    error = errno_text("open " + file.string());
    return {};
  }
  Fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control.ok()) {
    error = errno_text("open /dev/loop-control");
    return {};
  }
  // Another process may take the free device between GET_FREE and CONFIGURE: ask again.
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int n = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0) {
      error = errno_text("LOOP_CTL_GET_FREE");
      return {};
    }
    const std::string path = loop_node(n, error);
    if (path.empty()) return {};
    Fd device(::open(path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
    if (!device.ok()) {
      error = errno_text("open " + path);
      return {};
    }
    loop_config config{};
    config.fd = static_cast<std::uint32_t>(backing.get());
    config.info.lo_flags = read_only ? LO_FLAGS_READ_ONLY : 0;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), file.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(device.get(), LOOP_CONFIGURE, &config) == 0) return path;
    if (errno != EBUSY) {
      error = errno_text("LOOP_CONFIGURE " + path + " with " + file.string());
      return {};
    }
  }
  error = "no free loop device stayed free long enough to attach " + file.string();
  return {};
}

std::string loop_backing_file(const std::string& device) {
  const auto name = fs::path(device).filename().string();
  if (!name.starts_with("loop")) return {};
  return read_trimmed(fs::path("/sys/block") / name / "loop" / "backing_file");
}

bool loop_backed_by(const std::string& device, const fs::path& file) {
  const auto backing = loop_backing_file(device);
  return !backing.empty() && backing == canonical_or_same(file);
}

std::vector<std::string> loops_backed_by(const fs::path& file) {
  std::vector<std::string> out;
  const std::string want = canonical_or_same(file);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/block", ec)) {
    const auto name = entry.path().filename().string();
    if (!name.starts_with("loop")) continue;
    if (read_trimmed(entry.path() / "loop" / "backing_file") == want) out.push_back("/dev/" + name);
  }
  return out;
}

std::error_code detach_loop(const std::string& device) {
  Fd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok())
    return errno == ENOENT || errno == ENXIO ? std::error_code{} : std::error_code(errno, std::generic_category());
  for (int attempt = 0;; ++attempt) {
    if (::ioctl(fd.get(), LOOP_CLR_FD) == 0 || errno == ENXIO) return {};  // ENXIO: not attached
    if (errno != EBUSY || attempt == 20) return {errno, std::generic_category()};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::error_code refresh_loop_capacity(const std::string& device) {
  Fd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok() || ::ioctl(fd.get(), LOOP_SET_CAPACITY, 0) != 0) return {errno, std::generic_category()};
  return {};
}

std::string check_loop_support() {
  Fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control.ok()) return errno_text("open /dev/loop-control");
  if (::ioctl(control.get(), LOOP_CTL_GET_FREE) < 0) return errno_text("LOOP_CTL_GET_FREE");
  return {};
}

}  // namespace mooring::hostpath
