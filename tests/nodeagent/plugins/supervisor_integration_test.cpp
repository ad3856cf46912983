// The real supervisor (through the Agent) driving the real mooring-hostpath binary, reporting to
// a fake control plane.
#include <cstdio>
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <fstream>
#include <future>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>

#include "services/nodeagent/agent.hpp"
#include "services/nodeagent/controlplane/controlplane_link.hpp"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "tests/nodeagent/support/fake_controlplane.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The hostpath processes whose command line names `marker` (the test's temp dir).
std::vector<pid_t> hostpath_processes(const std::string& marker) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = test::read_file(it->path() / "cmdline");  // "" once it exited
    const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));  // the agent's own --plugin names it too
    if (std::filesystem::path(argv0).filename() == "mooring-hostpath" && cmdline.find(marker) != std::string::npos)
      out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

class SupervisorIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    faults_ = tmp_ / "faults.json";
    std::ofstream(faults_) << R"({"rules":[]})";
  }

  AgentConfig config(std::chrono::milliseconds health_timeout = 5s) {
    AgentConfig c;
    c.node_id = "node-1";
    c.node_name = "test-node";
    c.data_dir = (tmp_ / "agent").string();
    c.controlplane_addr = cp_.address();
    c.grpc_addr = "127.0.0.1:0";
    c.heartbeat_interval = 200ms;
    PluginConfig p;
    p.id = "hostpath";
    p.type = PluginRole::monolith;
    p.command = test::binary_path("mooring-hostpath").string();
    p.args = {"--data-dir", (tmp_ / "hp").string(), "--node-id", "csi-node-1", "--fault-file", faults_.string()};
    p.health_timeout = health_timeout;
    p.probe_interval = 100ms;
    p.fingerprint_interval = 2s;
    p.stop_timeout = 3s;
    c.plugins.push_back(p);
    return c;
  }

  AgentOptions options() {
    AgentOptions o;
    o.restart_backoff = async::Backoff{200ms, 1s, 2.0, 0.0};
    o.final_heartbeat_timeout = 3s;
    return o;
  }

  // Runs the io_context until `done` holds (checked on this thread, between handlers).
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 20s) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      io_.run_for(10ms);
    }
    return true;
  }

  bool healthy(Agent& a) {
    const auto fp = a.status().fingerprint("hostpath");
    return fp && fp->healthy();
  }

  bool shutdown(Agent& a) {
    bool done = false;
    asio::co_spawn(io_, a.shutdown(), [&](std::exception_ptr e) {
      EXPECT_FALSE(e);
      done = true;
    });
    return run_until([&] { return done; });
  }

  void write_faults(const std::string& json) {
    const auto tmp = faults_.string() + ".new";
    std::ofstream(tmp) << json;
    std::filesystem::rename(tmp, faults_);
  }

  test::TempDir tmp_{"mooring-agent-it"};
  std::filesystem::path faults_;
  FakeControlPlane cp_;
  asio::io_context io_;
};

TEST_F(SupervisorIntegration, PluginIsHealthyWithinOneSecondAndReportedWithProviderAndNodeId) {
  Agent agent(io_.get_executor(), config(), options());
  const auto started = Clock::now();
  agent.start();
  ASSERT_TRUE(run_until([&] { return healthy(agent); }, 10s));
  // The 1 s target holds for an optimized build on an idle machine (about 0.4 s measured); this
  // test runs under ASan beside other test binaries on 2 shared cores, so it asserts with
  // headroom and prints the figure. bench/ measures the target itself.
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  std::printf("plugin healthy after %lld ms\n", static_cast<long long>(took.count()));
  EXPECT_LT(took, 5s) << "healthy only after " << took.count() << "ms";
  const auto fp = *agent.status().fingerprint("hostpath");
  EXPECT_FALSE(fp.provider().empty());
  EXPECT_EQ(fp.node_info().csi_node_id(), "csi-node-1");
  EXPECT_EQ(fp.type(), ::mooring::v1::PLUGIN_TYPE_MONOLITH);
  ASSERT_TRUE(agent.registry().lookup(PluginKind::controller, "hostpath"));
  const auto node = agent.registry().lookup(PluginKind::node, "hostpath");
  ASSERT_TRUE(node);
  EXPECT_EQ(node->reg.provider, fp.provider());
  EXPECT_EQ(node->reg.socket_path, agent.supervisor("hostpath")->socket_path());

  ASSERT_TRUE(run_until([&] {
    const auto seen = cp_.latest("hostpath");
    return seen && seen->healthy() && cp_.saw_event_containing("plugin became healthy");
  }));
  ASSERT_FALSE(cp_.registrations().empty());
  EXPECT_EQ(cp_.registrations().front().node_id(), "node-1");
  EXPECT_TRUE(shutdown(agent));
}

TEST_F(SupervisorIntegration, KilledPluginIsReportedUnhealthyAtOnceRestartedAndHealthyAgain) {
  Agent agent(io_.get_executor(), config(), options());
  agent.start();
  ASSERT_TRUE(run_until([&] { return healthy(agent); }));
  auto* sup = agent.supervisor("hostpath");
  const auto pid = sup->pid();
  ASSERT_TRUE(pid);
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  // The exit is observed, not waited for at the next probe.
  ASSERT_TRUE(run_until([&] { return !healthy(agent); }, 5s));
  EXPECT_NE(agent.status().fingerprint("hostpath")->health_description().find("signal 9"), std::string::npos)
      << agent.status().fingerprint("hostpath")->health_description();
  ASSERT_TRUE(run_until([&] { return healthy(agent) && sup->pid() && *sup->pid() != *pid; }));
  EXPECT_EQ(sup->restarts(), 1u);
  ASSERT_TRUE(run_until([&] {
    return cp_.saw_event_containing("plugin unhealthy: plugin process killed by signal 9") &&
           cp_.saw_event_containing("plugin restarted") && cp_.latest("hostpath") && cp_.latest("hostpath")->healthy();
  }));
  // Order as the control plane saw it: healthy, unhealthy, restarted, healthy.
  std::vector<std::string> plugin_events;
  for (const auto& e : cp_.events()) {
    if (e.subsystem() == "plugin") plugin_events.push_back(e.message().substr(0, 20));
  }
  ASSERT_GE(plugin_events.size(), 4u);
  EXPECT_EQ(plugin_events[0], "plugin became health");
  EXPECT_EQ(plugin_events[1], "plugin unhealthy: pl");
  EXPECT_EQ(plugin_events[2], "plugin restarted");
  EXPECT_EQ(plugin_events[3], "plugin became health");
  EXPECT_TRUE(shutdown(agent));
}

TEST_F(SupervisorIntegration, PluginWhoseProbeFailsIsRestartedWithBackoffAndReportedWithTheReason) {
  write_faults(R"({"rules":[{"rpc":"Probe","code":9,"message":"backing disk missing"}]})");
  Agent agent(io_.get_executor(), config(/*health_timeout=*/800ms), options());
  agent.start();
  auto* sup = agent.supervisor("hostpath");
  ASSERT_TRUE(run_until([&] { return sup->restarts() >= 2; }, 30s));
  const auto fp = agent.status().fingerprint("hostpath");
  ASSERT_TRUE(fp);
  EXPECT_FALSE(fp->healthy());
  EXPECT_NE(fp->health_description().find("backing disk missing"), std::string::npos) << fp->health_description();
  ASSERT_TRUE(run_until([&] {
    const auto seen = cp_.latest("hostpath");
    return seen && !seen->healthy() && seen->health_description().find("backing disk missing") != std::string::npos &&
           cp_.saw_event_containing("plugin restarted");
  }));
  EXPECT_TRUE(cp_.saw_event_containing("backing disk missing"));
  EXPECT_FALSE(cp_.saw_event_containing("plugin became healthy"));
  EXPECT_FALSE(agent.registry().lookup(PluginKind::node, "hostpath"));  // never registered

  // Once the fault is gone, the next instance becomes healthy.
  write_faults(R"({"rules":[]})");
  ASSERT_TRUE(run_until([&] { return healthy(agent); }, 30s));
  EXPECT_TRUE(shutdown(agent));
}

TEST_F(SupervisorIntegration, PluginWhoseProbeHangsIsRestartedAndReportedUnhealthy) {
  write_faults(R"({"rules":[{"rpc":"Probe","hang":true}]})");
  Agent agent(io_.get_executor(), config(/*health_timeout=*/800ms), options());
  agent.start();
  auto* sup = agent.supervisor("hostpath");
  ASSERT_TRUE(run_until([&] { return sup->restarts() >= 1; }, 30s));
  const auto fp = agent.status().fingerprint("hostpath");
  ASSERT_TRUE(fp);
  EXPECT_FALSE(fp->healthy());
  EXPECT_NE(fp->health_description().find("did not answer"), std::string::npos) << fp->health_description();
  EXPECT_TRUE(shutdown(agent));
}

TEST_F(SupervisorIntegration, ShutdownReportsThePluginUnhealthyStopsItAndDeregistersIt) {
  Agent agent(io_.get_executor(), config(), options());
  agent.start();
  ASSERT_TRUE(run_until([&] { return healthy(agent) && cp_.latest("hostpath") && cp_.latest("hostpath")->healthy(); }));
  const auto pid = *agent.supervisor("hostpath")->pid();
  ASSERT_TRUE(shutdown(agent));
  const auto last = cp_.latest("hostpath");
  ASSERT_TRUE(last);
  EXPECT_FALSE(last->healthy());
  EXPECT_NE(last->health_description().find("agent shutting down"), std::string::npos) << last->health_description();
  EXPECT_FALSE(last->provider().empty());  // still a populated fingerprint (seed 003)
  EXPECT_TRUE(cp_.saw_event_containing("plugin unhealthy"));
  EXPECT_NE(::kill(pid, 0), 0) << "plugin process still running";
  EXPECT_FALSE(agent.registry().lookup(PluginKind::node, "hostpath"));
  EXPECT_FALSE(agent.registry().lookup(PluginKind::controller, "hostpath"));
}

TEST_F(SupervisorIntegration, EventsSurviveAControlPlaneOutageAndReRegistrationAfterKnownFalse) {
  cp_.set_down(true);
  Agent agent(io_.get_executor(), config(), options());
  agent.start();
  ASSERT_TRUE(run_until([&] { return healthy(agent); }));  // supervision does not wait for the control plane
  run_until([] { return false; }, 500ms);
  EXPECT_TRUE(cp_.heartbeats().empty());
  cp_.set_down(false);
  ASSERT_TRUE(run_until([&] { return cp_.saw_event_containing("plugin became healthy"); }));
  const auto registrations = cp_.registrations().size();
  cp_.forget_node();
  ASSERT_TRUE(run_until([&] { return cp_.registrations().size() > registrations; }));
  EXPECT_TRUE(shutdown(agent));
}

// A plugin run by someone else (a sidecar): the agent dials its socket, fingerprints and
// reports it, notices when it dies and when it is back, but never launches or stops it.
TEST_F(SupervisorIntegration, ExternalSocketPluginIsSupervisedButNeverLaunchedOrStopped) {
  const auto socket = tmp_ / "sidecar" / "csi.sock";
  std::filesystem::create_directories(socket.parent_path());
  auto launch_sidecar = [&] {
    return std::make_unique<test::ChildProcess>(test::SpawnOptions{
        test::binary_path("mooring-hostpath"),
        {"--endpoint", "unix://" + socket.string(), "--data-dir", (tmp_ / "hp").string(), "--node-id", "csi-sidecar"},
        {},
        true,
        tmp_ / "sidecar.log"});
  };
  auto sidecar = launch_sidecar();
  auto c = config();
  c.plugins[0].command.clear();
  c.plugins[0].args.clear();
  c.plugins[0].socket = socket.string();
  Agent agent(io_.get_executor(), c, options());
  agent.start();
  ASSERT_TRUE(run_until([&] { return healthy(agent); }));
  EXPECT_EQ(agent.status().fingerprint("hostpath")->node_info().csi_node_id(), "csi-sidecar");
  EXPECT_FALSE(agent.supervisor("hostpath")->pid()) << "an external plugin is not the agent's process";

  sidecar->kill();
  sidecar->wait_for_exit(10s);
  ASSERT_TRUE(run_until([&] { return !healthy(agent); }));
  ASSERT_TRUE(run_until([&] { return cp_.latest("hostpath") && !cp_.latest("hostpath")->healthy(); }));
  sidecar = launch_sidecar();
  ASSERT_TRUE(run_until([&] { return healthy(agent); })) << "healthy again once the sidecar is back";

  ASSERT_TRUE(shutdown(agent));
  EXPECT_TRUE(sidecar->running()) << "the agent must not stop a plugin it did not launch";
}

// An agent that died without a graceful shutdown left its plugin in the persisted registry. A
// new agent whose configuration no longer names that plugin deregisters it (and says so)
// instead of reporting it unhealthy forever (seed 002).
TEST_F(SupervisorIntegration, PersistedPluginNoLongerConfiguredIsDeregisteredAfterARestart) {
  const auto hp_dir = tmp_ / "hp";
  const auto spec = "hostpath,type=monolith,command=" + test::binary_path("mooring-hostpath").string() +
                    ",arg=--data-dir,arg=" + hp_dir.string() + ",arg=--node-id,arg=csi-node-1,probe_interval=100ms";
  {
    test::ChildProcess crashed(test::SpawnOptions{
        test::binary_path("mooring-nodeagent"),
        {"--insecure", "--node-id", "node-1", "--data-dir", (tmp_ / "agent").string(), "--controlplane-addr", cp_.address(),
         "--grpc-addr", "127.0.0.1:0", "--heartbeat-interval", "200ms",
         "--metrics-addr", "127.0.0.1:0", "--plugin", spec},
        {},
        true,
        tmp_ / "crashed-agent.log"});
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline && !(cp_.latest("hostpath") && cp_.latest("hostpath")->healthy()))
      std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(cp_.latest("hostpath") && cp_.latest("hostpath")->healthy());
    crashed.kill();  // SIGKILL: no graceful deregistration
    crashed.wait_for_exit(10s);
  }
  // Its plugin outlived it (as after a crash); stop it the way the gone process would have.
  for (const pid_t p : hostpath_processes(hp_dir.string())) ::kill(p, SIGKILL);

  auto c = config();
  c.plugins.clear();
  Agent agent(io_.get_executor(), c, options());
  agent.start();
  EXPECT_FALSE(agent.registry().lookup(PluginKind::node, "hostpath"));
  EXPECT_FALSE(agent.registry().lookup(PluginKind::controller, "hostpath"));
  ASSERT_TRUE(run_until([&] { return cp_.saw_event_containing("plugin deregistered: hostpath is gone"); }));
  EXPECT_TRUE(shutdown(agent));
}

// grpc.health.v1 on the agent's own gRPC address: "" serves while the process runs;
// "mooring.ready" only while the control plane is reached.
int health_status(int port, const std::string& service) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  // HealthCheckRequest{string service = 1}, encoded by hand (no generated health stubs here).
  std::string wire = "\x0a" + std::string(1, static_cast<char>(service.size())) + service;
  grpc::Slice slice(wire);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status st) { done.set_value(st); });
  const auto st = done.get_future().get();
  if (!st.ok()) return -static_cast<int>(st.error_code());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  // HealthCheckResponse{ServingStatus status = 1}: 1 SERVING, 2 NOT_SERVING; empty = 0 UNKNOWN.
  return bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

TEST_F(SupervisorIntegration, AgentServesGrpcHealthForLivenessAndReadiness) {
  cp_.set_down(true);
  Agent agent(io_.get_executor(), config(), options());
  agent.start();
  ASSERT_GT(agent.grpc_port(), 0);
  auto check = [&](const std::string& service) {
    auto f = std::async(std::launch::async, [&] { return health_status(agent.grpc_port(), service); });
    while (f.wait_for(0s) != std::future_status::ready) io_.run_for(5ms);
    return f.get();
  };
  EXPECT_EQ(check(""), 1) << "live while the process serves";
  EXPECT_EQ(check("mooring.ready"), 2) << "not ready before the control plane was reached";
  cp_.set_down(false);
  ASSERT_TRUE(run_until([&] { return !cp_.registrations().empty(); }));
  // The fake control plane records the registration before the agent has its answer: wait for
  // readiness rather than guessing how long that takes.
  EXPECT_TRUE(run_until([&] { return check("mooring.ready") == 1; })) << "ready once the control plane answered";
  EXPECT_TRUE(shutdown(agent));
}

TEST(NodeAgentBinary, RunsAgainstTheControlPlaneAndShutsDownGracefullyOnSigterm) {
  test::TempDir tmp{"mooring-agent-bin"};
  FakeControlPlane cp;
  const auto spec = "hostpath,type=monolith,command=" + test::binary_path("mooring-hostpath").string() +
                    ",arg=--data-dir,arg=" + (tmp / "hp").string() + ",arg=--node-id,arg=csi-bin,health_timeout=5s,"
                    "probe_interval=200ms";
  test::ChildProcess agent(test::SpawnOptions{
      test::binary_path("mooring-nodeagent"),
      {"--insecure", "--data-dir", (tmp / "agent").string(), "--controlplane-addr", cp.address(), "--heartbeat-interval", "200ms",
         "--metrics-addr", "127.0.0.1:0",
       "--plugin", spec},
      {},
      true,
      tmp / "agent.log"});
  const auto deadline = Clock::now() + 20s;
  while (Clock::now() < deadline && !(cp.latest("hostpath") && cp.latest("hostpath")->healthy()))
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(cp.latest("hostpath") && cp.latest("hostpath")->healthy()) << "see " << (tmp / "agent.log");
  // The node id was generated and persisted in the data dir.
  std::ifstream id_file(tmp / "agent" / "node-id");
  std::string node_id;
  id_file >> node_id;
  EXPECT_EQ(cp.registrations().front().node_id(), node_id);
  ASSERT_TRUE(agent.terminate());
  const auto st = agent.wait_for_exit(20s);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->exited && st->code == 0) << st->describe();
  EXPECT_FALSE(cp.latest("hostpath")->healthy());
  EXPECT_NE(cp.latest("hostpath")->health_description().find("agent shutting down"), std::string::npos);
}

class NodeAgentProcesses : public ::testing::Test {
 protected:
  ~NodeAgentProcesses() override {
    agents.clear();
    for (const pid_t p : hostpath_processes(tmp.path().string())) ::kill(p, SIGKILL);
  }
  test::ChildProcess& start_agent(const std::string& log) {
    const auto spec = "hostpath,type=monolith,command=" + test::binary_path("mooring-hostpath").string() +
                      ",arg=--data-dir,arg=" + (tmp / "hp").string() +
                      ",arg=--node-id,arg=csi-bin,health_timeout=5s,probe_interval=200ms,stop_timeout=3s";
    agents.push_back(std::make_unique<test::ChildProcess>(test::SpawnOptions{
        test::binary_path("mooring-nodeagent"),
        {"--insecure", "--data-dir", (tmp / "agent").string(), "--controlplane-addr", cp.address(), "--heartbeat-interval", "200ms",
         "--metrics-addr", "127.0.0.1:0",
         "--grpc-addr", "127.0.0.1:0", "--plugin", spec},
        {},
        true,
        tmp / log}));
    return *agents.back();
  }
  // A heartbeat after the first `from` ones reports the plugin healthy.
  bool healthy_within(std::chrono::milliseconds timeout, std::size_t from = 0) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      const auto beats = cp.heartbeats();
      for (std::size_t i = from; i < beats.size(); ++i)
        for (const auto& fp : beats[i].plugins())
          if (fp.plugin_id() == "hostpath" && fp.healthy()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  test::TempDir tmp{"mooring-agent-one"};
  FakeControlPlane cp;
  std::vector<std::unique_ptr<test::ChildProcess>> agents;
};

// Two agents on one data dir would re-adopt the same tasks and launch the same plugins: the
// second is refused, naming the first, and the first goes on unharmed.
TEST_F(NodeAgentProcesses, ASecondAgentOnTheSameDataDirIsRefusedNamingTheFirst) {
  auto& first = start_agent("first.log");
  ASSERT_TRUE(healthy_within(20s)) << test::read_file(tmp / "first.log");
  auto& second = start_agent("second.log");
  const auto st = second.wait_for_exit(20s);
  ASSERT_TRUE(st) << "the second agent kept running";
  EXPECT_TRUE(st->exited && st->code == 1) << st->describe();
  EXPECT_NE(test::read_file(tmp / "second.log").find("is already running (pid " + std::to_string(first.pid()) + ";"),
            std::string::npos)
      << test::read_file(tmp / "second.log");
  EXPECT_TRUE(first.running());
  EXPECT_EQ(hostpath_processes(tmp.path().string()).size(), 1u) << "the second agent launched no plugin";
}

// kill -9 of the agent leaves its plugin running; the next agent stops that one before it
// launches its own: after three kills, one plugin process, serving on its socket.
TEST_F(NodeAgentProcesses, ThreeKillsLeaveOnePluginProcessServingItsSocket) {
  for (int i = 0; i < 4; ++i) {
    const auto beats = cp.heartbeats().size();
    auto& agent = start_agent("agent-" + std::to_string(i) + ".log");
    ASSERT_TRUE(healthy_within(30s, beats)) << test::read_file(tmp / ("agent-" + std::to_string(i) + ".log"));
    EXPECT_EQ(hostpath_processes(tmp.path().string()).size(), 1u) << "after " << i << " kills";
    if (i < 3) {
      ASSERT_TRUE(agent.kill());
      ASSERT_TRUE(agent.wait_for_exit(10s));
    }
  }
  EXPECT_TRUE(std::filesystem::exists(tmp / "agent" / "plugins" / "hostpath" / "csi.sock"));
  EXPECT_NE(test::read_file(tmp / "agent-1.log").find("stopping the plugin process an earlier agent left running"),
            std::string::npos);
}

// A sidecar plugin (on its own socket) that comes up after the agent: noticed and healthy within a
// second of its socket appearing, not after a growing backoff.
TEST_F(NodeAgentProcesses, ASidecarSocketThatAppearsLaterIsHealthyWithinASecond) {
  const auto socket = tmp / "sidecar" / "csi.sock";
  std::filesystem::create_directories(socket.parent_path());
  agents.push_back(std::make_unique<test::ChildProcess>(test::SpawnOptions{
      test::binary_path("mooring-nodeagent"),
      {"--insecure", "--data-dir", (tmp / "agent").string(), "--controlplane-addr", cp.address(), "--heartbeat-interval", "200ms",
         "--metrics-addr", "127.0.0.1:0",
       "--grpc-addr", "127.0.0.1:0", "--plugin", "hostpath,type=monolith,socket=" + socket.string()},
      {},
      true,
      tmp / "agent.log"}));
  std::this_thread::sleep_for(3s);
  ASSERT_FALSE(healthy_within(10ms)) << "healthy before the plugin exists";
  test::ChildProcess plugin(test::SpawnOptions{test::binary_path("mooring-hostpath"),
                                               {"--endpoint", "unix://" + socket.string(), "--data-dir",
                                                (tmp / "hp").string(), "--node-id", "csi-sidecar"},
                                               {},
                                               true,
                                               tmp / "plugin.log"});
  ASSERT_TRUE(test::wait_until([&] { return std::filesystem::exists(socket); }, 10s)) << test::read_file(tmp / "plugin.log");
  const auto appeared = Clock::now();
  const auto beats = cp.heartbeats().size();
  ASSERT_TRUE(healthy_within(10s, beats)) << test::read_file(tmp / "agent.log");
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - appeared);
  std::cerr << "sidecar socket appeared -> healthy at the control plane: " << took.count() << " ms\n";
  EXPECT_LE(took.count(), 1500) << "the target is 1 s; the rest is room for a loaded machine";
}

}  // namespace
}  // namespace mooring::nodeagent
