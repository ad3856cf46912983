#include "tests/support/descriptors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "tests/support/files.hpp"

namespace mooring::test {

namespace fs = std::filesystem;

std::map<int, std::string> open_descriptors(pid_t pid) {
  std::map<int, std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    const auto target = fs::read_symlink(it->path(), link_ec);
    if (!link_ec) out[std::stoi(it->path().filename().string())] = target.string();  // else closed meanwhile
  }
  return out;
}

std::map<int, std::string> inheritable_descriptors(pid_t pid) {
  std::map<int, std::string> out;
  for (const auto& [fd, target] : open_descriptors(pid)) {
    if (fd <= 2) continue;
    std::istringstream info(read_file("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd)));
    for (std::string key; info >> key;) {
      if (key != "flags:") continue;
      unsigned long flags = 0;
      info >> std::oct >> flags;
      if ((flags & O_CLOEXEC) == 0) out[fd] = target;
      break;
    }
  }
  return out;
}

std::string describe_descriptors(const std::map<int, std::string>& fds) {
  std::string out;
  for (const auto& [fd, target] : fds) out += std::to_string(fd) + " -> " + target + "\n";
  return out;
}

namespace {

bool under(const std::string& path, const std::string& prefix) {
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
}

// /proc/<pid>/stat: the state (field 3) and the parent (field 4), after the command's parentheses.
bool alive_with_parent(const fs::path& proc, pid_t& parent) {
  const auto stat = read_file(proc / "stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(stat.substr(paren + 1));
  char state = 0;
  rest >> state >> parent;
  return state != 'Z' && state != 'X';
}

}  // namespace

std::vector<ProcessInfo> running_processes() {
  std::vector<ProcessInfo> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    ProcessInfo p{static_cast<pid_t>(std::stol(name)), 0, read_file(it->path() / "cmdline")};
    if (p.pid == ::getpid() || !alive_with_parent(it->path(), p.parent)) continue;
    for (auto& c : p.cmdline)
      if (c == '\0') c = ' ';
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ProcessInfo> processes_using(const fs::path& dir) {
  const std::string prefix = dir.string() + "/";
  std::vector<ProcessInfo> out;
  for (auto& p : running_processes()) {
    bool uses = p.cmdline.find(prefix) != std::string::npos;
    std::error_code ec;
    const auto cwd = fs::read_symlink("/proc/" + std::to_string(p.pid) + "/cwd", ec).string() + "/";
    uses = uses || (!ec && cwd.compare(0, prefix.size(), prefix) == 0);
    if (!uses)
      for (const auto& [fd, target] : open_descriptors(p.pid))
        if (under(target, prefix)) {
          uses = true;
          break;
        }
    if (uses) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace mooring::test
