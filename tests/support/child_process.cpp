#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string out = options_.output_file.empty() ? "/dev/null" : options_.output_file.string();
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!options_.working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, options_.working_dir.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (a terminal's Ctrl-C does not hit it twice); default signal mask and
  // dispositions, whatever the test runner's threads had blocked.
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot spawn " + options_.binary.string() + ": " + std::strerror(rc));
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
