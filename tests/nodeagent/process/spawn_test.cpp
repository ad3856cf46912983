// spawn_process: what a child of the agent holds. Read from the kernel (/proc/<pid>/fd) of the
// running child, not from what the child says about itself.
#include "services/nodeagent/process/spawn.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "services/nodeagent/process/child_process.hpp"
#include "tests/support/descriptors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The state letter of /proc/<pid>/stat (after the parenthesised command): 'S' once the child
// blocks in its program's sleep, 'R' or 'D' while the loader still maps its libraries.
char process_state(pid_t pid) {
  const auto stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// Waits until the child has exec'd its program and sleeps in it (the dynamic loader holds each
// library it maps open for a moment; under load two reads can both catch libc.so.6), and returns
// the descriptors it holds then.
std::map<int, std::string> settled_descriptors(pid_t pid, const std::string& program) {
  std::map<int, std::string> fds;
  test::wait_until(
      [&] {
        // Read while the child may be inside its exec: an error is "not yet", never a throw.
        std::error_code ec;
        const auto exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).filename().string();
        if (exe != program || process_state(pid) != 'S') return false;
        fds = test::open_descriptors(pid);
        return process_state(pid) == 'S' && test::open_descriptors(pid) == fds;
      },
      10s, 10ms);
  return fds;
}

// A mask line of /proc/<pid>/status ("SigIgn:", "SigBlk:"): bit n-1 is signal n.
unsigned long long signal_mask(pid_t pid, const std::string& key) {
  const auto status = test::read_file("/proc/" + std::to_string(pid) + "/status");
  const auto at = status.find(key);
  return at == std::string::npos ? ~0ULL : std::stoull(status.substr(at + key.size()), nullptr, 16);
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// The agent's descriptors opened without close-on-exec (a shell's pipes it inherited, a library
// that forgot O_CLOEXEC) stay out of the child: it holds its standard streams only.
TEST(SpawnProcess, TheChildHoldsItsStandardStreamsOnly) {
  test::TempDir dir;
  const int leaked = ::open("/dev/zero", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 0);
  const int out = ::open((dir.path() / "out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(out, 0);
  SpawnRequest r;
  r.program = "/bin/sleep";
  r.argv = {"sleep", "30"};
  r.stdout_fd = out;
  r.stderr_fd = out;
  const auto pid = spawn_process(r);
  ::close(leaked);
  ::close(out);
  ASSERT_TRUE(pid) << pid.error().message();
  const auto fds = settled_descriptors(*pid, "sleep");
  kill_and_reap(*pid);
  EXPECT_EQ(fds, (std::map<int, std::string>{
                     {0, "/dev/null"}, {1, (dir.path() / "out").string()}, {2, (dir.path() / "out").string()}}))
      << test::describe_descriptors(fds);
}

TEST(SpawnProcess, ExecFailuresAreErrorValuesAndNothingRuns) {
  test::TempDir dir;
  test::write_file(dir.path() / "data", "not a program");
  SpawnRequest r;
  r.program = "/nonexistent/mooring-binary";
  r.argv = {"x"};
  const auto missing = spawn_process(r);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().value(), ENOENT);
  r.program = (dir.path() / "data").string();  // not executable
  const auto not_exec = spawn_process(r);
  ASSERT_FALSE(not_exec);
  EXPECT_EQ(not_exec.error().value(), EACCES);
}

// A signal the agent ignores (SIGPIPE) or blocks is the default again in the child; a task in
// its own session is its own process group.
TEST(SpawnProcess, SignalsAreResetAndTheIsolationIsApplied) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before {};
  ::sigaction(SIGPIPE, &ignore, &before);
  for (const auto isolation : {SpawnRequest::Isolation::own_group, SpawnRequest::Isolation::own_session}) {
    SpawnRequest r;
    r.program = "/bin/sleep";
    r.argv = {"sleep", "30"};
    r.isolation = isolation;
    const auto pid = spawn_process(r);
    ASSERT_TRUE(pid) << pid.error().message();
    settled_descriptors(*pid, "sleep");
    // Signals 1-31 (glibc keeps its internal real-time signals 32 and 33 to itself).
    EXPECT_EQ(signal_mask(*pid, "SigIgn:") & 0x7fffffffULL, 0u) << "no standard signal ignored";
    EXPECT_EQ(signal_mask(*pid, "SigBlk:") & 0x7fffffffULL, 0u) << "no standard signal blocked";
    EXPECT_EQ(::getpgid(*pid), *pid);
    EXPECT_EQ(::getsid(*pid) == *pid, isolation == SpawnRequest::Isolation::own_session);
    kill_and_reap(*pid);
  }
  ::sigaction(SIGPIPE, &before, nullptr);
}

// The plugin path (ChildProcess): 0 is /dev/null, 1 and 2 the pipes the agent reads, nothing else.
TEST(SpawnProcess, ALaunchedPluginHoldsOnlyDevNullAndItsOutputPipes) {
  const int leaked = ::open("/dev/zero", O_RDONLY);  // deliberately without O_CLOEXEC
  boost::asio::io_context io;
  auto p = ChildProcess::spawn(io.get_executor(), ProcessSpec{"t", "/bin/sleep", {"30"}}, {});
  ::close(leaked);
  ASSERT_TRUE(p) << p.error().message();
  const auto fds = settled_descriptors((*p)->pid(), "sleep");
  ASSERT_EQ(fds.size(), 3u) << test::describe_descriptors(fds);
  EXPECT_EQ(fds.at(0), "/dev/null");
  EXPECT_TRUE(fds.at(1).starts_with("pipe:[")) << fds.at(1);
  EXPECT_TRUE(fds.at(2).starts_with("pipe:[")) << fds.at(2);
  EXPECT_NE(fds.at(1), fds.at(2)) << "stdout and stderr are told apart";
}

TEST(SpawnProcess, ResolveCommandSearchesTheGivenPathOnly) {
  test::TempDir dir;
  test::write_file(dir.path() / "data", "not a program");
  EXPECT_EQ(resolve_command("/any/where", ""), "/any/where");
  EXPECT_EQ(resolve_command("sleep", "/nonexistent:/bin"), "/bin/sleep");
  EXPECT_EQ(resolve_command("sleep", "/nonexistent"), std::nullopt);
  EXPECT_EQ(resolve_command("data", dir.path().string()), std::nullopt) << "not executable";
  EXPECT_EQ(resolve_command("", "/bin"), std::nullopt);
}

}  // namespace
}  // namespace mooring::nodeagent
