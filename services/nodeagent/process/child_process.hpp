// A child process the agent launches and supervises (CSI plugins; tasks are TaskProcess, which
// outlives the agent). Started by spawn_process (spawn.hpp: only its standard streams reach it),
// own process group, stdout/stderr forwarded line by line into the agent log, exit observed
// asynchronously, stop = SIGTERM to the group then SIGKILL after a grace period.
//
// Exit is observed through a pidfd (pidfd_open, Linux 5.3+) wrapped in an Asio
// posix::stream_descriptor: it becomes readable when the child exits, and the child is then
// reaped with waitpid(pid) for that pid only. Unlike a SIGCHLD signal_set + waitpid(-1), this
// never steals the exit status of children owned by other code in the process (gRPC, tests,
// the allocation runner), coalesced signals cannot lose an exit, and no signal mask games are
// needed in a multi-threaded process.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::nodeagent {

struct ProcessSpec {
  std::string name;  // for logs: plugin id, alloc/task name
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // added to (and overriding) the agent's environment
  bool inherit_env = true;
  std::string working_dir;  // empty: the agent's
};

struct ExitStatus {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the terminating signal, 0 for a normal exit
  bool success() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exited with code 3", "killed by signal 9 (SIGKILL)"
};

// What waitpid's status word says. Shared by the plugin processes and the tasks.
ExitStatus exit_status_from_wait(int wait_status);
// pidfd_open(2): a descriptor that becomes readable when `pid` exits (-1 and errno on failure).
int open_pidfd(pid_t pid);

enum class OutputStream { out, err };
// Receives every complete output line (without the newline). Runs on the process's executor.
using LineSink = std::function<void(OutputStream, std::string_view)>;

// A LineSink that writes each line into the agent log with the process name.
LineSink log_lines(std::string component, std::string name);

class ChildProcess : public std::enable_shared_from_this<ChildProcess> {
 public:
  // Starts the process. An expected failure (command not found, not executable) is a value.
  static boost::system::result<std::shared_ptr<ChildProcess>> spawn(boost::asio::any_io_executor ex,
                                                                    const ProcessSpec& spec, LineSink sink);
  ~ChildProcess();  // a child still running here is killed and reaped (last resort)
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

  // Pumps stdout/stderr and waits for the exit; completes once the process exited and its output
  // is drained (or a short grace passed, when a grandchild keeps the pipes open). Exactly one
  // run() per process, spawned into the owner's task group; wait()/stop() rely on it.
  boost::asio::awaitable<ExitStatus> run();

  // Waits for the exit observed by run(). Any number of concurrent waiters.
  boost::asio::awaitable<ExitStatus> wait();

  std::optional<ExitStatus> exit_status() const { return status_; }
  bool running() const { return !status_; }

  // Sends `sig` to the whole process group; false once the process has been reaped.
  bool signal(int sig);

  // SIGTERM to the group, then SIGKILL after `grace`; returns the exit status.
  boost::asio::awaitable<ExitStatus> stop(std::chrono::milliseconds grace);

 private:
  struct Impl;
  ChildProcess(std::string name, pid_t pid, std::unique_ptr<Impl> impl);
  boost::asio::awaitable<void> pump(OutputStream which);
  boost::asio::awaitable<void> watch_exit();
  void reap(bool block);

  std::string name_;
  pid_t pid_;
  std::optional<ExitStatus> status_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::nodeagent
