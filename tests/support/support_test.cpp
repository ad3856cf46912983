// Pins the test-support helpers other suites rely on: temp dirs clean up even with mounts inside,
// child processes are observable and never leaked (not even when the test binary is killed), mountinfo parsing handles escapes.
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::test {
namespace {

using namespace std::chrono_literals;

TEST(TempDir, IsUniqueAndRemovedOnDestruction) {
  std::filesystem::path kept;
  {
    TempDir a("support-test");
    TempDir b("support-test");
    EXPECT_NE(a.path(), b.path());
    write_file(a / "f", "x");
    a.make_dir("x/y");
    kept = a.path();
    EXPECT_TRUE(std::filesystem::is_directory(kept / "x/y"));
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(TempDir, UnmountsBindMountsInsideBeforeRemovingAndNeverDeletesThroughThem) {
  MOORING_REQUIRE_ROOT();
  TempDir outside("support-test-src");
  write_file(outside / "precious", "data");
  std::filesystem::path kept;
  {
    TempDir dir("support-test");
    const auto target = dir.make_dir("mnt");
    ASSERT_EQ(::mount(outside.path().c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0);
    ASSERT_TRUE(is_mounted(target));
    ASSERT_EQ(mounts_under(dir.path()).size(), 1u);
    kept = dir.path();
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
  EXPECT_EQ(read_file(outside / "precious"), "data");  // the bind source survived
}

TEST(MountInfo, ParsesEscapedPathsAndOptions) {
  const auto mounts = parse_mountinfo(
      "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
      "37 36 98:0 / /ro ro,relatime - tmpfs tmpfs rw\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].mount_point, "/mnt/with space");
  EXPECT_EQ(mounts[0].root, "/mnt1");
  EXPECT_EQ(mounts[0].fs_type, "ext3");
  EXPECT_EQ(mounts[0].source, "/dev/root");
  EXPECT_FALSE(mounts[0].read_only());
  EXPECT_TRUE(mounts[1].read_only());
  EXPECT_TRUE(is_mounted("/"));
}

TEST(ChildProcess, CapturesOutputAndReportsExitCode) {
  TempDir dir("support-test");
  ChildProcess p({"/bin/sh", {"-c", "echo \"hello $GREETING\"; exit 3"}, {{"GREETING", "world"}}, true, dir / "out"});
  const auto st = p.wait_for_exit(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited);
  EXPECT_EQ(st->code, 3);
  EXPECT_EQ(p.output(), "hello world\n");
}

TEST(ChildProcess, WaitsForPathAndStopsWithSignals) {
  TempDir dir("support-test");
  const auto flag = dir / "ready";
  ChildProcess p({"/bin/sh", {"-c", "touch " + flag.string() + "; exec sleep 60"}, {}, true, dir / "out"});
  ASSERT_TRUE(p.wait_for_path(flag, 10s));
  EXPECT_TRUE(p.stop());
  EXPECT_TRUE(p.resume());
  EXPECT_TRUE(p.running());
  EXPECT_TRUE(p.terminate());
  const auto st = p.wait_for_exit(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_FALSE(st->exited);
  EXPECT_EQ(st->signal, SIGTERM);
  EXPECT_FALSE(p.signal(SIGTERM));  // gone
}

TEST(ChildProcess, WaitForPathGivesUpWhenTheChildExits) {
  TempDir dir("support-test");
  ChildProcess p({"/bin/sh", {"-c", "exit 0"}, {}, true, {}});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.wait_for_path(dir / "never", 30s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
}

TEST(ChildProcess, AProgramThatCannotBeStartedThrowsNamingIt) {
  TempDir dir("support-test");
  try {
    ChildProcess p({dir / "no-such-program", {}, {}, true, {}});
    ADD_FAILURE() << "started pid " << p.pid();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-program: No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(ChildProcess, DestructorKillsARunningChild) {
  pid_t pid = 0;
  {
    ChildProcess p({"/bin/sleep", {"60"}, {}, true, {}});
    pid = p.pid();
    EXPECT_TRUE(p.running());
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: no such process
}

// A test binary killed abruptly (ctest's timeout, a pipe to `head`) runs no destructor: its
// children must die with it. An intermediate process starts the child and is SIGKILLed; this
// process is the subreaper meanwhile, so the orphaned child is ours to reap and its status shows
// what killed it.
TEST(ChildProcess, DiesWhenTheProcessThatStartedItIsKilled) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  struct NotSubreaper {
    ~NotSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  } restore;
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(report[0]);
    pid_t child = -1;
    try {
      ChildProcess p({"/bin/sleep", {"60"}, {}, true, {}});
      child = p.pid();
      (void)!::write(report[1], &child, sizeof child);
      ::pause();  // until killed: the destructor never runs
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(report[1]);
  pid_t child = -1;
  const auto n = ::read(report[0], &child, sizeof child);
  ::close(report[0]);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof child));
  EXPECT_EQ(::kill(child, 0), 0);  // running
  ASSERT_EQ(::kill(middle, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(middle, &status, 0), middle);
  pid_t reaped = 0;
  EXPECT_TRUE(wait_until([&] { return (reaped = ::waitpid(child, &status, WNOHANG)) == child; }, 10s, 10ms))
      << "the child outlived the process that started it";
  if (reaped != child) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    return;
  }
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

// The death signal follows the thread that spawned, not the process (README.md): spawning from
// a thread that ends kills the child.
TEST(ChildProcess, DiesWhenTheThreadThatStartedItEnds) {
  std::optional<ChildProcess> p;
  std::thread([&] { p.emplace(SpawnOptions{"/bin/sleep", {"60"}, {}, true, {}}); }).join();
  const auto st = p->wait_for_exit(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->signal, SIGKILL);
}

TEST(Files, WaitUntilReturnsTheLastAnswer) {
  int n = 0;
  EXPECT_TRUE(wait_until([&] { return ++n >= 3; }, 5s, 1ms));
  EXPECT_FALSE(wait_until([] { return false; }, 50ms, 5ms));
}

}  // namespace
}  // namespace mooring::test
