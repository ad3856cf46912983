#include "services/nodeagent/process/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>

#include "services/nodeagent/process/spawn.hpp"
#include "shared/config/settings.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using asio::use_awaitable;
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// After the exit, output still buffered in the pipes is read for at most this long: a
// grandchild that inherited the pipes must not keep the owner waiting.
constexpr auto kDrainGrace = std::chrono::seconds(2);
constexpr size_t kMaxLine = 16 * 1024;
// What a bare command is looked up in when the child's environment has no PATH (glibc's default).
constexpr const char* kDefaultPath = "/bin:/usr/bin";

boost::system::error_code errno_code(int e) { return {e, boost::system::system_category()}; }

}  // namespace

int open_pidfd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

ExitStatus exit_status_from_wait(int wstatus) {
  ExitStatus s;
  if (WIFEXITED(wstatus)) {
    s.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
  }
  return s;
}

std::string ExitStatus::describe() const {
  if (signal == 0) return "exited with code " + std::to_string(exit_code);
  const char* abbrev = ::sigabbrev_np(signal);
  return "killed by signal " + std::to_string(signal) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
}

LineSink log_lines(std::string component, std::string name) {
  return [log = log::Logger(std::move(component)), name = std::move(name)](OutputStream s, std::string_view line) {
    log.info("output", {{"plugin", name}, {"stream", s == OutputStream::out ? "stdout" : "stderr"}, {"line", line}});
  };
}

struct ChildProcess::Impl {
  Impl(asio::any_io_executor ex, LineSink s)
      : out(ex), err(ex), pidfd(ex), exit_signal(ex), drain_timer(ex), sink(std::move(s)) {
    exit_signal.expires_at(asio::steady_timer::time_point::max());
  }
  asio::posix::stream_descriptor out;
  asio::posix::stream_descriptor err;
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer exit_signal;  // cancelled once the exit is observed: wakes every waiter
  asio::steady_timer drain_timer;
  LineSink sink;
  int pumps_running = 2;
  bool run_started = false;
};

ChildProcess::ChildProcess(std::string name, pid_t pid, std::unique_ptr<Impl> impl)
    : name_(std::move(name)), pid_(pid), impl_(std::move(impl)) {}

ChildProcess::~ChildProcess() {
  if (!status_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    reap(true);
  }
}

boost::system::result<std::shared_ptr<ChildProcess>> ChildProcess::spawn(asio::any_io_executor ex,
                                                                         const ProcessSpec& spec, LineSink sink) {
  if (spec.command.empty()) return errno_code(EINVAL);
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return errno_code(errno);
  UniqueFd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return errno_code(errno);
  UniqueFd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  SpawnRequest request;
  request.env = spec.inherit_env ? config::environment("") : std::map<std::string, std::string>{};
  for (const auto& [k, v] : spec.env) request.env[k] = v;
  // A bare name is looked up in the child's PATH (the agent's unless the spec sets one).
  const auto program = resolve_command(spec.command, request.env.contains("PATH") ? request.env["PATH"] : kDefaultPath);
  if (!program) return errno_code(ENOENT);
  request.program = *program;
  request.argv.push_back(spec.command);
  request.argv.insert(request.argv.end(), spec.args.begin(), spec.args.end());
  request.stdout_fd = out_w.fd;
  request.stderr_fd = err_w.fd;
  request.working_dir = spec.working_dir;
  // Own process group: stop signals reach the plugin's children too.
  request.isolation = SpawnRequest::Isolation::own_group;
  const auto spawned = spawn_process(request);
  if (!spawned) return spawned.error();
  const pid_t pid = *spawned;

  UniqueFd pidfd{open_pidfd(pid)};
  if (pidfd.fd < 0) {
    const int e = errno;
    ::kill(-pid, SIGKILL);
    int ws;
    ::waitpid(pid, &ws, 0);
    return errno_code(e);
  }
  // Only the child writes: our copies must go, or the pipes never reach EOF.
  out_w.close();
  err_w.close();
  auto impl = std::make_unique<Impl>(ex, std::move(sink));
  impl->out.assign(out_r.release());
  impl->err.assign(err_r.release());
  impl->pidfd.assign(pidfd.release());
  impl->out.non_blocking(true);
  impl->err.non_blocking(true);
  return std::shared_ptr<ChildProcess>(new ChildProcess(spec.name, pid, std::move(impl)));
}

void ChildProcess::reap(bool block) {
  if (status_) return;
  int ws = 0;
  while (true) {
    const pid_t r = ::waitpid(pid_, &ws, block ? 0 : WNOHANG);
    if (r == pid_) {
      status_ = exit_status_from_wait(ws);
      return;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      // Someone else reaped it (ECHILD): the status is lost, but the process is gone.
      status_ = ExitStatus{};
      return;
    }
    return;  // WNOHANG and still running
  }
}

asio::awaitable<void> ChildProcess::pump(OutputStream which) {
  auto& sd = which == OutputStream::out ? impl_->out : impl_->err;
  std::string pending;
  char buf[4096];
  while (true) {
    auto [ec, n] = co_await sd.async_read_some(asio::buffer(buf), nothrow);
    if (n > 0) {
      pending.append(buf, n);
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(pending.data() + start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (impl_->sink) impl_->sink(which, line);
      }
      pending.erase(0, start);
      if (pending.size() > kMaxLine) {
        if (impl_->sink) impl_->sink(which, pending);
        pending.clear();
      }
    }
    if (ec) break;  // EOF, closed by the drain deadline, or cancelled
  }
  if (!pending.empty() && impl_->sink) impl_->sink(which, pending);
  if (--impl_->pumps_running == 0) impl_->drain_timer.cancel();
}

asio::awaitable<void> ChildProcess::watch_exit() {
  auto [ec] = co_await impl_->pidfd.async_wait(asio::posix::stream_descriptor::wait_read, nothrow);
  if (ec) {
    // Cancelled: the owner is going away. Close the pipes so the pumps finish too.
    boost::system::error_code ignored;
    impl_->out.close(ignored);
    impl_->err.close(ignored);
    co_return;
  }
  reap(true);
  // Stragglers in the plugin's group (it forked helpers) would keep the pipes open; the group id
  // cannot be reused while any of them lives.
  ::kill(-pid_, SIGKILL);
  impl_->exit_signal.cancel();
  if (impl_->pumps_running > 0) {
    impl_->drain_timer.expires_after(kDrainGrace);
    co_await impl_->drain_timer.async_wait(nothrow);
    boost::system::error_code ignored;
    impl_->out.close(ignored);
    impl_->err.close(ignored);
  }
}

asio::awaitable<ExitStatus> ChildProcess::run() {
  using namespace asio::experimental::awaitable_operators;
  if (impl_->run_started) throw std::logic_error("ChildProcess::run() called twice for " + name_);
  const auto self = shared_from_this();  // the owner may drop its handle while we run
  impl_->run_started = true;
  // None of the three throws for an I/O error; a cancellation ends all three.
  co_await (pump(OutputStream::out) && pump(OutputStream::err) && watch_exit());
  if (!status_) throw boost::system::system_error(asio::error::operation_aborted);
  co_return *status_;
}

asio::awaitable<ExitStatus> ChildProcess::wait() {
  while (!status_) {
    co_await impl_->exit_signal.async_wait(nothrow);
    if (!status_) throw boost::system::system_error(asio::error::operation_aborted);
  }
  co_return *status_;
}

bool ChildProcess::signal(int sig) {
  if (status_) return false;
  return ::kill(-pid_, sig) == 0 || ::kill(pid_, sig) == 0;
}

asio::awaitable<ExitStatus> ChildProcess::stop(std::chrono::milliseconds grace) {
  using namespace asio::experimental::awaitable_operators;
  if (status_) co_return *status_;
  signal(SIGTERM);
  // A stopped process (SIGSTOP, a debugger, a frozen cgroup) acts on SIGTERM only once continued;
  // without this, shutdown would wait the whole grace for a frozen plugin.
  signal(SIGCONT);
  asio::steady_timer deadline(impl_->exit_signal.get_executor());
  deadline.expires_after(grace);
  // Both waits are non-throwing, so `||` is safe here (it returns on the first to finish).
  co_await (impl_->exit_signal.async_wait(nothrow) || deadline.async_wait(nothrow));
  if (!status_) {
    log::Logger("process").warn("did not stop after SIGTERM, sending SIGKILL",
                                {{"name", name_}, {"pid", static_cast<int>(pid_)}, {"grace", grace}});
    signal(SIGKILL);
  }
  co_return co_await wait();
}

}  // namespace mooring::nodeagent
