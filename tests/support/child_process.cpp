#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "tests/support/files.hpp"

extern char** environ;

namespace mooring::test {

namespace {

// The state letter of /proc/<pid>/task/<tid>/stat: the field after the parenthesised command,
// which may itself contain spaces and parentheses (hence the last ')').
char thread_state(const std::filesystem::path& stat_file) {
  const auto text = read_file(stat_file);
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return '?';
  return text[close + 2];
}

bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  const auto tasks = std::filesystem::path("/proc") / std::to_string(pid) / "task";
  bool any = false;
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    const char state = thread_state(t.path() / "stat");
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any && !ec;
}

// In the child between fork and exec: report errno to the parent and end.
[[noreturn]] void child_failed(int fd) {
  const int error = errno;
  (void)!::write(fd, &error, sizeof error);
  ::_exit(127);
}

// Starts argv[0] and returns its pid, or -errno. The child is killed (SIGKILL) when the thread
// that called this exits (PR_SET_PDEATHSIG: the test binary killed by ctest's timeout or by a
// closed pipe, which runs no destructor), so call it only from a thread that outlives the child
// (README.md). It runs in its own process group (a terminal's Ctrl-C does not hit it twice) with
// the default signal mask and dispositions, whatever the test runner's threads had blocked;
// stdin is /dev/null and stdout and stderr append to `out`; nothing else of ours crosses the exec. posix_spawn cannot set a death
// signal, so this forks; between fork and exec the child makes system calls only (the parent
// has other threads), and a pipe closed by the exec carries the errno of a failure back.
pid_t spawn_dying_with_parent(char* const* argv, char* const* envp, const char* out, const char* dir) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -errno;
  const pid_t parent = ::getpid();
  // Signals blocked across the fork: the child must not run a handler of the parent's before it
  // resets them.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto fail = [fd = report[1]] { child_failed(fd); };
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // SIGKILL, SIGSTOP: refused, harmless
    if (::setpgid(0, 0) != 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
    // The parent died before the prctl: its death signal will never come.
    if (::getppid() != parent) ::_exit(127);
    const int in = ::open("/dev/null", O_RDONLY);
    const int log = ::open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || log < 0 || ::dup2(in, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0) fail();
    if (in > 2) ::close(in);
    if (log > 2) ::close(log);
    // Nothing the test runner handed us (a shell's pipes, ctest's descriptors) reaches the child:
    // tests read what a service itself holds (/proc/<pid>/fd). Close-on-exec rather than closed,
    // so the report pipe still carries an exec failure.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail();
    if (dir != nullptr && ::chdir(dir) != 0) fail();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv, envp);
    fail();
  }
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    return -fork_error;
  }
  int error = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n != static_cast<ssize_t>(sizeof error)) return pid;  // closed by the exec
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return -error;
}

}  // namespace

bool stop_process(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  return wait_until([&] { return all_threads_stopped(pid); }, std::chrono::seconds(10), std::chrono::milliseconds(1));
}

std::filesystem::path binary_path(std::string_view name) {
  const char* dir = std::getenv("MOORING_BUILD_DIR");
  if (dir == nullptr || *dir == '\0') {
    throw std::runtime_error("MOORING_BUILD_DIR is not set (ctest sets it; export it to run a test binary by hand)");
  }
  static const std::map<std::string, std::string, std::less<>> kFolders = {
      {"mooring-hostpath", "plugins/hostpath"},
      {"mooring-nodeagent", "services/nodeagent"},
      {"mooring-controlplane", "services/controlplane"},
  };
  std::filesystem::path p = dir;
  if (auto it = kFolders.find(name); it != kFolders.end()) p /= it->second;
  p /= name;
  if (!std::filesystem::exists(p)) throw std::runtime_error("binary not built: " + p.string());
  return p;
}

std::string ExitStatus::describe() const {
  return exited ? "exit " + std::to_string(code) : "signal " + std::to_string(signal);
}

ChildProcess::ChildProcess(SpawnOptions options) : options_(std::move(options)) {
  std::vector<std::string> argv_s;
  argv_s.push_back(options_.binary.string());
  argv_s.insert(argv_s.end(), options_.args.begin(), options_.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::map<std::string, std::string> env_map;
  if (options_.inherit_env) {
    for (char** e = environ; e && *e; ++e) {
      const std::string kv(*e);
      if (const auto eq = kv.find('='); eq != std::string::npos) env_map[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  for (const auto& [k, v] : options_.env) env_map[k] = v;
  std::vector<std::string> env_s;
  for (const auto& [k, v] : env_map) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  const std::string out = options_.output_file.empty() ? "/dev/null" : options_.output_file.string();
  const std::string dir = options_.working_dir.string();
  pid_ = spawn_dying_with_parent(argv.data(), envp.data(), out.c_str(), dir.empty() ? nullptr : dir.c_str());
  if (pid_ < 0) {
    const int error = static_cast<int>(-pid_);
    pid_ = -1;
    throw std::runtime_error("cannot spawn " + options_.binary.string() + ": " + std::strerror(error));
  }
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : options_(std::move(other.options_)), pid_(other.pid_), status_(std::move(other.status_)) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    ::kill(pid_, SIGCONT);  // a stopped process still dies from SIGKILL; harmless either way
    reap(true);
  }
}

bool ChildProcess::reap(bool block) {
  if (pid_ <= 0 || status_) return true;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  ExitStatus s;
  if (r > 0 && WIFEXITED(st)) {
    s.exited = true;
    s.code = WEXITSTATUS(st);
  } else if (r > 0 && WIFSIGNALED(st)) {
    s.signal = WTERMSIG(st);
  }
  status_ = s;
  return true;
}

bool ChildProcess::running() { return pid_ > 0 && !reap(false); }

bool ChildProcess::signal(int sig) {
  if (!running()) return false;
  return ::kill(pid_, sig) == 0;
}

bool ChildProcess::stop() { return running() && stop_process(pid_); }

std::optional<ExitStatus> ChildProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  wait_until([&] { return !running(); }, timeout, std::chrono::milliseconds(10));
  return status_;
}

bool ChildProcess::wait_for_path(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  bool exited = false;
  const bool found = wait_until(
      [&] {
        std::error_code ec;
        if (std::filesystem::exists(path, ec)) return true;
        exited = !running();
        return exited;
      },
      timeout, std::chrono::milliseconds(10));
  std::error_code ec;
  return found && std::filesystem::exists(path, ec);
}

std::string ChildProcess::output() const {
  return options_.output_file.empty() ? std::string() : read_file(options_.output_file);
}

}  // namespace mooring::test
