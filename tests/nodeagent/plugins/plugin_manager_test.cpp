// The plugin manager's answer to "which instance of plugin X serves the controller (or node)
// service here": for a plugin split into a controller and a node instance on one node, each is
// found through its own registration and is healthy or not by its own fingerprint.
#include "services/nodeagent/plugins/plugin_manager.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "services/nodeagent/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"

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

}  // namespace
}  // namespace mooring::nodeagent
