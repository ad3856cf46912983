#include "services/nodeagent/process/spawn.hpp"

#include "services/nodeagent/process/spawn_parts.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

namespace mooring::nodeagent {
namespace {

boost::system::error_code errno_code(int e) { return {e, boost::system::system_category()}; }

struct FileActions {
  posix_spawn_file_actions_t a;
  FileActions() { posix_spawn_file_actions_init(&a); }
  ~FileActions() { posix_spawn_file_actions_destroy(&a); }
};

struct Attributes {
  posix_spawnattr_t a;
  Attributes() { posix_spawnattr_init(&a); }
  ~Attributes() { posix_spawnattr_destroy(&a); }
};

// The child's descriptors: 0..2, then nothing. Returns 0 or an errno.
int plan_descriptors(const SpawnRequest& r, FileActions& actions, parts::Owned& owned) {
  constexpr int floor = 3;
  const std::vector<int> sources{r.stdin_fd, r.stdout_fd, r.stderr_fd};
  for (std::size_t target = 0; target < sources.size(); ++target) {
    int source = sources[target];
    if (source < 0) {
      source = owned.null_above(floor);
      if (source < 0) return errno;
    } else {
      source = owned.above(source, floor);
      if (source < 0) return errno;
    }
    if (const int rc = posix_spawn_file_actions_adddup2(&actions.a, source, static_cast<int>(target)); rc != 0)
      return rc;
  }
  // In the child, after the dup2s: close_range(floor, ~0) (glibc 2.34+), so nothing the agent
  // opened without close-on-exec (or that another thread opened meanwhile) reaches the child.
  if (const int rc = posix_spawn_file_actions_addclosefrom_np(&actions.a, floor); rc != 0) return rc;
  if (!r.working_dir.empty())
    if (const int rc = posix_spawn_file_actions_addchdir_np(&actions.a, r.working_dir.c_str()); rc != 0) return rc;
  return 0;
}

void plan_signals_and_group(const SpawnRequest& r, Attributes& attr) {
  sigset_t empty_mask, defaults;
  sigemptyset(&empty_mask);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigmask(&attr.a, &empty_mask);
  posix_spawnattr_setsigdefault(&attr.a, &defaults);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (r.isolation == SpawnRequest::Isolation::own_session) {
    flags |= POSIX_SPAWN_SETSID;
  } else {
    posix_spawnattr_setpgroup(&attr.a, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr.a, flags);
}

}  // namespace

void UniqueFd::close() {
  if (fd >= 0) ::close(std::exchange(fd, -1));
}

boost::system::result<pid_t> spawn_process(const SpawnRequest& r) {
  if (r.program.empty() || r.argv.empty()) return errno_code(EINVAL);
  parts::Owned owned;
  FileActions actions;
  if (const int e = plan_descriptors(r, actions, owned); e != 0) return errno_code(e);
  Attributes attr;
  plan_signals_and_group(r, attr);

  std::vector<std::string> argv_s = r.argv;
  std::vector<std::string> env_s = parts::environment(r.env);
  auto argv = parts::pointers(argv_s);
  auto envp = parts::pointers(env_s);
  pid_t pid = -1;
  // glibc's posix_spawn (clone with CLONE_VFORK) reports an exec failure as its return value.
  if (const int rc = ::posix_spawn(&pid, r.program.c_str(), &actions.a, &attr.a, argv.data(), envp.data()); rc != 0)
    return errno_code(rc);
  return pid;
}

std::optional<std::string> resolve_command(const std::string& command, const std::string& path) {
  if (command.find('/') != std::string::npos) return command;
  if (command.empty()) return std::nullopt;
  std::string_view rest(path);
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    // POSIX: an empty PATH entry is the current directory. (Built in one append chain: GCC 12's
    // -Wrestrict misfires at -O2 on assigning "." to a string then concatenating it.)
    std::string candidate(entry.empty() ? std::string_view(".") : entry);
    candidate.append("/").append(command);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

}  // namespace mooring::nodeagent
