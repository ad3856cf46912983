// spawn_walled and TaskCgroup (issue 41): what a task started behind its walls can see and do,
// read from its own output and from the kernel, and that every failed step is named.
#include "services/nodeagent/process/walls.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "services/nodeagent/process/cgroup.hpp"
#include "services/nodeagent/process/proc_stat.hpp"
#include "services/nodeagent/process/task_init_image.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
constexpr uid_t kNobody = 65534;

struct Outcome {
  std::optional<int> task_status;  // as the init reported it
  std::string out;
  std::string error;  // the failed step, when it did not start
};

class WallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    ::chmod(dir.path().c_str(), 0755);  // the user's way to its own directory without namespaces
    own = dir.make_dir("alloc/local");
    ASSERT_EQ(::chown(own.c_str(), kNobody, kNobody), 0);
    walls.uid = kNobody;
    walls.gid = kNobody;
    walls.root = dir.make_dir("alloc/root");
    walls.binds = {{own, false}};
  }

  // Runs `script` with sh behind `walls` and waits for it; in `cgroup` when given.
  Outcome run(const std::string& script, const TaskCgroup* cgroup = nullptr) {
    std::vector<int> cgroup_procs = cgroup ? cgroup->open_procs() : std::vector<int>{};
    auto out = run_joining(script, cgroup_procs);
    for (const int fd : cgroup_procs) ::close(fd);
    return out;
  }
  Outcome run_joining(const std::string& script, std::vector<int> cgroup_procs) {
    Outcome r;
    const auto out_path = dir / "out.txt";
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    SpawnRequest req;
    req.program = "/bin/sh";
    req.argv = {"sh", "-c", script};
    req.env = {{"PATH", "/usr/bin:/bin"}, {"SECRET", "s3cr3t-value"}};
    req.stdout_fd = out;
    req.stderr_fd = out;
    req.working_dir = own;
    Walls w = walls;
    w.cgroup_procs = std::move(cgroup_procs);
    auto started = spawn_walled(req, w);
    ::close(out);
    if (auto* err = std::get_if<WallError>(&started)) {
      r.error = err->message();
      return r;
    }
    const auto child = std::get<WalledChild>(started);
    int st = 0;
    ::waitpid(child.pid, &st, 0);
    if (child.report >= 0) {
      r.task_status = read_task_status(child.report);
      ::close(child.report);
    } else {
      r.task_status = st;
    }
    r.out = test::read_file(out_path);
    return r;
  }

  test::TempDir dir{"mooring-walls"};
  fs::path own;
  Walls walls;
};

TEST_F(WallsTest, TheTaskRunsAsItsUserWithoutGroupsCapabilitiesOrNewPrivileges) {
  const auto r = run("id -u; id -g; id -G; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status");
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.task_status && WIFEXITED(*r.task_status) && WEXITSTATUS(*r.task_status) == 0) << r.out;
  EXPECT_NE(r.out.find("65534\n65534\n65534\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
}

// Its own PID namespace (the init is 1, the task 2), a private /tmp, the host's other
// directories absent, the system ones read-only, its own directory writable.
TEST_F(WallsTest, TheTaskSeesOnlyItsOwnProcessesAndDirectories) {
  const auto outside = dir.make_dir("other-alloc");
  test::write_file(outside / "data", "not yours");
  test::write_file("/tmp/mooring-walls-host-tmp", "host tmp");
  const auto r =
      run("echo pid=$$; ls /proc | grep -c '^[0-9]'; cat " + (outside / "data").string() +
          " || echo no-outside; ls /tmp/mooring-walls-host-tmp || echo no-host-tmp; touch /etc/x || "
          "echo etc-ro; touch /x || echo root-ro; echo mine > " +
          (own / "f").string() + " && cat " + (own / "f").string() + "; mount -t tmpfs none /tmp || echo no-mount");
  fs::remove("/tmp/mooring-walls-host-tmp");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.out.find("pid=2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-outside"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-host-tmp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("etc-ro"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("root-ro"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mine\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-mount"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_file(own / "f"), "mine\n");
}

TEST_F(WallsTest, AHiddenPathInsideASystemDirectoryIsMasked) {
  const fs::path secret_dir = "/etc/mooring-walls-test";
  fs::create_directories(secret_dir);
  test::write_file(secret_dir / "ca.key", "KEY");
  walls.hidden = {secret_dir};
  const auto r = run("cat /etc/mooring-walls-test/ca.key || echo masked");
  fs::remove_all(secret_dir);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out.find("KEY"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("masked"), std::string::npos) << r.out;
}

TEST_F(WallsTest, AFailedStepIsNamedAndNothingRuns) {
  walls.binds.push_back({dir / "no-such-volume", false});
  const auto r = run("touch " + (own / "ran").string());
  EXPECT_NE(r.error.find("bind " + (dir / "no-such-volume").string()), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("No such file or directory"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(own / "ran"));
}

TEST_F(WallsTest, AnExecFailureNamesTheProgram) {
  SpawnRequest req;
  req.program = "/no/such/program";
  req.argv = {"program"};
  auto started = spawn_walled(req, walls);
  ASSERT_TRUE(std::holds_alternative<WallError>(started));
  EXPECT_EQ(std::get<WallError>(started).message(), "exec /no/such/program: No such file or directory");
}

TEST_F(WallsTest, TheTasksExitStatusComesThroughTheInit) {
  const auto r = run("exit 7");
  ASSERT_TRUE(r.task_status);
  EXPECT_TRUE(WIFEXITED(*r.task_status) && WEXITSTATUS(*r.task_status) == 7);
  const auto killed = run("kill -KILL $$");
  ASSERT_TRUE(killed.task_status);
  EXPECT_TRUE(WIFSIGNALED(*killed.task_status) && WTERMSIG(*killed.task_status) == SIGKILL);
}

// The namespace's init is the agent's embedded image (task_init.cpp), exec'd from a sealed memfd,
// and not dumpable: the task (same user) cannot read its /proc entries or ptrace it. The task
// gets exactly its stdio (not the report pipe, not the image).
TEST_F(WallsTest, TheInitIsTheEmbeddedImageAndTheTaskGetsOnlyItsStdio) {
  const auto r =
      run("cat /proc/1/environ > /dev/null 2>&1 && echo INIT_OPEN || echo init-shut; tr '\\0' ' ' < /proc/1/cmdline; "
          "echo; exec ls /proc/self/fd");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.out.find("init-shut\nmooring-task-init /bin/sh sh -c "), std::string::npos) << r.out;
  // The shell's descriptors, read by ls in its place (exec): 0-2 and ls's own directory at 3, the
  // lowest free. Listed from a pipeline instead, the shell's pipe to the next command could show.
  EXPECT_TRUE(r.out.ends_with("\n0\n1\n2\n3\n")) << r.out;
}

TEST_F(WallsTest, TheInitImageIsSealed) {
  const int fd = task_init_image();
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(task_init_image(), fd);  // made once
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_GT(st.st_size, 0);
  EXPECT_EQ(::pwrite(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

// A signal to the init reaches the task (the agent's stop signals the init); the caller's signal
// mask, blocked while the child shared its memory, is as it was.
TEST_F(WallsTest, TheInitForwardsSignalsAndTheCallersMaskIsRestored) {
  sigset_t before, after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
  const auto out_path = dir / "out.txt";
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SpawnRequest req;
  req.program = "/bin/sh";
  req.argv = {"sh", "-c", "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done"};
  req.stdout_fd = out;
  auto started = spawn_walled(req, walls);
  ::close(out);
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int sig = 1; sig < 65; ++sig) EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << sig;
  ASSERT_TRUE(std::holds_alternative<WalledChild>(started)) << std::get<WallError>(started).message();
  const auto child = std::get<WalledChild>(started);
  for (int i = 0; i < 200 && test::read_file(out_path).find("ready") == std::string::npos; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(child.pid, &st, 0), child.pid);
  const auto status = read_task_status(child.report);
  ::close(child.report);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << test::read_file(out_path);
  EXPECT_NE(test::read_file(out_path).find("got-term"), std::string::npos);
}

// A device volume (a block volume's target) is a node of the task's own, usable by its group
// (read-only for a read-only claim); the host's node (root's 0600 here) is neither used nor changed.
TEST_F(WallsTest, ADeviceVolumeIsANodeForTheTasksGroupAndTheHostsNodeIsUnchanged) {
  const auto rw = dir.make_dir("vol-rw") / "dev", ro = dir.make_dir("vol-ro") / "dev";
  ASSERT_EQ(::mknod(rw.c_str(), S_IFCHR | 0600, makedev(1, 5)), 0);  // /dev/zero's number
  ASSERT_EQ(::mknod(ro.c_str(), S_IFCHR | 0600, makedev(1, 5)), 0);
  walls.binds.push_back({rw, false});
  walls.binds.push_back({ro, true});
  const auto r = run("stat -c '%u:%g %a %t,%T' " + rw.string() + " " + ro.string() + "; head -c 2 " + rw.string() +
                     " | od -An -tx1; echo x > " + rw.string() + " && echo wrote; echo x > " + ro.string() +
                     " || echo ro-refused; head -c 1 " + ro.string() + " | od -An -tx1");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.out.find("0:65534 660 1,5\n0:65534 440 1,5\n 00 00\nwrote\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ro-refused\n 00\n"), std::string::npos) << r.out;
  struct stat host {};
  ASSERT_EQ(::stat(rw.c_str(), &host), 0);
  EXPECT_EQ(host.st_mode & 07777, 0600u);
  EXPECT_EQ(host.st_gid, 0u);
}

TEST_F(WallsTest, WithoutNamespacesOnlyTheUserChanges) {
  walls.namespaces = false;
  const auto r = run("id -u; id -G");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out, "65534\n65534\n");
}

TEST_F(WallsTest, AMemoryHogIsOomKilledInItsCgroup) {
  auto made = TaskCgroup::create("walls-test-oom-" + std::to_string(::getpid()), {.memory_mb = 32});
  ASSERT_TRUE(std::holds_alternative<TaskCgroup>(made)) << std::get<std::string>(made);
  const auto cg = std::get<TaskCgroup>(made);
  const auto r = run("exec python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'", &cg);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.task_status);
  EXPECT_TRUE(WIFSIGNALED(*r.task_status) && WTERMSIG(*r.task_status) == SIGKILL) << r.out;
  EXPECT_GE(cg.oom_kills(), 1);
  EXPECT_TRUE(cg.kill_all());
  cg.remove();
  EXPECT_TRUE(TaskCgroup::find("walls-test-oom-" + std::to_string(::getpid())).empty());
}

// Children that left the task's group and session are still in its cgroup, and die with it.
TEST_F(WallsTest, KillAllEndsDoubleForkedChildrenInTheCgroup) {
  walls.namespaces = false;  // no PID namespace to take them along: the cgroup alone must
  const std::string name = "walls-test-kill-" + std::to_string(::getpid());
  auto made = TaskCgroup::create(name, {});
  ASSERT_TRUE(std::holds_alternative<TaskCgroup>(made)) << std::get<std::string>(made);
  const auto cg = std::get<TaskCgroup>(made);
  const auto r = run("for i in 1 2 3 4 5; do setsid sh -c 'sleep 300 & sleep 300' & done; sleep 0.3", &cg);
  ASSERT_EQ(r.error, "");
  EXPECT_GE(cg.processes().size(), 10u);
  EXPECT_TRUE(cg.kill_all());
  EXPECT_TRUE(cg.processes().empty());
  cg.remove();
}

// The template (walls_template.hpp) holds what every task's root shares and is copied at each
// start: a volume mounted on the node after it was made is not in a task's root, and the task's
// mount table is the same size as before that mount.
TEST_F(WallsTest, AVolumeMountedOnTheNodeAfterTheTemplateIsNotInTheTasksRoot) {
  const auto count = "grep -c . /proc/self/mountinfo";
  const auto before = run(count);
  ASSERT_EQ(before.error, "");
  const auto late = dir.make_dir("late-volume");
  ASSERT_EQ(::mount("tmpfs", late.c_str(), "tmpfs", 0, "size=64k"), 0) << std::strerror(errno);
  test::write_file(late / "marker", "node's");
  const auto r = run("cat " + (late / "marker").string() + " || echo no-late; grep -c " + late.string() +
                     " /proc/self/mountinfo; " + count);
  ::umount2(late.c_str(), MNT_DETACH);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out.find("node's"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-late\n0\n" + before.out), std::string::npos) << r.out << "before: " << before.out;
}

// A hidden file replaced by a rename (a renewed certificate) is another file: the template made
// before masks the old one only, so it is made again.
TEST_F(WallsTest, AHiddenFileReplacedByARenameIsStillMasked) {
  const fs::path secret_dir = "/etc/mooring-walls-rename-" + std::to_string(::getpid());
  fs::create_directories(secret_dir);
  test::write_file(secret_dir / "tls.key", "KEY-ONE");
  walls.hidden = {secret_dir / "tls.key"};
  const auto first = run("cat " + (secret_dir / "tls.key").string() + " || echo masked");
  test::write_file(secret_dir / "tls.key.new", "KEY-TWO");
  fs::rename(secret_dir / "tls.key.new", secret_dir / "tls.key");
  const auto second = run("cat " + (secret_dir / "tls.key").string() + "; echo end");
  fs::remove_all(secret_dir);
  ASSERT_EQ(first.error, "");
  ASSERT_EQ(second.error, "");
  EXPECT_EQ(first.out.find("KEY-ONE"), std::string::npos) << first.out;
  EXPECT_EQ(second.out, "end\n") << second.out;  // /dev/null over it: empty
}

// A running task has a copy of its own: the template made again meanwhile (other inputs) takes
// nothing from its root.
TEST_F(WallsTest, ARunningTaskKeepsItsRootWhenTheTemplateIsMadeAgain) {
  const auto out_path = dir / "first.txt";
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SpawnRequest req;
  req.program = "/bin/sh";
  req.argv = {"sh", "-c",
              "while [ ! -e " + (own / "go").string() + " ]; do sleep 0.02; done; ls /bin/sh /dev/null " +
                  own.string() + "/go && echo still-here"};
  req.stdout_fd = out;
  req.stderr_fd = out;
  auto started = spawn_walled(req, walls);
  ::close(out);
  ASSERT_TRUE(std::holds_alternative<WalledChild>(started)) << std::get<WallError>(started).message();
  const auto child = std::get<WalledChild>(started);
  walls.hidden = {dir / "another-input"};
  const auto other = run("touch " + (own / "go").string());
  ASSERT_EQ(other.error, "");
  int st = 0;
  ASSERT_EQ(::waitpid(child.pid, &st, 0), child.pid);
  const auto status = read_task_status(child.report);
  ::close(child.report);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << test::read_file(out_path);
  EXPECT_NE(test::read_file(out_path).find("still-here"), std::string::npos) << test::read_file(out_path);
}

// Paths outside /tmp (an agent's data dir under /var) are made on a tmpfs of the task's own on
// that top-level directory, read-only once its binds are there: nothing else of the host's /var.
TEST_F(WallsTest, ATasksPathsOutsideTmpAreOnAReadOnlyTmpfsOfItsOwn) {
  char base[] = "/var/tmp/mooring-walls-XXXXXX";
  ASSERT_NE(::mkdtemp(base), nullptr) << std::strerror(errno);
  const fs::path var_dir = base, var_own = var_dir / "local";
  fs::create_directories(var_own);
  ASSERT_EQ(::chown(var_own.c_str(), kNobody, kNobody), 0);
  test::write_file(var_dir / "neighbour", "not yours");
  walls.binds = {{var_own, false}};
  own = var_own;  // its working directory
  const auto r = run("echo mine > " + (var_own / "f").string() + " && cat " + (var_own / "f").string() +
                     "; ls /var; ls /var/tmp | grep -c .; cat " + (var_dir / "neighbour").string() +
                     " || echo no-neighbour; touch /var/x || echo var-ro; mkdir " + (var_dir / "y").string() +
                     " || echo parent-ro");
  fs::remove_all(var_dir);
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.out.find("mine\ntmp\n1\n"), std::string::npos) << r.out;
  for (const char* refused : {"\nno-neighbour\n", "\nvar-ro\n", "\nparent-ro\n"})
    EXPECT_NE(r.out.find(refused), std::string::npos) << refused << " in " << r.out;
}

// Without the template (a kernel before 5.2, or use_template off) each start builds the whole root
// on a copy of the host's mounts: the same walls.
TEST_F(WallsTest, WithoutTheTemplateEachStartBuildsTheSameWalls) {
  walls.use_template = false;
  const fs::path secret_dir = "/etc/mooring-walls-copy-" + std::to_string(::getpid());
  fs::create_directories(secret_dir);
  test::write_file(secret_dir / "ca.key", "KEY");
  walls.hidden = {secret_dir};
  const auto outside = dir.make_dir("other-alloc");
  test::write_file(outside / "data", "not yours");
  const auto r = run("id -u; echo pid=$$; cat " + (outside / "data").string() + " || echo no-outside; cat " +
                     (secret_dir / "ca.key").string() +
                     " || echo masked; touch /x || echo root-ro; touch /etc/x || "
                     "echo etc-ro; echo mine > " +
                     (own / "f").string() + " && cat " + (own / "f").string());
  fs::remove_all(secret_dir);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out.find("KEY"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("65534\npid=2\n"), std::string::npos) << r.out;
  for (const char* expected : {"\nno-outside\n", "\nmasked\n", "\nroot-ro\n", "\netc-ro\n", "\nmine\n"})
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << " in " << r.out;
}

// The task starts with no signal ignored or blocked, whatever the agent ignores (SIGPIPE) or
// handles: the start resets what the agent ignores, the exec its handlers.
TEST_F(WallsTest, TheTaskStartsWithNoSignalIgnoredOrBlocked) {
  struct sigaction ignore {
  }, old_pipe{}, old_usr1{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old_pipe);
  ::sigaction(SIGUSR1, &ignore, &old_usr1);
  const auto r = run("exec grep -E '^Sig(Ign|Blk)' /proc/self/status");
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

}  // namespace
}  // namespace mooring::nodeagent
