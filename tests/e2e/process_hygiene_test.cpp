// Process hygiene with the real binaries (issue 40), read from the kernel: what a plugin and a
// task launched by the agent hold (/proc/<pid>/fd), and that every descriptor the control plane,
// the agent and the hostpath plugin open is close-on-exec (/proc/<pid>/fdinfo), listening and
// accepted sockets included. An agent's metrics listener inherited by its plugin kept the port
// after kill -9 of the agent, and the restarted agent could not bind it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/descriptors.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A TCP connection held open to 127.0.0.1:port (the server then holds the accepted socket).
class HeldConnection {
 public:
  explicit HeldConnection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~HeldConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldConnection(const HeldConnection&) = delete;
  HeldConnection& operator=(const HeldConnection&) = delete;
  bool connected() const { return connected_; }

 private:
  int fd_;
  bool connected_ = false;
};

std::size_t sockets_of(pid_t pid) {
  std::size_t n = 0;
  for (const auto& [fd, target] : test::open_descriptors(pid)) n += target.starts_with("socket:") ? 1 : 0;
  return n;
}

// The children of `parent` whose command line is exactly `cmdline` (NULs as spaces).
std::vector<pid_t> children_running(pid_t parent, const std::string& cmdline) {
  std::vector<pid_t> out;
  for (const auto& p : test::running_processes())
    if (p.parent == parent && p.cmdline == cmdline) out.push_back(p.pid);
  return out;
}

// Targets that name one object, so that two processes showing it hold the same one: sockets,
// pipes and files outside /dev ("anon_inode:[eventpoll]" or "/dev/null" are as many objects as
// there are openers).
bool names_one_object(const std::string& target) {
  return target.starts_with("socket:[") || target.starts_with("pipe:[") ||
         (target.starts_with("/") && !target.starts_with("/dev/"));
}

class ProcessHygieneE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    metrics_port = test::free_tcp_port();
    cluster = std::make_unique<Cluster>(ClusterOptions{.mutual_tls = true});
    cluster->start_controlplane();
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  std::uint16_t metrics_port = 0;
  std::unique_ptr<Cluster> cluster;
};

// A plugin that never opens anything itself (/bin/sleep as a second plugin, never healthy) shows
// exactly what the agent hands a plugin: /dev/null and its two output pipes. The real hostpath
// plugin shares nothing with the agent but those pipes. A task holds /dev/null and its log files.
TEST_F(ProcessHygieneE2E, APluginAndATaskHoldOnlyTheirStandardStreams) {
  NodeOptions node;
  node.agent_args = {"--metrics-addr", "127.0.0.1:" + std::to_string(metrics_port), "--plugin",
                     "bare,type=node,command=/bin/sleep,arg=3600,health_timeout=60s"};
  cluster->start_node("node-1", node);
  const pid_t agent = cluster->agent_pid("node-1");
  ASSERT_NE(agent, 0);
  HeldConnection scrape(metrics_port);  // the agent now also holds an accepted socket
  ASSERT_TRUE(scrape.connected());

  std::vector<pid_t> bare;
  ASSERT_TRUE(
      Cluster::eventually([&] { return (bare = children_running(agent, "/bin/sleep 3600 ")).size() == 1; }, 20s))
      << "the agent did not launch the bare plugin";
  std::map<int, std::string> fds;
  ASSERT_TRUE(Cluster::eventually([&] { return (fds = test::open_descriptors(bare[0])).size() == 3; }, 10s))
      << test::describe_descriptors(fds);
  EXPECT_EQ(fds.at(0), "/dev/null");
  EXPECT_TRUE(fds.at(1).starts_with("pipe:[") && fds.at(2).starts_with("pipe:[")) << test::describe_descriptors(fds);

  // The hostpath plugin: its own descriptors (socket, state files) and nothing of the agent's.
  const pid_t plugin = cluster->plugin_pid("node-1");
  ASSERT_NE(plugin, 0);
  const auto agent_fds = test::open_descriptors(agent);
  std::set<std::string> agents_objects;
  for (const auto& [fd, target] : agent_fds) agents_objects.insert(target);
  for (const auto& [fd, target] : test::open_descriptors(plugin)) {
    if (fd == 1 || fd == 2) {
      EXPECT_TRUE(agents_objects.contains(target)) << "fd " << fd << " is the pipe the agent reads: " << target;
      continue;
    }
    EXPECT_FALSE(names_one_object(target) && agents_objects.contains(target))
        << "the plugin holds the agent's " << target << " as fd " << fd << "\nagent:\n"
        << test::describe_descriptors(agent_fds);
  }

  // A task: /dev/null and its allocation's two log files.
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto task = allocation("sleeper", "vol", "node-1", "exec sleep 3601");
  const auto id = cluster->run_alloc(task);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; })) << cluster->log_tails();
  const std::regex started("task started with pid ([0-9]+)");
  pid_t task_pid = 0;
  for (const auto& e : cluster->get("/v1/allocation/" + id).value("Events", json::array())) {
    std::smatch m;
    const std::string message = e.value("Message", "");
    if (std::regex_search(message, m, started)) task_pid = std::stoi(m[1].str());
  }
  ASSERT_NE(task_pid, 0) << cluster->get("/v1/allocation/" + id).dump();
  // The pid the agent names is the init of the task's PID namespace (issue 41): it holds only the
  // pipe it reports the task's exit through and its keeper page (issue 43); the task is its one child.
  const pid_t init_pid = task_pid;
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        std::istringstream children(
            test::read_file("/proc/" + std::to_string(init_pid) + "/task/" + std::to_string(init_pid) + "/children"));
        return static_cast<bool>(children >> task_pid) && task_pid != init_pid;
      },
      10s));
  const auto init_fds = test::open_descriptors(init_pid);
  ASSERT_EQ(init_fds.size(), 2u) << test::describe_descriptors(init_fds);
  EXPECT_TRUE(init_fds.contains(3) && init_fds.at(3).starts_with("pipe:[")) << test::describe_descriptors(init_fds);
  EXPECT_TRUE(init_fds.contains(4) && init_fds.at(4).starts_with("/memfd:mooring-keeper"))
      << test::describe_descriptors(init_fds);
  ASSERT_TRUE(Cluster::eventually([&] { return (fds = test::open_descriptors(task_pid)).size() == 3; }, 10s))
      << test::describe_descriptors(fds);
  EXPECT_EQ(fds.at(0), "/dev/null");
  EXPECT_TRUE(fds.at(1).ends_with("/stdout.log") && fds.at(1).starts_with(cluster->node_dir("node-1").string()))
      << fds.at(1);
  EXPECT_TRUE(fds.at(2).ends_with("/stderr.log")) << fds.at(2);
  ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 30s));
}

// The secure stack as `make run` starts it (mutual TLS, HTTPS, metrics on): no descriptor of any
// service crosses an exec, with a client connected to each listener the service serves.
TEST_F(ProcessHygieneE2E, EveryDescriptorOfTheServicesIsCloseOnExec) {
  NodeOptions node;
  node.agent_args = {"--metrics-addr", "127.0.0.1:" + std::to_string(metrics_port)};
  cluster->start_node("node-1", node);
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const pid_t cp = cluster->controlplane_pid();
  const pid_t agent = cluster->agent_pid("node-1");
  const pid_t plugin = cluster->plugin_pid("node-1");
  ASSERT_TRUE(cp != 0 && agent != 0 && plugin != 0);
  const auto cp_sockets = sockets_of(cp);
  const auto agent_sockets = sockets_of(agent);
  HeldConnection api(cluster->http_port());
  HeldConnection scrape(metrics_port);
  ASSERT_TRUE(api.connected() && scrape.connected());
  EXPECT_TRUE(
      Cluster::eventually([&] { return sockets_of(cp) > cp_sockets && sockets_of(agent) > agent_sockets; }, 10s))
      << "the held connections were not accepted";
  for (const auto& [who, pid] : std::vector<std::pair<std::string, pid_t>>{
           {"control plane", cp}, {"agent", agent}, {"hostpath plugin", plugin}}) {
    const auto inheritable = test::inheritable_descriptors(pid);
    EXPECT_TRUE(inheritable.empty()) << "the " << who << " holds descriptors without close-on-exec:\n"
                                     << test::describe_descriptors(inheritable);
  }
}

}  // namespace
}  // namespace mooring::e2e
