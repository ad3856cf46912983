// The volume manager against the real mooring-hostpath plugin (monolith, its own data dir) with
// real bind mounts, checked in /proc/self/mountinfo: mount and write through the path, release
// while the plugin is stopped or killed, one stuck volume among ten, and a manager "restart" in
// the middle of an unmount. Needs root (mount(2)); skipped otherwise.
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/plugin_manager.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/volumes/mount_record_store.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "tests/nodeagent/volumes/volume_test_util.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

#include "csi/v1/csi.pb.h"

#include <gtest/gtest.h>



#include <fstream>
#include <iostream>

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

class HostpathVolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    status.on_change([this] { plugins.status_changed(); });
    start_plugin();
    connect_plugin();
    manager = make_manager();
  }

  void TearDown() override {
    if (plugin) plugin->resume();  // never leave a stopped plugin behind
    if (manager) {
      EXPECT_TRUE(run(manager->shutdown(5s)));
    }
    manager.reset();
    if (plugin && ::testing::Test::HasFailure()) std::cerr << "--- mooring-hostpath ---\n" << plugin->output();
    if (plugin) {
      plugin->terminate();
      plugin->wait_for_exit(10s);
    }
    dir.unmount_all();
  }

  std::filesystem::path socket() const { return dir / "csi.sock"; }
  std::filesystem::path mount_root() const { return dir / "mnt"; }

  void start_plugin() {
    std::filesystem::remove(socket());  // a killed predecessor leaves its socket file
    std::vector<std::string> args = {"--endpoint",   "unix://" + socket().string(),
                                     "--data-dir",   (dir / "hp").string(),
                                     "--node-id",    "node-1",
                                     "--mode",       "monolith",
                                     "--call-log",   (dir / "calls.log").string(),
                                     "--fault-file", (dir / "faults.json").string()};
    args.insert(args.end(), plugin_args.begin(), plugin_args.end());
    plugin.reset();
    plugin = std::make_unique<test::ChildProcess>(
        test::SpawnOptions{test::binary_path("mooring-hostpath"), args, {}, true, dir / "plugin.out"});
    ASSERT_TRUE(plugin->wait_for_path(socket(), 20s)) << plugin->output();
  }

  // What the agent's supervisor does for a (new) healthy instance.
  void connect_plugin() {
    client = std::make_shared<rpc::CsiClient>(io.get_executor(), socket().string());
    ASSERT_TRUE(run(client->connect(10s)));
    PluginRegistration reg;
    reg.plugin_id = "hostpath";
    reg.socket_path = socket().string();
    registry.register_plugin({PluginKind::node}, reg);
    report_plugin(true);
  }
  // The fingerprint the supervisor reports: the plugin stages.
  void report_plugin(bool healthy) {
    ::mooring::v1::PluginFingerprint fp;
    fp.set_plugin_id("hostpath");
    fp.set_type(::mooring::v1::PLUGIN_TYPE_MONOLITH);
    fp.set_healthy(healthy);
    fp.mutable_node_info()->set_requires_node_stage_volume(true);
    status.set_fingerprint(fp);
  }

  std::unique_ptr<VolumeManager> make_manager(std::optional<async::Backoff> backoff = std::nullopt) {
    VolumeManagerOptions o;
    o.mount_root = mount_root();
    o.state_dir = dir / "state";
    o.unmount_backoff = backoff ? *backoff : async::Backoff{.initial = 50ms, .max = 500ms};
    o.notify_backoff = {.initial = 50ms, .max = 500ms};
    auto m = std::make_unique<VolumeManager>(
        io.get_executor(), plugins, mount_table,
        [this](const std::string& volume_id, const std::string& alloc_id) -> asio::awaitable<domain::Status> {
          notified.emplace_back(volume_id, alloc_id);
          co_return domain::Status{};
        },
        o);
    EXPECT_TRUE(m->load().ok());
    return m;
  }

  template <class T>
  T run(asio::awaitable<T> op) {
    return run_awaitable(io, std::move(op));
  }

  // CreateVolume on the plugin's controller side; the volume as the control plane would send it.
  domain::VolumeMount create_volume(const std::string& id) {
    ::csi::v1::CreateVolumeRequest request;
    request.set_name(id);
    request.mutable_capacity_range()->set_required_bytes(1 << 20);
    auto* cap = request.add_volume_capabilities();
    cap->mutable_mount();
    cap->mutable_access_mode()->set_mode(::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    auto r = run(client->create_volume(request));
    EXPECT_TRUE(r.ok()) << r.status.error_message();
    domain::VolumeMount v;
    v.volume_id = id;
    v.external_id = r.response.volume().volume_id();
    v.plugin_id = "hostpath";
    for (const auto& [k, val] : r.response.volume().volume_context()) v.volume_context[k] = val;
    v.access_mode = domain::AccessMode::single_node_writer;
    v.attachment_mode = domain::AttachmentMode::file_system;
    return v;
  }

  std::string mount(const std::string& alloc, const domain::VolumeMount& v) {
    auto r = run(manager->mount(alloc, v));
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_TRUE(test::is_mounted(r.path)) << r.path;
    return r.path;
  }

  bool released(const std::string& alloc, const std::string& vol) const {
    for (const auto& r : manager->records()) {
      if (r.alloc_id == alloc && r.volume_id == vol) return false;
    }
    return std::find(notified.begin(), notified.end(), std::make_pair(vol, alloc)) != notified.end();
  }
  bool nothing_mounted() const { return test::mounts_under(mount_root()).empty(); }
  // How often the plugin answered `rpc` (its call log).
  int calls_of(const std::string& rpc) const {
    std::ifstream in(dir / "calls.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find("\"rpc\":\"" + rpc + "\"") != std::string::npos;
    return n;
  }
  // Records on disk (a record is kept in two slot files).
  // The records on disk, as a restarted agent would read them now.
  std::size_t record_files() const {
    MountRecordStore disk(dir / "state");
    return disk.load() ? disk.size() : 0;
  }

  test::TempDir dir{"vol-hp"};
  std::vector<std::string> plugin_args;  // extra mooring-hostpath flags for start_plugin()
  asio::io_context io;
  ProcMountTable mount_table;
  PluginRegistry registry;
  NodeStatus status;
  PluginManager plugins{io.get_executor(), registry, status};
  std::unique_ptr<test::ChildProcess> plugin;
  std::shared_ptr<rpc::CsiClient> client;
  std::vector<std::pair<std::string, std::string>> notified;
  std::unique_ptr<VolumeManager> manager;
};

TEST_F(HostpathVolumesTest, FileWrittenThroughThePublishPathLandsInTheVolumeAndReleaseLeavesNoMount) {
  auto vol = create_volume("data");
  const auto path = mount("alloc-1", vol);
  const auto staging = mount_root() / "staging" / "data" / "rw-file-system-single-node-writer";
  EXPECT_TRUE(test::is_mounted(staging));
  EXPECT_EQ(std::filesystem::path(path), mount_root() / "per-alloc" / "alloc-1" / "data" / "rw-file-system-single-node-writer");
  { std::ofstream(std::filesystem::path(path) / "hello.txt") << "written by the task\n"; }
  EXPECT_EQ(test::read_file(std::filesystem::path(vol.volume_context.at("path")) / "hello.txt"), "written by the task\n");

  manager->release("alloc-1", {"data"});
  // The record leaves memory at once; the release task ends once that is on disk too.
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "data") && manager->releases_in_flight() == 0; }, 30s));
  EXPECT_TRUE(nothing_mounted());
  EXPECT_EQ(record_files(), 0u);
  EXPECT_FALSE(std::filesystem::exists(mount_root() / "per-alloc" / "alloc-1"));
  // The data stays in the volume for the next allocation.
  EXPECT_EQ(test::read_file(std::filesystem::path(vol.volume_context.at("path")) / "hello.txt"), "written by the task\n");
  const auto again = mount("alloc-2", vol);
  EXPECT_EQ(test::read_file(std::filesystem::path(again) / "hello.txt"), "written by the task\n");
}

TEST_F(HostpathVolumesTest, ReleaseReturnsAtOnceWhileThePluginIsStoppedAndCompletesAfterCont) {
  auto vol = create_volume("data");
  const auto path = mount("alloc-1", vol);
  ASSERT_TRUE(plugin->stop());
  const auto start = std::chrono::steady_clock::now();
  manager->release("alloc-1", {"data"});
  const auto latency = std::chrono::steady_clock::now() - start;
  std::cout << "release() latency with the plugin SIGSTOPped: "
            << std::chrono::duration_cast<std::chrono::microseconds>(latency).count() << " us\n";
  EXPECT_LT(latency, 100ms);
  pump_for(io, 1s);
  EXPECT_TRUE(test::is_mounted(path));  // the plugin cannot answer while stopped
  EXPECT_FALSE(released("alloc-1", "data"));
  ASSERT_TRUE(plugin->resume());
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "data") && manager->releases_in_flight() == 0; }, 60s));
  EXPECT_TRUE(nothing_mounted());
  EXPECT_EQ(record_files(), 0u);
}

TEST_F(HostpathVolumesTest, TenVolumesWithOneStuckReleaseTheOtherNine) {
  std::vector<std::string> ids;
  std::string stuck_external;
  for (int i = 0; i < 10; ++i) {
    ids.push_back("vol" + std::to_string(i));
    auto v = create_volume(ids.back());
    if (i == 4) stuck_external = v.external_id;
    mount("alloc-1", v);
  }
  test::write_file(dir / "faults.json", R"({"rules":[{"rpc":"NodeUnpublishVolume","volume_id":")" + stuck_external +
                                            R"(","code":13,"message":"disk on fire"}]})");
  manager->release("alloc-1", ids);
  ASSERT_TRUE(pump_until(io, [&] { return notified.size() == 9; }, 60s));
  for (const auto& id : ids) {
    const auto target = mount_root() / "per-alloc" / "alloc-1" / id / "rw-file-system-single-node-writer";
    EXPECT_EQ(test::is_mounted(target), id == "vol4") << id;
  }
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_NE(manager->records()[0].last_error.find("disk on fire"), std::string::npos)
      << manager->records()[0].last_error;

  std::filesystem::remove(dir / "faults.json");  // the operator fixes the plugin
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol4"); }, 60s));
  EXPECT_TRUE(nothing_mounted());
}

TEST_F(HostpathVolumesTest, PluginKilledMidReleaseCompletesWhenTheRestartedPluginIsHealthy) {
  // Retries an hour apart: only the "healthy again" wake can finish this in time.
  manager.reset();
  manager = make_manager(async::Backoff{.initial = std::chrono::hours(1), .max = std::chrono::hours(1), .jitter = 0});
  auto vol = create_volume("data");
  const auto path = mount("alloc-1", vol);
  ASSERT_TRUE(plugin->kill());
  ASSERT_TRUE(plugin->wait_for_exit(10s).has_value());
  report_plugin(false);  // what the supervisor reports
  manager->release("alloc-1", {"data"});
  pump_for(io, 500ms);
  ASSERT_EQ(manager->records().size(), 1u);
  EXPECT_NE(manager->records()[0].last_error.find("not running"), std::string::npos) << manager->records()[0].last_error;
  EXPECT_TRUE(test::is_mounted(path));

  start_plugin();
  const auto woken = std::chrono::steady_clock::now();
  connect_plugin();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "data"); }, 60s));
  std::cout << "released " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - woken).count()
            << " ms after the plugin was healthy again\n";
  EXPECT_TRUE(nothing_mounted());
}

TEST_F(HostpathVolumesTest, ManagerRestartInTheMiddleOfAnUnmountResumesAndNothingLeaks) {
  auto a = create_volume("vol-a");
  auto b = create_volume("vol-b");
  mount("alloc-1", a);
  mount("alloc-1", b);
  mount("alloc-2", b);  // shares vol-b's staging with alloc-1
  ASSERT_TRUE(plugin->stop());
  manager->release("alloc-1", {"vol-a", "vol-b"});
  pump_for(io, 300ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(run(manager->shutdown(5s)));
  const auto took = std::chrono::steady_clock::now() - start;
  std::cout << "shutdown() with unmounts in flight and the plugin stopped: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_LT(took, 3s);
  manager.reset();  // the agent is gone
  EXPECT_EQ(record_files(), 3u);

  ASSERT_TRUE(plugin->resume());
  manager = make_manager();  // the agent restarts on the same data dir
  EXPECT_EQ(manager->mounted_allocations(), std::vector<std::string>{"alloc-2"});
  manager->resume();
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "vol-a") && released("alloc-1", "vol-b"); }, 60s));
  // alloc-2 still uses vol-b: its publish and the shared staging stay.
  const auto restored = manager->restore("alloc-2");
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_TRUE(restored[0].mounted) << restored[0].reason;
  EXPECT_TRUE(test::is_mounted(mount_root() / "staging" / "vol-b" / "rw-file-system-single-node-writer"));
  EXPECT_EQ(test::mounts_under(mount_root()).size(), 2u);

  manager->release("alloc-2", {"vol-b"});
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-2", "vol-b") && manager->releases_in_flight() == 0; }, 60s));
  EXPECT_TRUE(nothing_mounted());
  EXPECT_EQ(record_files(), 0u);
}

TEST_F(HostpathVolumesTest, AVolumeStagedWithoutAMountStaysStagedThroughAnAgentRestart) {
  // The upstream host-path driver's shape: NodeStageVolume mounts nothing at the staging path.
  plugin->terminate();
  ASSERT_TRUE(plugin->wait_for_exit(10s).has_value());
  plugin_args = {"--stage-without-mount"};
  ASSERT_NO_FATAL_FAILURE(start_plugin());
  ASSERT_NO_FATAL_FAILURE(connect_plugin());
  auto vol = create_volume("data");
  const auto path = mount("alloc-1", vol);
  const auto staging = mount_root() / "staging" / "data" / "rw-file-system-single-node-writer";
  EXPECT_FALSE(test::is_mounted(staging));
  { std::ofstream(std::filesystem::path(path) / "hello.txt") << "through an unmounted stage\n"; }
  EXPECT_EQ(test::read_file(std::filesystem::path(vol.volume_context.at("path")) / "hello.txt"),
            "through an unmounted stage\n");

  EXPECT_TRUE(run(manager->shutdown(5s)));
  manager = make_manager();  // the agent restarts
  const auto restored = manager->restore("alloc-1");
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_TRUE(restored[0].mounted) << restored[0].reason;
  // A second allocation on the node shares the stage the plugin reported: no second NodeStage.
  const auto second = mount("alloc-2", vol);
  EXPECT_EQ(test::read_file(std::filesystem::path(second) / "hello.txt"), "through an unmounted stage\n");
  EXPECT_EQ(calls_of("NodeStageVolume"), 1);
  EXPECT_EQ(calls_of("NodePublishVolume"), 2);

  manager->release("alloc-1", {"data"});
  manager->release("alloc-2", {"data"});
  ASSERT_TRUE(pump_until(io, [&] { return released("alloc-1", "data") && released("alloc-2", "data") &&
                                          manager->releases_in_flight() == 0; }, 30s));
  EXPECT_EQ(calls_of("NodeUnstageVolume"), 1);
  EXPECT_TRUE(nothing_mounted());
  EXPECT_EQ(record_files(), 0u);
}

}  // namespace
}  // namespace mooring::nodeagent
