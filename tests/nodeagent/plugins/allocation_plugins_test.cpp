// Plugins that run as allocations' tasks, supervised through the configured plugins' supervisor
// against fake plugins: the health timeout and its reason, registration and fingerprints owned by
// the allocation, the final fingerprint, and the deregistration rules (out of the registry at
// once; listed unhealthy with the waiting count while volumes need it; two instances of one
// plugin id; a configured plugin that an allocation's instance replaced serves again).
#include "services/nodeagent/plugins/allocation_plugins.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/plugin_manager.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "shared/async/task_group.hpp"
#include "shared/async/wake_signal.hpp"
#include "tests/nodeagent/support/fake_plugin.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using namespace std::chrono_literals;

// A unix socket file at `path` (bound, not listening): what the supervisor waits for.
class SocketFile {
 public:
  explicit SocketFile(const std::filesystem::path& path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  }
  ~SocketFile() { ::close(fd_); }

 private:
  int fd_;
};

class AllocationPluginsTest : public ::testing::Test {
 protected:
  AllocationPluginsTest()
      : manager(io.get_executor(), registry, status),
        plugins(io.get_executor(), registry, status, [this](const std::string& id) { return id == "hp" ? waiting : 0; },
                AllocationPluginsOptions{
                    .make_client = [this](const std::string&, const std::string& socket) { return client(socket); },
                    .configured = [this] { return configured_supervisors(); },
                    .probe_interval = 20ms,
                    .fingerprint_interval = 200ms}) {
    status.on_change([this] {
      manager.status_changed();
      plugins.wake();
    });
    loops.spawn("allocation-plugins", plugins.run());  // as the agent runs it
  }
  ~AllocationPluginsTest() override { status.on_change({}); }

  std::unique_ptr<PluginClient> client(const std::string& socket) {
    auto& p = fakes[socket];
    if (!p) p = std::make_shared<FakePlugin>();
    return std::make_unique<FakePluginClient>(p);
  }
  std::vector<PluginSupervisor*> configured_supervisors() {
    std::vector<PluginSupervisor*> out;
    for (auto& s : configured) out.push_back(s.get());
    return out;
  }
  // A plugin of the agent's configuration on socket `name` (an external socket: nothing launched),
  // supervised as the agent supervises it, until healthy and registered.
  PluginSupervisor& start_configured(const std::string& name) {
    PluginConfig pc;
    pc.id = "hp";
    pc.type = PluginRole::monolith;
    pc.socket = socket(name);
    pc.health_timeout = 2s;
    pc.probe_interval = 20ms;
    pc.fingerprint_interval = 200ms;
    SupervisorContext ctx{registry, status, loops, [this](const std::string&, const std::string& sock) { return client(sock); },
                          dir.path()};
    configured.push_back(std::make_unique<PluginSupervisor>(io.get_executor(), pc, std::move(ctx)));
    loops.spawn("configured-" + name, configured.back()->run());
    run_for(io, 100ms);
    return *configured.back();
  }
  std::string socket(const std::string& alloc) { return (dir.path() / (alloc + ".sock")).string(); }

  void configured_serves_again_after_the_allocation_stops(std::size_t volumes) {
    SocketFile conf(socket("configured"));
    SocketFile sock(socket("a1"));
    auto& configured_sup = start_configured("configured");
    ASSERT_NE(configured_sup.generation(), 0u);
    ASSERT_EQ(registry.lookup(PluginKind::node, "hp")->reg.socket_path, configured_sup.socket_path());
    ASSERT_TRUE(supervise("a1"));
    ASSERT_EQ(registry.lookup(PluginKind::node, "hp")->reg.alloc_id, "a1");

    waiting = volumes;
    plugins.stopped("a1");
    for (const auto kind : {PluginKind::node, PluginKind::controller}) {
      const auto inst = registry.lookup(kind, "hp");
      ASSERT_TRUE(inst);
      EXPECT_EQ(inst->reg.socket_path, configured_sup.socket_path());
      EXPECT_EQ(inst->reg.alloc_id, "");
    }
    EXPECT_TRUE(manager.find("hp").has_value()) << "the node's calls go to the configured plugin";
    EXPECT_TRUE(manager.healthy_client(PluginKind::controller, "hp"));
    run_for(io, 100ms);
    EXPECT_FALSE(fingerprint_of("a1"));
    const auto reported = status.fingerprints();
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_EQ(reported[0].alloc_id(), "");
    EXPECT_TRUE(reported[0].healthy()) << reported[0].health_description();
    EXPECT_TRUE(plugins.retiring().empty());
    EXPECT_EQ(registry.lookup(PluginKind::node, "hp")->reg.socket_path, configured_sup.socket_path());
    EXPECT_TRUE(manager.find("hp").has_value());
  }
  std::shared_ptr<FakePlugin>& fake(const std::string& alloc) {
    auto& p = fakes[socket(alloc)];
    if (!p) p = std::make_shared<FakePlugin>();
    return p;
  }

  domain::Status supervise(const std::string& alloc, std::chrono::milliseconds health_timeout = 2s,
                           std::uint64_t create_index = 0) {
    domain::Status out;
    domain::TaskCSIPlugin plugin{.id = "hp", .type = domain::PluginType::monolith};
    plugin.health_timeout = health_timeout;
    // Named, not temporaries in the co_await expression: GCC 12 destroys those twice.
    PluginTaskEvents sink = [this, alloc](std::string type, std::string msg) {
      events.push_back(alloc + " " + type + ": " + msg);
    };
    const std::string path = socket(alloc);
    run_async(io, [&]() -> asio::awaitable<void> { out = co_await plugins.supervise(alloc, create_index, plugin, path, sink); });
    run_for(io, 50ms);  // the first heartbeat fingerprint
    return out;
  }
  void stop(const std::string& alloc) {
    plugins.stopped(alloc);
    run_for(io, 100ms);
  }
  std::optional<v1::PluginFingerprint> fingerprint_of(const std::string& alloc) {
    return status.fingerprint("hp", v1::PLUGIN_TYPE_NODE, alloc);
  }
  bool has_event(const std::string& needle) const {
    for (const auto& e : events)
      if (e.find(needle) != std::string::npos) return true;
    return false;
  }

  test::TempDir dir{"allocation-plugins"};
  asio::io_context io;
  PluginRegistry registry;
  NodeStatus status;
  PluginManager manager;
  std::map<std::string, std::shared_ptr<FakePlugin>> fakes;  // by socket path
  std::size_t waiting = 0;  // mount records naming "hp"
  std::vector<std::string> events;
  std::vector<std::unique_ptr<PluginSupervisor>> configured;  // before `plugins`: its fallbacks outlive it
  AllocationPlugins plugins;
  async::TaskGroup loops{io.get_executor(), "test"};
};

TEST_F(AllocationPluginsTest, APluginTaskIsRegisteredAsOwnedByItsAllocationAndItsFingerprintNamesIt) {
  SocketFile sock(socket("a1"));
  ASSERT_TRUE(supervise("a1"));
  const auto inst = registry.lookup(PluginKind::node, "hp");
  ASSERT_TRUE(inst);
  EXPECT_EQ(inst->reg.alloc_id, "a1");
  EXPECT_EQ(inst->reg.socket_path, socket("a1"));
  EXPECT_FALSE(inst->reg.launched);
  EXPECT_TRUE(registry.lookup(PluginKind::controller, "hp"));  // a monolith serves both
  const auto reported = status.fingerprints();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].alloc_id(), "a1");
  EXPECT_TRUE(reported[0].healthy()) << reported[0].health_description();
  EXPECT_EQ(reported[0].node_info().csi_node_id(), "csi-node-1");  // fingerprinted: NodeGetInfo
  EXPECT_TRUE(manager.find("hp").has_value());
  EXPECT_TRUE(has_event("a1 PluginHealthy")) << testing::PrintToString(events);

  // Health changes after the start are task events too.
  fake("a1")->fail["Probe"] = grpc::Status(grpc::StatusCode::UNAVAILABLE, "disk gone");
  run_for(io, 200ms);
  EXPECT_TRUE(has_event("a1 PluginUnhealthy: plugin hp unhealthy: Probe failed")) << testing::PrintToString(events);
  EXPECT_FALSE(manager.find("hp").has_value());
  fake("a1")->fail.clear();
  run_for(io, 200ms);
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](const auto& e) { return e.find("PluginHealthy") != std::string::npos; }), 2);
}

TEST_F(AllocationPluginsTest, APluginThatNeverAnswersReadyFailsAfterItsHealthTimeoutNamingTheLastProbeAnswer) {
  SocketFile sock(socket("a1"));
  fake("a1")->fail["Probe"] = grpc::Status(grpc::StatusCode::UNAVAILABLE, "still loading");
  const auto t0 = std::chrono::steady_clock::now();
  const auto st = supervise("a1", 300ms);
  ASSERT_FALSE(st);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(st.error().rfind("plugin did not become healthy within 300ms: Probe failed: ", 0), 0u) << st.error();
  EXPECT_NE(st.error().find("still loading"), std::string::npos) << st.error();
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  const auto fp = fingerprint_of("a1");
  ASSERT_TRUE(fp);
  EXPECT_FALSE(fp->healthy());
  // Stopped without ever registering: nothing is left listed.
  stop("a1");
  EXPECT_FALSE(fingerprint_of("a1"));
  EXPECT_TRUE(status.fingerprints().empty());
}

TEST_F(AllocationPluginsTest, APluginWhoseSocketNeverAppearsFailsSayingSo) {
  const auto st = supervise("a1", 200ms);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("plugin did not become healthy within 200ms: plugin socket " + socket("a1") + " did not appear"),
            std::string::npos)
      << st.error();
}

TEST_F(AllocationPluginsTest, WhenTheTaskStopsTheFinalFingerprintRunsAndWithoutVolumesTheInstanceIsDeregistered) {
  SocketFile sock(socket("a1"));
  ASSERT_TRUE(supervise("a1"));
  stop("a1");
  EXPECT_EQ(fake("a1")->closed_clients, std::vector<std::string>{"plugin allocation stopped"});
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_FALSE(registry.lookup(PluginKind::controller, "hp"));
  EXPECT_TRUE(status.fingerprints().empty());
  EXPECT_TRUE(plugins.retiring().empty());
  bool deregistered = false;
  for (const auto& e : status.pending_events().events)
    deregistered = deregistered || e.message().find("plugin deregistered") != std::string::npos;
  EXPECT_TRUE(deregistered);
}

TEST_F(AllocationPluginsTest, WhileVolumesNeedItTheStoppedInstanceIsDeregisteredButListedUnhealthyWithTheCountUntilTheLastRelease) {
  SocketFile sock(socket("a1"));
  ASSERT_TRUE(supervise("a1"));
  waiting = 2;
  stop("a1");
  // No call goes to a stopped plugin's socket: the registry names nothing; the node's
  // fingerprint still shows the plugin, and why it is gone, for the volumes that wait.
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_FALSE(registry.lookup(PluginKind::controller, "hp"));
  auto fp = fingerprint_of("a1");
  ASSERT_TRUE(fp);
  EXPECT_FALSE(fp->healthy());
  EXPECT_EQ(fp->health_description(), "plugin allocation stopped; 2 volumes waiting");
  EXPECT_EQ(fp->node_info().csi_node_id(), "csi-node-1");  // what it was is still known
  ASSERT_EQ(status.fingerprints().size(), 1u);
  EXPECT_FALSE(status.fingerprints()[0].healthy());
  EXPECT_FALSE(manager.find("hp").has_value());  // the unmounts wait
  EXPECT_EQ(plugins.retiring(), std::vector<std::string>{"a1"});

  waiting = 1;
  plugins.reevaluate();
  EXPECT_EQ(fingerprint_of("a1")->health_description(), "plugin allocation stopped; 1 volume waiting");
  waiting = 0;
  plugins.wake();
  run_for(io, 50ms);
  EXPECT_FALSE(fingerprint_of("a1"));
  EXPECT_TRUE(status.fingerprints().empty());
  EXPECT_TRUE(plugins.retiring().empty());
}

// Out of the registry the moment the allocation says its task stopped, before the final
// fingerprint is awaited: nothing is sent to the dead socket meanwhile.
TEST_F(AllocationPluginsTest, TheStoppedInstanceLeavesTheRegistryBeforeAnythingIsAwaited) {
  SocketFile sock(socket("a1"));
  ASSERT_TRUE(supervise("a1"));
  waiting = 1;
  plugins.stopped("a1");  // no io run yet
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_FALSE(registry.lookup(PluginKind::controller, "hp"));
  EXPECT_FALSE(manager.find("hp").has_value());
  run_for(io, 100ms);
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_EQ(plugins.retiring(), std::vector<std::string>{"a1"});
}

// Issue 40: an allocation ran the plugin id a configured plugin serves; its instance replaced
// the configured one. When it stops, the configured plugin (still running and healthy) serves
// again at once — whether or not volumes are mounted — instead of a dead instance staying
// registered while the node reports the plugin healthy.
TEST_F(AllocationPluginsTest, AConfiguredPluginThatAnAllocationsInstanceReplacedServesAgainWhenItStops) {
  configured_serves_again_after_the_allocation_stops(0);
}

TEST_F(AllocationPluginsTest, AConfiguredPluginServesAgainWhenTheAllocationStopsWhileVolumesAreMounted) {
  configured_serves_again_after_the_allocation_stops(3);
}

// Seed 000: the unmounts waiting on a stopped plugin allocation are woken the moment a new
// allocation's instance of the plugin is healthy, and the stale instance then goes.
TEST_F(AllocationPluginsTest, ANewAllocationsInstanceBecomingHealthyWakesTheWaitingUnmountsAndReplacesTheStaleOne) {
  SocketFile sock1(socket("a1"));
  ASSERT_TRUE(supervise("a1"));
  waiting = 1;
  stop("a1");
  ASSERT_FALSE(manager.find("hp").has_value());
  const auto woken_before = manager.healthy_again("hp").generation();

  SocketFile sock2(socket("a2"));
  ASSERT_TRUE(supervise("a2"));
  EXPECT_GT(manager.healthy_again("hp").generation(), woken_before);
  ASSERT_TRUE(manager.find("hp").has_value());
  EXPECT_EQ(registry.lookup(PluginKind::node, "hp")->reg.alloc_id, "a2");
  run_for(io, 50ms);
  EXPECT_TRUE(plugins.retiring().empty());
  EXPECT_FALSE(fingerprint_of("a1"));
  const auto reported = status.fingerprints();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].alloc_id(), "a2");
  EXPECT_TRUE(reported[0].healthy());
}

// An upgrade step: two allocations run the plugin on one node. The newer serves; stopping the
// older (volumes mounted or not) neither deregisters nor marks unhealthy the newer.
TEST_F(AllocationPluginsTest, TwoInstancesTheNewerServesAndStoppingTheOlderLeavesItAlone) {
  SocketFile sock1(socket("old"));
  SocketFile sock2(socket("new"));
  ASSERT_TRUE(supervise("old"));
  // No moment where the registry already serves the new instance while it is not known healthy:
  // calls would find no plugin (the upgrade's "unavailable" time must be 0).
  bool gap = false;
  fake("new")->on_call = [&](const std::string&) {
    const auto inst = registry.lookup(PluginKind::node, "hp");
    gap = gap || (inst && inst->reg.alloc_id == "new" && !manager.find("hp"));
  };
  ASSERT_TRUE(supervise("new"));
  EXPECT_FALSE(gap);
  EXPECT_EQ(registry.lookup(PluginKind::node, "hp")->reg.socket_path, socket("new"));
  ASSERT_EQ(status.fingerprints().size(), 1u);  // one per plugin id and type, as the control plane expects
  EXPECT_EQ(status.fingerprints()[0].alloc_id(), "new");

  waiting = 3;
  stop("old");
  const auto inst = registry.lookup(PluginKind::node, "hp");
  ASSERT_TRUE(inst);
  EXPECT_EQ(inst->reg.alloc_id, "new");
  EXPECT_TRUE(manager.find("hp").has_value());
  EXPECT_FALSE(fingerprint_of("old"));
  ASSERT_EQ(status.fingerprints().size(), 1u);
  EXPECT_EQ(status.fingerprints()[0].alloc_id(), "new");
  EXPECT_TRUE(status.fingerprints()[0].healthy());
  EXPECT_TRUE(plugins.retiring().empty());
  EXPECT_TRUE(fake("new")->closed_clients.empty());
}

// An upgrade's new copy that ends after it took the registry, while the old copy still runs
// healthy: the old instance is registered again and serves, whether or not volumes wait.
TEST_F(AllocationPluginsTest, WhenTheNewInstanceEndsMidUpgradeTheOlderHealthyInstanceServesAgain) {
  SocketFile sock1(socket("old"));
  SocketFile sock2(socket("new"));
  ASSERT_TRUE(supervise("old"));
  ASSERT_TRUE(supervise("new"));
  ASSERT_EQ(registry.lookup(PluginKind::node, "hp")->reg.alloc_id, "new");
  waiting = 2;
  stop("new");
  const auto inst = registry.lookup(PluginKind::node, "hp");
  ASSERT_TRUE(inst);
  EXPECT_EQ(inst->reg.alloc_id, "old");
  EXPECT_EQ(registry.lookup(PluginKind::controller, "hp")->reg.alloc_id, "old");
  const auto found = manager.find("hp");
  ASSERT_TRUE(found.has_value()) << "the node's calls find the old instance";
  EXPECT_FALSE(fingerprint_of("new"));
  ASSERT_EQ(status.fingerprints().size(), 1u);
  EXPECT_EQ(status.fingerprints()[0].alloc_id(), "old");
  EXPECT_TRUE(status.fingerprints()[0].healthy());
  EXPECT_TRUE(plugins.retiring().empty());

  // The old one stopping later is the last instance: deregistered, listed for the waiting volumes.
  stop("old");
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_EQ(plugins.retiring(), std::vector<std::string>{"old"});
  EXPECT_EQ(fingerprint_of("old")->health_description(), "plugin allocation stopped; 2 volumes waiting");
}

// An agent restart in the middle of an upgrade step re-adopts both copies in any order: the newer
// allocation's instance serves, also when the older one registers after it.
TEST_F(AllocationPluginsTest, AfterARestartMidUpgradeTheNewerAllocationsInstanceServesWhateverTheOrder) {
  SocketFile sock1(socket("old"));
  SocketFile sock2(socket("new"));
  ASSERT_TRUE(supervise("new", 2s, 20));
  ASSERT_TRUE(supervise("old", 2s, 10));  // re-adopted last
  auto inst = registry.lookup(PluginKind::node, "hp");
  ASSERT_TRUE(inst);
  EXPECT_EQ(inst->reg.alloc_id, "new");
  EXPECT_EQ(registry.lookup(PluginKind::controller, "hp")->reg.alloc_id, "new");
  ASSERT_TRUE(manager.find("hp").has_value());
  ASSERT_EQ(status.fingerprints().size(), 1u);
  EXPECT_EQ(status.fingerprints()[0].alloc_id(), "new");
  // Stopping the old one then leaves the new one alone.
  stop("old");
  EXPECT_EQ(registry.lookup(PluginKind::node, "hp")->reg.alloc_id, "new");
  EXPECT_TRUE(plugins.retiring().empty());
}

// After an agent restart: the persisted instance of an allocation that stopped meanwhile is
// deregistered, and its fingerprint listed while volumes need it.
TEST_F(AllocationPluginsTest, AfterARestartTheInstanceOfAStoppedAllocationIsRetiredByTheSameRules) {
  auto gen = registry.register_plugin({PluginKind::controller, PluginKind::node},
                                      PluginRegistration{"hp", socket("gone"), "hostpath.mooring.io", "1", false, "gone"});
  waiting = 1;
  plugins.retire_orphan(*registry.lookup(PluginKind::node, "hp"));
  plugins.retire_orphan(*registry.lookup(PluginKind::controller, "hp"));
  plugins.reevaluate();
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
  EXPECT_FALSE(registry.lookup(PluginKind::controller, "hp"));
  auto fp = status.fingerprint("hp", v1::PLUGIN_TYPE_NODE, "gone");
  ASSERT_TRUE(fp);
  EXPECT_EQ(fp->type(), v1::PLUGIN_TYPE_MONOLITH);
  EXPECT_EQ(fp->health_description(), "plugin allocation stopped; 1 volume waiting");
  waiting = 0;
  plugins.reevaluate();
  EXPECT_FALSE(status.fingerprint("hp", v1::PLUGIN_TYPE_NODE, "gone"));
  EXPECT_TRUE(plugins.retiring().empty());
  EXPECT_NE(gen, 0u);

  // A restored allocation whose plugin task ended while the agent was down is never supervised
  // in this run; its Postrun still retires what the registry holds of it.
  registry.register_plugin({PluginKind::node}, PluginRegistration{"hp", socket("ended"), "hp", "1", false, "ended"});
  waiting = 0;
  plugins.stopped("ended");
  run_for(io, 50ms);
  EXPECT_FALSE(registry.lookup(PluginKind::node, "hp"));
}

}  // namespace
}  // namespace mooring::nodeagent
