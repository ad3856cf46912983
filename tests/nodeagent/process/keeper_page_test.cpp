// The keeper page (issue 43): a walled task's init stops the task on its own at the deadline the
// page holds (SIGTERM, then SIGKILL at its kill time), with nobody else watching; a deadline pushed
// forward keeps it running; a restarted agent reaches the same page through the init's
// descriptor 4, and the task itself never gets it.
#include "services/nodeagent/process/keeper_page.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

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

  test::TempDir dir{"mooring-keeper"};
  fs::path own;
  fs::path out_path = dir / "out.txt";
  Walls walls;
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

}  // namespace
}  // namespace mooring::nodeagent
