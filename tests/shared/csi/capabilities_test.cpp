// Capability parsing: CSI answers -> Mooring fingerprint fields.
#include "shared/csi/capabilities.hpp"

#include <gtest/gtest.h>

namespace mooring::csi {
namespace {

using ::csi::v1::ControllerServiceCapability;
using ::csi::v1::NodeServiceCapability;
using ::csi::v1::PluginCapability;

TEST(Capabilities, PluginInfoSetsProviderAndVersion) {
  ::csi::v1::GetPluginInfoResponse resp;
  resp.set_name("hostpath.mooring.io");
  resp.set_vendor_version("1.2.3");
  ::mooring::v1::PluginFingerprint fp;
  apply_plugin_info(resp, fp);
  EXPECT_EQ(fp.provider(), "hostpath.mooring.io");
  EXPECT_EQ(fp.version(), "1.2.3");
}

TEST(Capabilities, GroupControllerServiceAndItsCreateDeleteGetRpcMeanGroupSnapshots) {
  ::csi::v1::GetPluginCapabilitiesResponse caps;
  caps.add_capabilities()->mutable_service()->set_type(PluginCapability::Service::CONTROLLER_SERVICE);
  EXPECT_FALSE(has_group_controller(caps));
  caps.add_capabilities()->mutable_service()->set_type(PluginCapability::Service::GROUP_CONTROLLER_SERVICE);
  EXPECT_TRUE(has_group_controller(caps));

  ::mooring::v1::ControllerInfo info;
  info.set_supports_group_snapshot(true);
  apply_group_capabilities({}, info);  // a fresh answer without the RPC clears it
  EXPECT_FALSE(info.supports_group_snapshot());
  ::csi::v1::GroupControllerGetCapabilitiesResponse group;
  group.add_capabilities()->mutable_rpc()->set_type(
      ::csi::v1::GroupControllerServiceCapability::RPC::CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
  apply_group_capabilities(group, info);
  EXPECT_TRUE(info.supports_group_snapshot());
}

TEST(Capabilities, PluginCapabilitiesSetControllerTopologyAndExpansion) {
  ::csi::v1::GetPluginCapabilitiesResponse resp;
  resp.add_capabilities()->mutable_service()->set_type(PluginCapability::Service::CONTROLLER_SERVICE);
  resp.add_capabilities()->mutable_service()->set_type(PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  resp.add_capabilities()->mutable_volume_expansion()->set_type(PluginCapability::VolumeExpansion::ONLINE);
  ::mooring::v1::PluginFingerprint fp;
  apply_plugin_capabilities(resp, fp);
  EXPECT_TRUE(fp.requires_controller_plugin());
  EXPECT_TRUE(fp.requires_topologies());
  EXPECT_TRUE(fp.online_expansion());
  EXPECT_FALSE(fp.offline_expansion());
}

TEST(Capabilities, FreshPluginCapabilitiesReplaceOldOnes) {
  ::mooring::v1::PluginFingerprint fp;
  fp.set_requires_controller_plugin(true);
  fp.set_offline_expansion(true);
  apply_plugin_capabilities({}, fp);
  EXPECT_FALSE(fp.requires_controller_plugin());
  EXPECT_FALSE(fp.offline_expansion());
}

TEST(Capabilities, UnknownPluginCapabilityValuesAreIgnored) {
  ::csi::v1::GetPluginCapabilitiesResponse resp;
  resp.add_capabilities()->mutable_service()->set_type(static_cast<PluginCapability::Service::Type>(99));
  resp.add_capabilities()->mutable_service()->set_type(PluginCapability::Service::GROUP_CONTROLLER_SERVICE);
  resp.add_capabilities();  // oneof not set at all
  ::mooring::v1::PluginFingerprint fp;
  apply_plugin_capabilities(resp, fp);
  EXPECT_FALSE(fp.requires_controller_plugin());
  EXPECT_FALSE(fp.requires_topologies());
}

TEST(Capabilities, ControllerCapabilitiesMapToEverySupportsFlag) {
  ::csi::v1::ControllerGetCapabilitiesResponse resp;
  using T = ControllerServiceCapability::RPC;
  for (auto t : {T::CREATE_DELETE_VOLUME, T::PUBLISH_UNPUBLISH_VOLUME, T::LIST_VOLUMES, T::GET_CAPACITY,
                 T::CREATE_DELETE_SNAPSHOT, T::LIST_SNAPSHOTS, T::CLONE_VOLUME, T::PUBLISH_READONLY,
                 T::EXPAND_VOLUME, T::LIST_VOLUMES_PUBLISHED_NODES, T::VOLUME_CONDITION, T::GET_VOLUME}) {
    resp.add_capabilities()->mutable_rpc()->set_type(t);
  }
  auto info = controller_info(resp);
  EXPECT_TRUE(info.supports_create_delete());
  EXPECT_TRUE(info.supports_attach_detach());
  EXPECT_TRUE(info.supports_list_volumes());
  EXPECT_TRUE(info.supports_get_capacity());
  EXPECT_TRUE(info.supports_create_delete_snapshot());
  EXPECT_TRUE(info.supports_list_snapshots());
  EXPECT_TRUE(info.supports_clone());
  EXPECT_TRUE(info.supports_read_only_attach());
  EXPECT_TRUE(info.supports_expand());
  EXPECT_TRUE(info.supports_list_volumes_attached_nodes());
  EXPECT_TRUE(info.supports_condition());
  EXPECT_TRUE(info.supports_get());
}

TEST(Capabilities, ControllerCapabilitiesOnlySetWhatIsAdvertised) {
  ::csi::v1::ControllerGetCapabilitiesResponse resp;
  resp.add_capabilities()->mutable_rpc()->set_type(ControllerServiceCapability::RPC::PUBLISH_UNPUBLISH_VOLUME);
  resp.add_capabilities()->mutable_rpc()->set_type(static_cast<ControllerServiceCapability::RPC::Type>(1234));
  resp.add_capabilities()->mutable_rpc()->set_type(ControllerServiceCapability::RPC::MODIFY_VOLUME);
  auto info = controller_info(resp);
  EXPECT_TRUE(info.supports_attach_detach());
  EXPECT_FALSE(info.supports_create_delete());
  EXPECT_FALSE(info.supports_expand());
}

TEST(Capabilities, NodeCapabilitiesSetStageStatsExpandCondition) {
  ::csi::v1::NodeGetCapabilitiesResponse resp;
  resp.add_capabilities()->mutable_rpc()->set_type(NodeServiceCapability::RPC::STAGE_UNSTAGE_VOLUME);
  resp.add_capabilities()->mutable_rpc()->set_type(NodeServiceCapability::RPC::GET_VOLUME_STATS);
  resp.add_capabilities()->mutable_rpc()->set_type(static_cast<NodeServiceCapability::RPC::Type>(77));
  ::mooring::v1::NodeInfo info;
  info.set_csi_node_id("keep-me");
  apply_node_capabilities(resp, info);
  EXPECT_TRUE(info.requires_node_stage_volume());
  EXPECT_TRUE(info.supports_stats());
  EXPECT_FALSE(info.supports_expand());
  EXPECT_FALSE(info.supports_condition());
  EXPECT_EQ(info.csi_node_id(), "keep-me");
}

TEST(Capabilities, NodeInfoCarriesIdMaxVolumesAndTopology) {
  ::csi::v1::NodeGetInfoResponse resp;
  resp.set_node_id("i-0abc");
  resp.set_max_volumes_per_node(16);
  (*resp.mutable_accessible_topology()->mutable_segments())["zone"] = "eu-1a";
  ::mooring::v1::NodeInfo base;
  base.set_requires_node_stage_volume(true);
  auto info = node_info("ebs", resp, base);
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->csi_node_id(), "i-0abc");
  EXPECT_EQ(info->max_volumes(), 16);
  EXPECT_EQ(info->accessible_topology().at("zone"), "eu-1a");
  EXPECT_TRUE(info->requires_node_stage_volume());
}

TEST(Capabilities, NodeInfoZeroOrNegativeMaxVolumesMeansUnlimited) {
  ::csi::v1::NodeGetInfoResponse resp;
  resp.set_node_id("n1");
  auto info = node_info("p", resp);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->max_volumes(), 0);
  resp.set_max_volumes_per_node(-5);
  info = node_info("p", resp);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->max_volumes(), 0);
}

TEST(Capabilities, NodeInfoWithEmptyNodeIdIsAnErrorNamingThePlugin) {
  ::csi::v1::NodeGetInfoResponse resp;
  resp.set_max_volumes_per_node(3);
  auto info = node_info("my-plugin", resp);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().find("my-plugin"), std::string::npos) << info.error();
  EXPECT_NE(info.error().find("node_id"), std::string::npos) << info.error();
}

TEST(Capabilities, ProbeUnsetReadyMeansReady) {
  ::csi::v1::ProbeResponse resp;
  EXPECT_TRUE(probe_ready(resp));
  resp.mutable_ready()->set_value(false);
  EXPECT_FALSE(probe_ready(resp));
  resp.mutable_ready()->set_value(true);
  EXPECT_TRUE(probe_ready(resp));
}

}  // namespace
}  // namespace mooring::csi
