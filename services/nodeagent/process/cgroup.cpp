#include "services/nodeagent/process/cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;
const fs::path kMount = "/sys/fs/cgroup";
constexpr const char* kV1Controllers[] = {"memory", "cpu", "pids", "freezer"};

bool unified() { return fs::exists(kMount / "cgroup.controllers"); }

// The agent's own cgroup in `controller`'s hierarchy ("" for v2), from /proc/self/cgroup.
std::string own_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream list(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(list, c, ',');)
      if (c == controller) return line.substr(b + 1);
    if (controller.empty() && b == a + 1) return line.substr(b + 1);
  }
  return "/";
}

fs::path dir_for(const std::string& controller, const std::string& name) {
  const fs::path base = controller.empty() ? kMount : kMount / controller;
  return base / fs::path(own_path(controller)).relative_path() / "mooring" / name;
}

// An error names the file; a missing file (a v1 kernel without memsw) is no error when `optional`.
std::string write_file(const fs::path& file, const std::string& value, bool optional = false) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return optional && errno == ENOENT ? "" : "open " + file.string() + ": " + std::strerror(errno);
  const auto n = ::write(fd, value.data(), value.size());
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return "write " + value + " to " + file.string() + ": " + std::strerror(e);
  return "";
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int keyed_value(const std::string& text, const std::string& key) {
  std::stringstream in(text);
  for (std::string k; in >> k;) {
    long v = 0;
    in >> v;
    if (k == key) return static_cast<int>(v);
  }
  return 0;
}

std::string set_limits_v1(const std::vector<fs::path>& dirs, const CgroupLimits& l) {
  for (const auto& dir : dirs) {
    const auto ctrl = dir.lexically_relative(kMount).begin()->string();
    std::string err;
    if (ctrl == "memory" && l.memory_mb > 0) {
      const auto bytes = std::to_string(static_cast<long long>(l.memory_mb) * 1024 * 1024);
      err = write_file(dir / "memory.limit_in_bytes", bytes);
      if (err.empty()) err = write_file(dir / "memory.memsw.limit_in_bytes", bytes, true);
    }
    if (ctrl == "cpu" && l.cpu_millicores > 0) {
      err = write_file(dir / "cpu.cfs_period_us", "100000");
      if (err.empty()) err = write_file(dir / "cpu.cfs_quota_us", std::to_string(l.cpu_millicores * 100));
      if (err.empty())
        err = write_file(dir / "cpu.shares", std::to_string(std::max(2, l.cpu_millicores * 1024 / 1000)));
    }
    if (!err.empty()) return err;
  }
  return "";
}

std::string set_limits_v2(const fs::path& dir, const CgroupLimits& l) {
  std::string err;
  if (l.memory_mb > 0) {
    const auto bytes = std::to_string(static_cast<long long>(l.memory_mb) * 1024 * 1024);
    err = write_file(dir / "memory.max", bytes);
    if (err.empty()) err = write_file(dir / "memory.swap.max", "0", true);
  }
  if (err.empty() && l.cpu_millicores > 0)
    err = write_file(dir / "cpu.max", std::to_string(l.cpu_millicores * 100) + " 100000");
  return err;
}

}  // namespace

std::variant<TaskCgroup, std::string> TaskCgroup::create(const std::string& name, const CgroupLimits& limits) {
  TaskCgroup cg;
  cg.v2_ = unified();
  std::error_code ec;
  if (cg.v2_) {
    const auto dir = dir_for("", name);
    fs::create_directories(dir.parent_path(), ec);
    // The controllers the tasks' limits need, for the children of the `mooring` group.
    (void)write_file(dir.parent_path() / "cgroup.subtree_control", "+memory +cpu +pids", true);
    fs::create_directory(dir, ec);
    if (ec) return "create " + dir.string() + ": " + ec.message();
    cg.dirs_.push_back(dir);
    if (auto err = set_limits_v2(dir, limits); !err.empty()) return err;
    return cg;
  }
  for (const char* ctrl : kV1Controllers) {
    const auto dir = dir_for(ctrl, name);
    fs::create_directories(dir, ec);
    if (ec) return "create " + dir.string() + ": " + ec.message();
    cg.dirs_.push_back(dir);
  }
  if (auto err = set_limits_v1(cg.dirs_, limits); !err.empty()) return err;
  return cg;
}

TaskCgroup TaskCgroup::find(const std::string& name) {
  TaskCgroup cg;
  cg.v2_ = unified();
  std::error_code ec;
  if (cg.v2_) {
    if (fs::is_directory(dir_for("", name), ec)) cg.dirs_.push_back(dir_for("", name));
    return cg;
  }
  for (const char* ctrl : kV1Controllers)
    if (fs::is_directory(dir_for(ctrl, name), ec)) cg.dirs_.push_back(dir_for(ctrl, name));
  return cg;
}

std::vector<int> TaskCgroup::open_procs() const {
  std::vector<int> fds;
  for (const auto& dir : dirs_) {
    const int fd = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

int TaskCgroup::open_dir() const {
  if (dirs_.empty()) return -1;
  return ::open(dirs_[0].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

std::vector<pid_t> TaskCgroup::processes() const {
  std::vector<pid_t> out;
  for (const auto& dir : dirs_) {
    std::ifstream in(dir / "cgroup.procs");
    for (pid_t p; in >> p;)
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

int TaskCgroup::oom_kills() const {
  if (dirs_.empty()) return 0;
  if (v2_) return keyed_value(read_file(dirs_[0] / "memory.events"), "oom_kill");
  for (const auto& dir : dirs_)
    if (dir.lexically_relative(kMount).begin()->string() == "memory")
      return keyed_value(read_file(dir / "memory.oom_control"), "oom_kill");
  return 0;
}

bool TaskCgroup::kill_all(int attempts) const {
  if (v2_ && !dirs_.empty()) (void)write_file(dirs_[0] / "cgroup.kill", "1", true);
  fs::path freezer;
  for (const auto& dir : dirs_)
    if (dir.lexically_relative(kMount).begin()->string() == "freezer") freezer = dir;
  for (int round = 0; round < attempts; ++round) {
    const auto pids = processes();
    if (pids.empty()) return true;
    // Frozen, a process cannot fork a replacement between our reading and our kill.
    if (!freezer.empty()) (void)write_file(freezer / "freezer.state", "FROZEN");
    for (const pid_t p : pids) ::kill(p, SIGKILL);
    if (!freezer.empty()) (void)write_file(freezer / "freezer.state", "THAWED");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return processes().empty();
}

void TaskCgroup::remove() const {
  for (const auto& dir : dirs_) ::rmdir(dir.c_str());
}

}  // namespace mooring::nodeagent
