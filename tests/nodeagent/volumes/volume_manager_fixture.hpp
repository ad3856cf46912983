// The volume manager's unit-test fixture: a manager on a temp dir with a fake node plugin
// ("fake", stages) and a fake mount table kept in step with it.
#pragma once

#include "services/nodeagent/volumes/volume_manager.hpp"

#include "tests/nodeagent/volumes/fake_node_plugin.hpp"
#include "tests/nodeagent/volumes/volume_test_util.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace mooring::nodeagent {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using csi::Rpc;
using domain::AccessMode;
using domain::AttachmentMode;

inline constexpr std::string_view kUsage = "rw-file-system-single-node-writer";

inline domain::VolumeMount volume(const std::string& id, const std::string& external = "") {
  domain::VolumeMount v;
  v.volume_id = id;
  v.external_id = external.empty() ? "ext-" + id : external;
  v.plugin_id = "fake";
  v.secrets = {{"token", "s3cret"}};
  v.volume_context = {{"path", "/data/" + id}};
  v.publish_context = {{"device", "/dev/fake"}};
  v.mount_options = {"ext4", {"noatime"}};
  v.access_mode = AccessMode::single_node_writer;
  v.attachment_mode = AttachmentMode::file_system;
  return v;
}

class VolumeManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins.set_healthy("fake", NodePlugin{csi, true});
    manager = make_manager();
  }
  void TearDown() override {
    if (manager) {
      EXPECT_TRUE(run(manager->shutdown(2s)));
    }
  }

  VolumeManagerOptions options() const {
    VolumeManagerOptions o;
    o.mount_root = dir / "mnt";
    o.state_dir = dir / "state";
    o.unmount_backoff = {.initial = 10ms, .max = 50ms};
    o.notify_backoff = {.initial = 10ms, .max = 50ms};
    return o;
  }

  std::unique_ptr<VolumeManager> make_manager(std::optional<VolumeManagerOptions> opts = std::nullopt) {
    auto m = std::make_unique<VolumeManager>(
        io.get_executor(), plugins, table,
        [this](const std::string& volume_id, const std::string& alloc_id) -> asio::awaitable<domain::Status> {
          if (notify_failures > 0) {
            --notify_failures;
            co_return domain::error("control plane unreachable");
          }
          notified.emplace_back(volume_id, alloc_id);
          co_return domain::Status{};
        },
        opts ? *opts : options());
    EXPECT_TRUE(m->load().ok());
    return m;
  }

  template <class T>
  T run(asio::awaitable<T> op) {
    return run_awaitable(io, std::move(op));
  }
  MountResult mount(const std::string& alloc, const domain::VolumeMount& v, domain::MountOptions request = {}) {
    return run(manager->mount(alloc, v, std::move(request)));
  }
  std::string target(const std::string& alloc, const std::string& vol) const {
    return (dir / "mnt" / "per-alloc" / alloc / vol / std::string(kUsage)).string();
  }
  std::string staging(const std::string& vol) const {
    return (dir / "mnt" / "staging" / vol / std::string(kUsage)).string();
  }
  bool released(const std::string& alloc, const std::string& vol) const {
    for (const auto& r : manager->records()) {
      if (r.alloc_id == alloc && r.volume_id == vol) return false;
    }
    return std::find(notified.begin(), notified.end(), std::make_pair(vol, alloc)) != notified.end();
  }

  asio::io_context io;
  test::TempDir dir{"vol-mgr"};
  FakeMountTable table;
  std::shared_ptr<FakeNodeCsi> csi = std::make_shared<FakeNodeCsi>(io.get_executor(), table);
  FakeNodePlugins plugins{io.get_executor()};
  std::vector<std::pair<std::string, std::string>> notified;  // (volume, alloc)
  int notify_failures = 0;
  std::unique_ptr<VolumeManager> manager;
};

}  // namespace mooring::nodeagent
