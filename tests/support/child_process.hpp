// Test support: run one of our binaries (or any program) as a child process: arguments and
// environment, stdout+stderr captured to a file, wait for a socket/file to appear, send signals
// (SIGTERM, SIGKILL, SIGSTOP, SIGCONT), wait for exit with a timeout. The destructor kills
// (SIGKILL) and reaps a child that is still running, so a failing test leaks no process.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::test {

// SIGSTOP to `pid`, then waits (up to 10 s) until all its threads are in the stopped state
// (/proc/<pid>/task/*/stat). False when the signal failed or the process did not stop in time.
bool stop_process(pid_t pid);

// Where ctest's build tree keeps our binaries: $MOORING_BUILD_DIR (set by tests/CMakeLists.txt).
// Known names map to their folder (mooring-hostpath → plugins/hostpath, mooring-nodeagent →
// services/nodeagent, mooring-controlplane → services/controlplane); other names are looked up
// directly under the build dir. Throws std::runtime_error naming the path when it is missing.
std::filesystem::path binary_path(std::string_view name);

struct SpawnOptions {
  std::filesystem::path binary;
  std::vector<std::string> args;            // argv[1..]
  std::map<std::string, std::string> env;   // set on top of (or instead of) the parent's environment
  bool inherit_env = true;
  std::filesystem::path output_file;        // stdout+stderr, appended; empty = /dev/null
  std::filesystem::path working_dir;        // empty = inherit
};

struct ExitStatus {
  bool exited = false;  // exited normally (then `code`), else killed by `signal`
  int code = 0;
  int signal = 0;
  std::string describe() const;  // "exit 0", "signal 9"
};

class ChildProcess {
 public:
  // Starts the process (in its own process group); throws std::runtime_error on failure.
  explicit ChildProcess(SpawnOptions options);
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const SpawnOptions& options() const { return options_; }

  // True while the process has not exited (reaps it if it just did).
  bool running();
  // Sends a signal; false when the process is already gone.
  bool signal(int sig);
  bool terminate() { return signal(SIGTERM); }
  bool kill() { return signal(SIGKILL); }
  // SIGSTOP, then waits until every thread of the child is stopped: kill(2) returns before a
  // busy or preempted thread gets to stop, and a test that sends a request "to a stopped plugin"
  // in that window would see it served.
  bool stop();
  bool resume() { return signal(SIGCONT); }

  // Waits up to `timeout` for the process to exit; its status, or nullopt if still running.
  std::optional<ExitStatus> wait_for_exit(std::chrono::milliseconds timeout);
  // The exit status once reaped.
  std::optional<ExitStatus> exit_status() const { return status_; }

  // Waits until `path` exists (a socket or file the child creates); false on timeout or when the
  // child exits first.
  bool wait_for_path(const std::filesystem::path& path, std::chrono::milliseconds timeout);

  // Everything the child wrote so far (reads output_file).
  std::string output() const;

 private:
  bool reap(bool block);

  SpawnOptions options_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

}  // namespace mooring::test
