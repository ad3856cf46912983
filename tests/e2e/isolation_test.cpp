// Tasks behind their own walls (issue 41), with the real binaries and the shipped defaults
// (mutual TLS, the control plane holding the CA key): a hostile task as the default user fails
// at everything outside its own allocation and still writes its volume; root runs only where a
// node allows it; a task over its memory limit is OOM-killed with the event; a stop leaves none
// of a task's processes, double-forked ones included, also after an agent kill -9 and restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <regex>

#include "shared/tls/cert_files.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The pids whose environment holds `entry` (NAME=value), as root reads them.
std::vector<pid_t> processes_with(const std::string& entry) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = test::read_file(it->path() / "environ");
    const std::string stat = test::read_file(it->path() / "stat");
    if (stat.find(") Z ") != std::string::npos) continue;  // a zombie runs nothing
    if (env.find(entry + '\0') != std::string::npos || env.ends_with(entry)) out.push_back(std::stoi(name));
  }
  return out;
}

// The pid the "Started" event names (the task's namespace init, as the agent sees it).
pid_t started_pid(Cluster& c, const std::string& id) {
  const std::regex started("task started with pid ([0-9]+)");
  for (const auto& e : c.get("/v1/allocation/" + id).value("Events", json::array())) {
    std::smatch m;
    const std::string message = e.value("Message", "");
    if (std::regex_search(message, m, started)) return std::stoi(m[1].str());
  }
  return 0;
}

bool has_event(Cluster& c, const std::string& id, const std::string& type) {
  for (const auto& e : c.get("/v1/allocation/" + id).value("Events", json::array()))
    if (e.value("Type", "") == type) return true;
  return false;
}

class IsolationE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    ClusterOptions o;
    o.mutual_tls = true;
    o.enrollment = true;  // the control plane holds the CA key: the hostile task goes for it
    cluster = std::make_unique<Cluster>(o);
    cluster->start_controlplane();
  }
  std::string output(const std::string& node, const std::string& id, const char* file = "stdout.log") {
    return test::read_file(cluster->node_dir(node) / "agent" / "allocs" / id / file);
  }
  std::unique_ptr<Cluster> cluster;
};

TEST_F(IsolationE2E, AHostileTaskCannotReachPastItsWallsAndStillUsesItsOwnVolume) {
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("victim-vol").is_null());
  ASSERT_FALSE(cluster->create_volume("own-vol").is_null());
  auto victim =
      allocation("victim", "victim-vol", "node-1", "echo private > $MOORING_VOLUME_DATA/private && exec sleep 3600");
  victim["Task"]["SecretEnv"] = {{"VICTIM_SECRET", "hunter2-isolation"}};
  const auto victim_id = cluster->run_alloc(victim);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(victim_id) == "running"; }))
      << cluster->log_tails();
  std::vector<pid_t> victim_pids;
  ASSERT_TRUE(
      Cluster::eventually([&] { return !(victim_pids = processes_with("VICTIM_SECRET=hunter2-isolation")).empty(); }));
  std::string victim_volume;
  {
    const auto env = test::read_file("/proc/" + std::to_string(victim_pids[0]) + "/environ");
    const auto at = env.find("MOORING_VOLUME_DATA=");
    ASSERT_NE(at, std::string::npos);
    victim_volume = env.substr(at + 20, env.find('\0', at) - at - 20);
  }
  const auto ca_key = tls::ca_paths(cluster->pki().dir()).key.string();
  const std::string pid = std::to_string(victim_pids[0]);
  const std::string script =
      "V=$MOORING_VOLUME_DATA; id -u; echo mine > $V/mine && cat $V/mine && echo OWN_VOLUME_OK; "
      "cat /proc/" +
      pid +
      "/environ && echo LEAK_ENVIRON; "
      "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -q hunter2 && echo LEAK_SECRET; done; "
      "ls " +
      cluster->node_dir("node-1").string() + "/agent/allocs/" + victim_id +
      " && echo LEAK_DATADIR; "
      "cat " +
      ca_key +
      " && echo LEAK_CAKEY; "
      "cat " +
      victim_volume +
      "/private && echo LEAK_VOLUME; "
      "kill -0 " +
      pid +
      " && echo LEAK_SIGNAL; "
      "mount -t tmpfs none $V && echo LEAK_MOUNT; "
      "python3 -c 'import ctypes,sys; l=ctypes.CDLL(None); "
      "sys.exit(0 if l.ptrace(16, int(sys.argv[1]), 0, 0) == 0 or l.ptrace(16, 1, 0, 0) == 0 else 1)' " +
      pid +
      " && echo LEAK_PTRACE; "
      "for f in /etc/x /usr/x /x /var/x " +
      cluster->node_dir("node-1").string() +
      "/agent/x; do "
      "touch $f 2>/dev/null && echo LEAK_WRITE $f; done; "
      "echo hostile-done; exec sleep 3600";
  // Read while it runs: the allocation's directory goes once it ended and was released.
  const auto hostile_id = cluster->run_alloc(allocation("hostile", "own-vol", "node-1", script));
  ASSERT_TRUE(
      Cluster::eventually([&] { return output("node-1", hostile_id).find("hostile-done") != std::string::npos; }, 60s))
      << cluster->log_tails() << output("node-1", hostile_id, "stderr.log");
  const auto out = output("node-1", hostile_id);
  EXPECT_TRUE(out.starts_with("65534\n")) << out;  // nobody, the default
  EXPECT_NE(out.find("mine\nOWN_VOLUME_OK"), std::string::npos) << out << output("node-1", hostile_id, "stderr.log");
  EXPECT_NE(out.find("hostile-done"), std::string::npos) << out;
  EXPECT_EQ(out.find("LEAK"), std::string::npos) << out;
  // The victim ran on, undisturbed.
  EXPECT_EQ(cluster->alloc_status(victim_id), "running");
  ASSERT_EQ(cluster->stop_alloc(victim_id).status, 200u);
  ASSERT_EQ(cluster->stop_alloc(hostile_id).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return processes_with("VICTIM_SECRET=hunter2-isolation").empty(); }));
}

// Without the walls (task_isolation off) a non-root task runs on the host's paths: the way to its
// own directory and volume is opened for its group, and a task of another user cannot pass it.
TEST_F(IsolationE2E, WithoutWallsANonRootTaskUsesItsVolumeAndAnotherUsersTaskCannotReachIt) {
  // The test's directory is mkdtemp's 0700; an operator's data dir sits under traversable parents.
  fs::permissions(cluster->dir(), fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
  NodeOptions unwalled;
  unwalled.agent_args = {"--task-isolation=false"};
  cluster->start_node("node-1", unwalled);
  ASSERT_FALSE(cluster->create_volume("own-vol").is_null());
  ASSERT_FALSE(cluster->create_volume("other-vol").is_null());
  const auto own_id = cluster->run_alloc(allocation(
      "own", "own-vol", "node-1",
      "V=$MOORING_VOLUME_DATA; id -u; echo mine > $V/mine && cat $V/mine && echo OWN_VOLUME_OK; pwd > $HOME/here && "
      "echo OWN_DIR_OK; echo VOLUME=$V; exec sleep 3600"));
  ASSERT_TRUE(Cluster::eventually([&] { return output("node-1", own_id).find("VOLUME=") != std::string::npos; }, 60s))
      << cluster->log_tails() << output("node-1", own_id, "stderr.log");
  const auto out = output("node-1", own_id);
  EXPECT_TRUE(out.starts_with("65534\n")) << out;
  EXPECT_NE(out.find("mine\nOWN_VOLUME_OK\nOWN_DIR_OK\n"), std::string::npos)
      << out << output("node-1", own_id, "stderr.log");
  const auto at = out.find("VOLUME=");
  const std::string volume = out.substr(at + 7, out.find('\n', at) - at - 7);

  auto other = allocation("other", "other-vol", "node-1",
                          "cat " + volume + "/mine && echo LEAK_VOLUME; ls " + volume + " && echo LEAK_LIST; ls " +
                              cluster->node_dir("node-1").string() + "/agent/allocs/" + own_id +
                              " && echo LEAK_DATADIR; echo other-done; exec sleep 3600");
  other["Task"]["User"] = "4321:4321";
  const auto other_id = cluster->run_alloc(other);
  ASSERT_TRUE(
      Cluster::eventually([&] { return output("node-1", other_id).find("other-done") != std::string::npos; }, 60s))
      << cluster->log_tails() << output("node-1", other_id, "stderr.log");
  EXPECT_EQ(output("node-1", other_id).find("LEAK"), std::string::npos) << output("node-1", other_id);
  ASSERT_EQ(cluster->stop_alloc(own_id).status, 200u);
  ASSERT_EQ(cluster->stop_alloc(other_id).status, 200u);
}

TEST_F(IsolationE2E, RootIsRefusedOnADefaultNodeAndRunsOnANodeThatAllowsIt) {
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const auto attrs = cluster->get("/v1/node/node-1").value("Attributes", json::object());
  EXPECT_EQ(attrs.value("task.user", ""), "nobody");
  EXPECT_EQ(attrs.value("task.user_denylist", ""), "root");
  EXPECT_EQ(attrs.value("task.allow_root", ""), "false");

  auto bad = allocation("bad-user", "vol", "", "true");
  bad["Task"]["User"] = "no body";
  const auto refused_input = cluster->request("POST", "/v1/allocations", json{{"Allocation", bad}}.dump());
  EXPECT_EQ(refused_input.status, 400u) << refused_input.body;
  EXPECT_NE(refused_input.body.find("User"), std::string::npos) << refused_input.body;

  auto root = allocation("as-root", "vol", "", "id -u; exec sleep 3600");
  root["Task"]["User"] = "root";
  const auto refused = cluster->request("POST", "/v1/allocations", json{{"Allocation", root}}.dump());
  EXPECT_GE(refused.status, 400u) << refused.body;
  EXPECT_NE(refused.body.find("node-1"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("user_denylist"), std::string::npos) << refused.body;

  NodeOptions allows;
  allows.agent_args = {"--allow-root"};
  cluster->start_node("node-2", allows);
  const auto id = cluster->run_alloc(root);
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(Cluster::eventually([&] { return output("node-2", id) == "0\n"; }, 60s))
      << output("node-2", id) << cluster->get("/v1/allocation/" + id).dump(2) << output("node-2", id, "stderr.log");
  EXPECT_EQ(cluster->get("/v1/allocation/" + id).value("NodeID", ""), "node-2");
  ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
}

TEST_F(IsolationE2E, ATaskOverItsMemoryLimitIsOomKilledWithTheEvent) {
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto hog = allocation("hog", "vol", "node-1", "exec python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'");
  hog["Task"]["Resources"] = {{"MemoryMB", 32}, {"CPU", 500}};
  const auto id = cluster->run_alloc(hog);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "failed"; }, 60s))
      << cluster->get("/v1/allocation/" + id).dump(2) << output("node-1", id, "stderr.log");
  EXPECT_TRUE(has_event(*cluster, id, "OOM killed")) << cluster->get("/v1/allocation/" + id).dump(2);
}

// 25 children in the task's group and 25 double-forked into sessions of their own.
const char* kForker =
    "for i in $(seq 1 25); do sleep 3600 & done; "
    "for i in $(seq 1 25); do setsid sh -c 'sleep 3600 & exec sleep 3600' & done; exec sleep 3600";

TEST_F(IsolationE2E, AStopLeavesNoneOfTheTasksProcessesAlsoAfterAnAgentKillAndRestart) {
  cluster->start_node("node-1", NodeOptions{.agent_args = {"--drain-on-shutdown", "0"}});
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  for (const bool restart : {false, true}) {
    const std::string marker = restart ? "FORKER=after-restart" : "FORKER=plain";
    auto forker = allocation("forker", "vol", "node-1", kForker);
    forker["Task"]["Env"] = {{"FORKER", marker.substr(7)}};
    const auto id = cluster->run_alloc(forker);
    ASSERT_TRUE(Cluster::eventually([&] { return processes_with(marker).size() >= 51; }, 30s))
        << processes_with(marker).size() << cluster->log_tails();
    ASSERT_NE(started_pid(*cluster, id), 0);
    if (restart) {
      cluster->kill_node("node-1");
      EXPECT_GE(processes_with(marker).size(), 51u) << "the task outlives the agent by design";
      cluster->start_node("node-1", NodeOptions{.agent_args = {"--drain-on-shutdown", "0"}});
    }
    ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
    EXPECT_TRUE(Cluster::eventually([&] { return processes_with(marker).empty(); }, 30s))
        << processes_with(marker).size() << " left\n"
        << cluster->log_tails();
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 30s));
  }
}

}  // namespace
}  // namespace mooring::e2e
