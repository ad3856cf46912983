// The task keeper (issue 43): an allocation with StopAfterClientDisconnect whose agent is killed
// and stays dead. Its walled task survives the agent, but the task's init keeps the deadline the
// agent last pushed and stops it on its own: the task's processes are gone before the control
// plane frees the claim, and a second writer can then have the volume. An agent restarted in time
// re-adopts the task and pushes the deadline on: the task runs well past the old one. The same
// for an unwalled task (--task-isolation=false), whose init has no PID namespace and stops every
// process of the task's cgroup, one that left its session included.
// Root only (bind mounts, namespaces, cgroups).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A writer that ignores SIGTERM: only the keeper's SIGKILL ends it.
const std::string kWriter = "trap '' TERM; while true; do date > \"$MOORING_VOLUME_DATA/writer\"; sleep 0.1; done";
// The same with a child that ignores SIGTERM too and left the task's session and process group
// (setsid): without a PID namespace only the task's cgroup still holds it.
const std::string kForkingWriter = "setsid /bin/sh -c 'trap \"\" TERM; while :; do sleep 0.1; done' & " + kWriter;

// The task's lasting processes, its init and its shells (not the writer's short-lived date and
// sleep): they carry the allocation's id.
std::vector<pid_t> task_processes(const std::string& alloc_id) {
  const std::string entry = "MOORING_ALLOC_ID=" + alloc_id;
  std::vector<pid_t> out;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const auto name = d.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string argv0;
    std::getline(std::ifstream(d.path() / "cmdline"), argv0, '\0');
    if (argv0 != "/bin/sh" && argv0 != "mooring-task-init") continue;
    std::ifstream in(d.path() / "environ");
    for (std::string var; std::getline(in, var, '\0');)
      if (var == entry) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Running, not a zombie (an init whose parent, the killed agent, is gone may wait to be reaped).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Polls until every one of `pids` is gone; the moment it saw that.
class DeathWatch {
 public:
  explicit DeathWatch(std::vector<pid_t> pids)
      : thread_([this, pids] {
          while (!stop_) {
            bool any = false;
            for (const pid_t p : pids) any = any || alive(p);
            if (!any) {
              gone_ns_ = Clock::now().time_since_epoch().count();
              return;
            }
            std::this_thread::sleep_for(5ms);
          }
        }) {}
  ~DeathWatch() {
    stop_ = true;
    thread_.join();
  }
  // CLOCK_MONOTONIC ns (as the control plane's events carry it), 0 while any runs.
  std::int64_t gone_ns() const { return gone_ns_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> gone_ns_{0};
  std::thread thread_;
};

class Keeper : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    if (!walled) {
      node1.agent_args = {"--task-isolation=false"};
      // mkdtemp's 0700: an operator's data dir sits under traversable parents (isolation_test).
      fs::permissions(cluster->dir(), fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
    }
    cluster->start_controlplane();
    cluster->start_node("node-1", node1);
    cluster->start_node("node-2");
    ASSERT_FALSE(cluster->create_volume("vol").is_null());
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  std::string run_writer(const std::string& stop_after, const std::string& script = kWriter) {
    auto spec = allocation("w", "vol", "node-1", script);
    spec["StopAfterClientDisconnect"] = stop_after;
    auto a = cluster->run_alloc(spec);
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
    return a;
  }
  // The CLOCK_MONOTONIC time of the control plane's ClaimReleased for allocation `a` (0: none yet).
  std::int64_t released_ns(const std::string& a) {
    for (const auto& e : cluster->get("/v1/events?topic=Claim&type=ClaimReleased"))
      if (e.value("Type", "") == "ClaimReleased" && e["Details"].value("allocation_id", "") == a)
        return e.value("MonotonicNs", std::int64_t{0});
    return 0;
  }

  // The task's lasting processes once all `count` run (the escaped child starts after "running"):
  // the same pids twice in a row, so a shell forked for a moment to exec `date` is not one.
  static std::vector<pid_t> lasting_processes(const std::string& alloc_id, std::size_t count) {
    std::vector<pid_t> last;
    (void)Cluster::eventually([&] {
      auto now = task_processes(alloc_id);
      std::sort(now.begin(), now.end());
      const bool settled = now.size() == count && now == last;
      last = std::move(now);
      return settled;
    });
    return last;
  }

  // An agent killed and kept dead: every process of the task (`count` of them) is gone before
  // the control plane frees the claim, and a second writer then gets the volume.
  void dead_agent_task_is_gone_before_the_free(const std::string& script, std::size_t count) {
    const auto a = run_writer("3s", script);
    const auto pids = lasting_processes(a, count);
    ASSERT_EQ(pids.size(), count) << "the init and the shells";
    DeathWatch watch(pids);
    const auto killed = Clock::now();
    cluster->kill_node("node-1");  // and it stays dead
    ASSERT_TRUE(Cluster::eventually([&] { return released_ns(a) != 0; }, 30s)) << cluster->volume("vol").dump();
    const auto released = released_ns(a);
    ASSERT_NE(watch.gone_ns(), 0) << "the task still runs after its claim was freed";
    EXPECT_LT(watch.gone_ns(), released);
    const auto ms = [&](std::int64_t ns) { return (ns - killed.time_since_epoch().count()) / 1000000; };
    std::cout << (walled ? "walled" : "unwalled") << ": agent killed at 0 ms; task gone at " << ms(watch.gone_ns())
              << " ms; claim freed at " << ms(released)
              << " ms (StopAfterClientDisconnect 3s, heartbeat TTL 2s, KillTimeout 2s)\n";
    for (const pid_t p : pids) EXPECT_FALSE(alive(p)) << p;
    EXPECT_EQ(cluster->claim_count("vol"), 0u);
    // The volume is free for a second writer elsewhere.
    auto b = cluster->run_alloc(allocation("w2", "vol", "node-2", "sleep 600"));
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(b) == "running"; }));
    cluster->stop_alloc(b);
  }

  // An agent restarted before the deadline re-adopts the task, which runs on well past it; a
  // stop then ends every process of it and frees the claim.
  void restarted_agent_readopts(const std::string& script, std::size_t count) {
    const auto a = run_writer("6s", script);
    const auto pids = lasting_processes(a, count);
    ASSERT_EQ(pids.size(), count);
    const auto killed = Clock::now();
    cluster->kill_node("node-1");
    std::this_thread::sleep_for(500ms);
    cluster->start_node("node-1", node1);
    // 6 s, not 4: with 4 the restarted agent was heard too late in 2 of 7 runs on a loaded 2-core
    // machine (load average 10, ASan): the old deadline stopped the task first.
    ASSERT_LT(Clock::now() - killed, 6s) << "restarted too late for this test to mean anything";
    // Well past the deadline the dead agent left (its last heartbeat + 6s, killed 1s later at most).
    std::this_thread::sleep_until(killed + 10s);
    for (const pid_t p : pids) EXPECT_TRUE(alive(p)) << "the re-adopted task was stopped: pid " << p;
    EXPECT_EQ(cluster->alloc_status(a), "running");
    EXPECT_EQ(cluster->claim_count("vol"), 1u);
    EXPECT_NE(cluster->node_log("node-1").find("re-adopted"), std::string::npos);
    ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }));
    for (const pid_t p : pids) EXPECT_FALSE(alive(p)) << "survived the stop: pid " << p;
  }

  bool walled = true;
  NodeOptions node1;
  std::unique_ptr<Cluster> cluster;
};

class UnwalledKeeper : public Keeper {
 protected:
  UnwalledKeeper() { walled = false; }
};

TEST_F(Keeper, ADeadAgentsWalledTaskIsGoneBeforeTheControlPlaneFreesItsClaim) {
  dead_agent_task_is_gone_before_the_free(kWriter, 2);
}

TEST_F(Keeper, AnAgentRestartedBeforeTheDeadlineReadoptsTheTaskWhichRunsOn) { restarted_agent_readopts(kWriter, 2); }

TEST_F(UnwalledKeeper, ADeadAgentsUnwalledTaskAndItsEscapedChildAreGoneBeforeTheFree) {
  dead_agent_task_is_gone_before_the_free(kForkingWriter, 3);
}

TEST_F(UnwalledKeeper, AnAgentRestartedBeforeTheDeadlineReadoptsTheUnwalledTaskWhichRunsOn) {
  restarted_agent_readopts(kForkingWriter, 3);
}

}  // namespace
}  // namespace mooring::e2e
