// The plugin manager's answer to "which instance of plugin X serves the controller (or node)
// service here": for a plugin split into a controller and a node instance on one node, each is
// found through its own registration and is healthy or not by its own fingerprint.
#include "services/nodeagent/plugins/plugin_manager.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "csi/v1/csi.pb.h"

#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

::mooring::v1::PluginFingerprint fingerprint(const std::string& id, ::mooring::v1::PluginType type, bool healthy) {
  ::mooring::v1::PluginFingerprint fp;
  fp.set_plugin_id(id);
  fp.set_type(type);
  fp.set_healthy(healthy);
  if (type != ::mooring::v1::PLUGIN_TYPE_CONTROLLER) fp.mutable_node_info()->set_requires_node_stage_volume(true);
  return fp;
}

TEST(PluginManager, ASplitPluginsControllerAndNodeInstancesAreFoundAndHealthyEachOnItsOwn) {
  boost::asio::io_context io;
  PluginRegistry registry;
  NodeStatus status;
  PluginManager plugins(io.get_executor(), registry, status);
  registry.register_plugin({PluginKind::controller}, {"csi", "/run/csi/controller.sock", "csi.example", "1", true});
  registry.register_plugin({PluginKind::node}, {"csi", "/run/csi/node.sock", "csi.example", "1", true});

  status.set_fingerprint(fingerprint("csi", ::mooring::v1::PLUGIN_TYPE_CONTROLLER, true));
  status.set_fingerprint(fingerprint("csi", ::mooring::v1::PLUGIN_TYPE_NODE, false));
  EXPECT_EQ(status.fingerprints().size(), 2u);  // both reported to the control plane
  EXPECT_NE(plugins.healthy_client(PluginKind::controller, "csi"), nullptr);
  EXPECT_EQ(plugins.healthy_client(PluginKind::node, "csi"), nullptr);
  EXPECT_FALSE(plugins.find("csi").has_value());

  status.set_fingerprint(fingerprint("csi", ::mooring::v1::PLUGIN_TYPE_CONTROLLER, false));
  status.set_fingerprint(fingerprint("csi", ::mooring::v1::PLUGIN_TYPE_NODE, true));
  EXPECT_EQ(plugins.healthy_client(PluginKind::controller, "csi"), nullptr);
  const auto node = plugins.find("csi");
  ASSERT_TRUE(node.has_value());
  EXPECT_TRUE(node->requires_stage);  // the node instance's capabilities, not the controller's

  // The two instances use their own sockets (their own channels).
  status.set_fingerprint(fingerprint("csi", ::mooring::v1::PLUGIN_TYPE_CONTROLLER, true));
  EXPECT_NE(plugins.healthy_client(PluginKind::controller, "csi"), plugins.healthy_client(PluginKind::node, "csi"));
}

TEST(PluginManager, AMonolithServesBothServicesWithOneFingerprint) {
  boost::asio::io_context io;
  PluginRegistry registry;
  NodeStatus status;
  PluginManager plugins(io.get_executor(), registry, status);
  registry.register_plugin({PluginKind::controller, PluginKind::node}, {"hp", "/run/hp.sock", "hp", "1", true});
  status.set_fingerprint(fingerprint("hp", ::mooring::v1::PLUGIN_TYPE_MONOLITH, true));
  EXPECT_EQ(plugins.healthy_client(PluginKind::controller, "hp"), plugins.healthy_client(PluginKind::node, "hp"));
  EXPECT_TRUE(plugins.find("hp").has_value());
}

// A rolling upgrade registers the new instance while a node call may already hold the old one's
// client: when the old one answers UNAVAILABLE (gone, or draining), the call is sent once more to
// the instance that serves the plugin now instead of failing. (No plugin listens on either socket
// here: the second answer names the new socket, so the call went there.)
TEST(PluginManager, ANodeCallRefusedByAReplacedInstanceIsSentToItsSuccessor) {
  boost::asio::io_context io;
  PluginRegistry registry;
  NodeStatus status;
  PluginManager plugins(io.get_executor(), registry, status);
  test::TempDir dir("pm-switch");
  const auto old_sock = (dir / "old.sock").string();
  const auto new_sock = (dir / "new.sock").string();
  registry.register_plugin({PluginKind::controller, PluginKind::node}, {"hp", old_sock, "hp", "1", false, "alloc-old"});
  auto fp = fingerprint("hp", ::mooring::v1::PLUGIN_TYPE_MONOLITH, true);
  fp.set_alloc_id("alloc-old");
  status.set_fingerprint(fp);
  const auto held = plugins.find("hp");
  ASSERT_TRUE(held.has_value());

  auto call = [&] {
    std::optional<grpc::Status> out;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          ::csi::v1::NodeUnpublishVolumeRequest req;
          req.set_volume_id("v");
          req.set_target_path("/t");
          out = (co_await held->calls->unpublish(req)).status;
        },
        boost::asio::detached);
    io.restart();
    io.run_for(std::chrono::seconds(20));
    return out;
  };
  auto before = call();
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(before->error_message().find("new.sock"), std::string::npos) << before->error_message();

  registry.register_plugin({PluginKind::controller, PluginKind::node}, {"hp", new_sock, "hp", "2", false, "alloc-new"});
  fp.set_alloc_id("alloc-new");
  status.set_fingerprint(fp);
  auto after = call();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(after->error_message().find("new.sock"), std::string::npos) << after->error_message();
}

}  // namespace
}  // namespace mooring::nodeagent
