// The keeper page (issue 43): a walled task's init stops the task on its own at the deadline the
// page holds (SIGTERM, then SIGKILL at its kill time), with nobody else watching; a deadline pushed
// forward keeps it running; a restarted agent reaches the same page through the init's
// descriptor 4, and the task itself never gets it. Without walls (no PID namespace) the same init
// stops every process of the task's cgroup, and kills what the task leaves behind when it ends.
#include "services/nodeagent/process/keeper_page.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "services/nodeagent/process/cgroup.hpp"
#include "services/nodeagent/process/walls.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr uid_t kNobody = 65534;

class KeeperPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    own = dir.make_dir("alloc/local");
    ASSERT_EQ(::chown(own.c_str(), kNobody, kNobody), 0);
    walls.uid = kNobody;
    walls.gid = kNobody;
    walls.root = dir.make_dir("alloc/root");
    walls.binds = {{own, false}};
  }
  void TearDown() override {
    if (child.pid > 0) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, nullptr, 0);
    }
    if (child.report >= 0) ::close(child.report);
    if (!cgroup.empty()) {  // whatever a failed test left in it
      cgroup.kill_all();
      cgroup.remove();
    }
  }

  // Starts `script` behind the walls with `page` (when it is one) at the init's descriptor 4, and
  // waits for it to print "ready".
  void start(const std::string& script, const KeeperPage& page) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    SpawnRequest req;
    req.program = "/bin/sh";
    req.argv = {"sh", "-c", script};
    req.stdout_fd = out;
    Walls w = walls;
    w.keeper_fd = page ? page.fd() : -1;
    auto started = spawn_walled(req, w);
    ::close(out);
    ASSERT_TRUE(std::holds_alternative<WalledChild>(started)) << std::get<WallError>(started).message();
    child = std::get<WalledChild>(started);
    for (int i = 0; i < 300 && output().find("ready") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_NE(output().find("ready"), std::string::npos);
  }
  std::string output() const { return test::read_file(out_path); }
  bool init_running() const { return ::waitpid(child.pid, nullptr, WNOHANG) == 0; }
  // Waits for the init's end; the task's wait status as the init reported it (`kept`: whether it
  // said its deadline ended the task).
  std::optional<int> wait_exit() {
    ::waitpid(child.pid, nullptr, 0);
    child.pid = -1;
    return read_task_status(child.report, &kept);
  }

  // Without namespaces: the task in a cgroup of its own, whose directory its init gets.
  const TaskCgroup& unwalled_in_cgroup(const std::string& name) {
    walls.namespaces = false;
    auto made = TaskCgroup::create(name + "-" + std::to_string(::getpid()), {});
    EXPECT_TRUE(std::holds_alternative<TaskCgroup>(made)) << std::get<std::string>(made);
    if (!std::holds_alternative<TaskCgroup>(made)) return cgroup;
    cgroup = std::get<TaskCgroup>(std::move(made));
    walls.cgroup_procs = cgroup.open_procs();
    walls.cgroup_dir = cgroup.open_dir();
    return cgroup;
  }
  void close_cgroup_fds() {
    for (const int fd : walls.cgroup_procs) ::close(fd);
    ::close(walls.cgroup_dir);
  }
  // Polls until the cgroup holds nothing (or 2 s passed).
  static bool emptied(const TaskCgroup& cg) {
    for (int i = 0; i < 200 && !cg.processes().empty(); ++i) std::this_thread::sleep_for(10ms);
    return cg.processes().empty();
  }

  test::TempDir dir{"mooring-keeper"};
  fs::path own;
  fs::path out_path = dir / "out.txt";
  Walls walls;
  TaskCgroup cgroup;  // without namespaces
  WalledChild child;
  bool kept = false;
};

// A task that traps SIGTERM and runs on is SIGKILLed at the kill time, with every process of its
// namespace, though nobody but its init is there to do it.
TEST_F(KeeperPageTest, PastTheDeadlineTheInitTermsThenKillsTheTask) {
  auto page = KeeperPage::create();
  ASSERT_TRUE(page);
  EXPECT_FALSE(page.get()) << "a new page holds no deadline";
  const auto t0 = Clock::now();
  const KeeperDeadline deadline{t0 + 600ms, t0 + 1200ms};
  page.set(deadline);
  ASSERT_EQ(page.get(), deadline);
  start("trap 'echo got-term' TERM; sleep 600 & echo ready; while :; do sleep 0.05; done", page);
  const auto status = wait_exit();
  const auto ended = Clock::now();
  EXPECT_GE(ended, deadline.kill_at);
  EXPECT_LT(ended, deadline.kill_at + 500ms) << "the init wakes for its deadline, not a second later";
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
  EXPECT_TRUE(kept) << "the init says its deadline ended the task";
  EXPECT_NE(output().find("got-term"), std::string::npos) << output();
}

// The deadline pushed forward (here through a second handle opened from the init's descriptor, as
// an agent that re-adopted the task does) keeps the task running past the first one; a deadline
// moved into the past stops it at once. The task gets only its stdio, never the page.
TEST_F(KeeperPageTest, APushedDeadlineKeepsTheTaskAndAReopenedPageIsTheSame) {
  auto page = KeeperPage::create();
  ASSERT_TRUE(page);
  const auto t0 = Clock::now();
  page.set({t0 + 700ms, t0 + 900ms});
  start("trap 'echo got-term; exit 3' TERM; ls /proc/$$/fd | tr '\\n' ' '; echo ready; while :; do sleep 0.05; done",
        page);
  EXPECT_NE(output().find("0 1 2 ready"), std::string::npos) << output();
  page = KeeperPage{};  // the first agent is gone
  auto reopened = KeeperPage::of_init(child.pid);
  ASSERT_TRUE(reopened);
  ASSERT_TRUE(reopened.get());
  EXPECT_EQ(reopened.get()->kill_at, t0 + 900ms);
  reopened.set({t0 + 5s, t0 + 6s});
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(init_running()) << "stopped at the old deadline: " << output();
  EXPECT_EQ(output().find("got-term"), std::string::npos);
  const auto now = Clock::now();
  reopened.set({now, now + 3s});
  const auto status = wait_exit();
  EXPECT_LT(Clock::now(), now + 1500ms);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << output();
  EXPECT_TRUE(kept);
}

// Without a page the init keeps no deadline, and no page is found for it; nor for a process that
// is not a walled task's init.
TEST_F(KeeperPageTest, NoPageNoDeadlineAndOnlyAnInitsPageIsOpened) {
  start("echo ready; while :; do sleep 0.05; done", KeeperPage{});
  EXPECT_FALSE(KeeperPage::of_init(child.pid));
  std::this_thread::sleep_for(1200ms);
  EXPECT_TRUE(init_running());
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);  // a stop by the agent is not the keeper's
  const auto status = wait_exit();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM) << *status;
  EXPECT_FALSE(kept);
  EXPECT_FALSE(KeeperPage::of_init(::getpid()));
  EXPECT_FALSE(KeeperPage::of_init(999999999));
}

// Without a PID namespace the init is not PID 1 and kill(-1) is not the task's: past the kill time
// it SIGKILLs every process of the task's cgroup, a child that ignores SIGTERM and left the task's
// session (setsid) included, and an orphan of the task is reaped by it (a subreaper). A restarted
// agent finds the init and its page the same way.
TEST_F(KeeperPageTest, WithoutNamespacesTheInitStopsEveryProcessOfTheTasksCgroup) {
  const auto& cg = unwalled_in_cgroup("keeper-unwalled");
  ASSERT_FALSE(cg.empty());
  auto page = KeeperPage::create();
  ASSERT_TRUE(page);
  const auto t0 = Clock::now();
  page.set({t0 + 800ms, t0 + 1400ms});
  start(
      "trap 'echo got-term' TERM; setsid sh -c 'trap \"\" TERM; sleep 600 & wait' & "
      "sh -c 'sleep 600 &'; echo ready; while :; do sleep 0.05; done",
      page);
  close_cgroup_fds();
  EXPECT_TRUE(is_task_init(child.pid));
  EXPECT_FALSE(is_namespace_init(child.pid));
  EXPECT_FALSE(is_task_init(::getpid()));
  EXPECT_GE(cg.processes().size(), 5u) << "the init, the shell, the escaped shell and its sleep, the orphaned sleep";
  const auto children_of_init = [&] {
    int n = 0;
    for (const pid_t p : cg.processes()) {
      std::ifstream in("/proc/" + std::to_string(p) + "/status");
      for (std::string line; std::getline(in, line);)
        if (line == "PPid:\t" + std::to_string(child.pid)) ++n;
    }
    return n;
  };
  EXPECT_EQ(children_of_init(), 2) << "the shell, and the orphaned sleep its subreaper took";
  ASSERT_TRUE(KeeperPage::of_init(child.pid)) << "a restarted agent reaches an unwalled init's page too";
  const auto status = wait_exit();
  const auto ended = Clock::now();
  EXPECT_GE(ended, t0 + 1400ms);
  EXPECT_LT(ended, t0 + 1900ms);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
  EXPECT_TRUE(kept);
  EXPECT_NE(output().find("got-term"), std::string::npos) << output();
  EXPECT_TRUE(emptied(cg)) << "left in the task's cgroup after its init ended: " << cg.processes().size();
}

// A task that ends on its own leaves nothing behind either (walled, the kernel ends the namespace
// with its init): its exit status comes through, and no deadline was kept. The task holds only
// its stdio, not the init's report pipe, page or cgroup directory.
TEST_F(KeeperPageTest, WithoutNamespacesWhatTheTaskLeftBehindDiesWithIt) {
  const auto& cg = unwalled_in_cgroup("keeper-leftovers");
  ASSERT_FALSE(cg.empty());
  start("ls /proc/$$/fd | tr '\\n' ' '; setsid sleep 600 & echo ready; sleep 0.2; exit 7", KeeperPage{});
  EXPECT_NE(output().find("0 1 2 ready"), std::string::npos) << "the init's descriptors reach the task: " << output();
  close_cgroup_fds();
  const auto status = wait_exit();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 7) << *status;
  EXPECT_FALSE(kept);
  EXPECT_TRUE(emptied(cg));
}

}  // namespace
}  // namespace mooring::nodeagent
