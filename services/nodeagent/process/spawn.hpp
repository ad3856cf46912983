// How the agent starts every child process (CSI plugins, allocation tasks): one posix_spawn
// setup, so that what a child inherits is decided here and nowhere else. A child gets exactly
// its stdin, stdout and stderr; everything else the
// agent holds is closed in the child before the exec, close-on-exec or not (an inherited
// listening socket kept the agent's metrics port busy after a crash: issue 40). Signal mask
// empty and dispositions default (the agent ignores SIGPIPE; a child must not inherit that).
// A task's user, namespaces and cgroup are walls.hpp's start (a clone, since they happen between
// the fork and the exec); it shares this file's descriptor rules (spawn_parts.hpp).
#pragma once

#include <sys/types.h>

#include <boost/system/result.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mooring::nodeagent {

// A descriptor closed when it goes out of scope.
struct UniqueFd {
  int fd = -1;
  UniqueFd() = default;
  explicit UniqueFd(int f) : fd(f) {}
  ~UniqueFd() { close(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      close();
      fd = other.release();
    }
    return *this;
  }
  int release() { return std::exchange(fd, -1); }
  void close();
};

struct SpawnRequest {
  std::string program;                     // a path (resolve_command() finds a bare name)
  std::vector<std::string> argv;           // argv[0] first
  std::map<std::string, std::string> env;  // the child's whole environment
  // Descriptors of the caller that become the child's 0, 1 and 2; -1 is /dev/null. The caller
  // keeps (and closes) its own copies.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::filesystem::path working_dir;  // empty: the agent's
  // own_group: a process group of its own (a plugin: its stop reaches its helpers, and a
  // terminal's Ctrl-C to the agent's group does not reach it). own_session: a session of its own
  // (a task, which outlives the agent by design).
  enum class Isolation { own_group, own_session } isolation = Isolation::own_group;
};

// Starts the child and returns its pid. Failures, the exec's included (ENOENT, EACCES, ENOEXEC),
// are the errno as an error code; nothing is left running then.
boost::system::result<pid_t> spawn_process(const SpawnRequest& request);

// `command` as is when it holds a '/', else the first executable regular file named `command`
// in the directories of `path` (the child's PATH, not the agent's); nullopt when none is.
std::optional<std::string> resolve_command(const std::string& command, const std::string& path);

}  // namespace mooring::nodeagent
