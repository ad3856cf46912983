// Domain <-> mooring.v1 / csi.v1 conversions: round trips and rejection of unknown enums.
#include "shared/wire/proto_convert.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::mooring::v1;

TEST(ProtoConvert, EveryEnumValueRoundTrips) {
  for (auto m : {AccessMode::unknown, AccessMode::single_node_reader_only, AccessMode::single_node_writer,
                 AccessMode::multi_node_reader_only, AccessMode::multi_node_single_writer,
                 AccessMode::multi_node_multi_writer}) {
    EXPECT_EQ(from_proto(to_proto(m)), m);
    if (m != AccessMode::unknown) {
      EXPECT_EQ(from_csi(to_csi(m)), m);
    }
  }
  for (auto m : {AttachmentMode::unknown, AttachmentMode::file_system, AttachmentMode::block_device}) {
    EXPECT_EQ(from_proto(to_proto(m)), m);
  }
  for (auto m : {ClaimMode::read, ClaimMode::write}) EXPECT_EQ(from_proto(to_proto(m)), m);
  for (auto s : {ClaimState::taken, ClaimState::unpublishing, ClaimState::node_detached,
                 ClaimState::controller_detached, ClaimState::ready_to_free}) {
    EXPECT_EQ(from_proto(to_proto(s)), s);
  }
  for (auto s : {DesiredStatus::run, DesiredStatus::stop}) EXPECT_EQ(from_proto(to_proto(s)), s);
  for (auto s : {ClientStatus::pending, ClientStatus::running, ClientStatus::complete, ClientStatus::failed,
                 ClientStatus::lost}) {
    EXPECT_EQ(from_proto(to_proto(s)), s);
  }
  for (auto t : {PluginType::controller, PluginType::node, PluginType::monolith}) {
    EXPECT_EQ(from_proto(to_proto(t)), t);
  }
}

TEST(ProtoConvert, CsiAccessModesMatchTheSpecNumbers) {
  EXPECT_EQ(to_csi(AccessMode::single_node_writer), 1);
  EXPECT_EQ(to_csi(AccessMode::single_node_reader_only), 2);
  EXPECT_EQ(to_csi(AccessMode::multi_node_reader_only), 3);
  EXPECT_EQ(to_csi(AccessMode::multi_node_single_writer), 4);
  EXPECT_EQ(to_csi(AccessMode::multi_node_multi_writer), 5);
  EXPECT_FALSE(from_csi(::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_MULTI_WRITER));
  EXPECT_FALSE(from_csi(::csi::v1::VolumeCapability::AccessMode::UNKNOWN));
}

TEST(ProtoConvert, UnspecifiedAndUnknownWireValuesAreRejected) {
  EXPECT_FALSE(from_proto(v1::CLAIM_MODE_UNSPECIFIED));
  EXPECT_FALSE(from_proto(v1::CLIENT_STATUS_UNSPECIFIED));
  EXPECT_FALSE(from_proto(v1::PLUGIN_TYPE_UNSPECIFIED));
  EXPECT_FALSE(from_proto(static_cast<v1::AccessMode>(42)));
  EXPECT_FALSE(from_proto(static_cast<v1::AttachmentMode>(42)));
}

PluginInstance monolith() {
  PluginInstance i;
  i.plugin_id = "hostpath";
  i.node_id = "n1";
  i.type = PluginType::monolith;
  i.healthy = true;
  i.health_description = "ok";
  i.provider = "hostpath.mooring.io";
  i.version = "1.0";
  i.requires_controller_plugin = true;
  i.requires_topologies = true;
  i.offline_expansion = true;
  i.controller_info = ControllerInfo{.supports_create_delete = true, .supports_attach_detach = true,
                                     .supports_list_volumes = true, .supports_get_capacity = true,
                                     .supports_create_delete_snapshot = true, .supports_list_snapshots = true,
                                     .supports_clone = true, .supports_read_only_attach = true,
                                     .supports_expand = true, .supports_list_volumes_attached_nodes = true,
                                     .supports_condition = true, .supports_get = true,
                                     .supports_group_snapshot = true};
  i.node_info = NodeInfo{.id = "csi-n1", .max_volumes = 4, .accessible_topology = {{"zone", "a"}},
                         .requires_node_stage_volume = true, .supports_stats = true, .supports_expand = true,
                         .supports_condition = true};
  i.update_time = from_unix_ms(1'700'000'000'000);
  i.alloc_id = "plugin-alloc-1";
  return i;
}

TEST(ProtoConvert, FingerprintRoundTrips) {
  const PluginInstance i = monolith();
  auto back = from_proto(to_proto(i), "n1");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, i);
}

TEST(ProtoConvert, FingerprintTypeDecidesWhichHalvesExist) {
  auto fp = to_proto(monolith());
  fp.set_type(v1::PLUGIN_TYPE_NODE);
  auto back = from_proto(fp, "n1");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->controller_info.has_value());
  EXPECT_TRUE(back->node_info.has_value());
  fp.set_type(v1::PLUGIN_TYPE_UNSPECIFIED);
  back = from_proto(fp, "n1");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().find("hostpath"), std::string::npos);
  EXPECT_NE(back.error().find("type"), std::string::npos);
  fp.set_plugin_id("");
  fp.set_type(v1::PLUGIN_TYPE_NODE);
  EXPECT_FALSE(from_proto(fp, "n1").ok());
}

// An agent reports its plugins before it has asked them anything ("starting"): no capabilities
// are known, which is not "none" (the control plane would refuse a create as unsupported).
TEST(ProtoConvert, AFingerprintWithoutItsHalvesIsNotFingerprinted) {
  v1::PluginFingerprint fp;
  fp.set_plugin_id("hostpath");
  fp.set_type(v1::PLUGIN_TYPE_MONOLITH);
  fp.set_health_description("starting");
  auto back = from_proto(fp, "n1");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_FALSE(back->controller_info.has_value());
  EXPECT_FALSE(back->node_info.has_value());
  EXPECT_FALSE(fingerprinted(*back));
  // Asked, and the plugin supports nothing: that is known.
  fp.mutable_controller_info();
  fp.mutable_node_info();
  back = from_proto(fp, "n1");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->controller_info, ControllerInfo{});
  EXPECT_TRUE(fingerprinted(*back));
}

Allocation allocation() {
  Allocation a;
  a.id = "a1";
  a.name = "web";
  a.node_id = "n1";
  a.desired_status = DesiredStatus::stop;
  a.client_status = ClientStatus::running;
  VolumeRequest r;
  r.name = "data";
  r.source = "vol";
  r.read_only = true;
  r.access_mode = AccessMode::multi_node_reader_only;
  r.attachment_mode = AttachmentMode::block_device;
  r.per_alloc = true;
  r.mount_options = {"ext4", {"noatime"}};
  a.volumes["data"] = r;
  a.task = Task{"/bin/true", {"x"}, {{"K", "V"}}, 3s};
  a.stop_after_client_disconnect = 30s;
  a.index = 3;
  a.create_index = 5;
  a.modify_index = 6;
  return a;
}

TEST(ProtoConvert, AllocationRoundTripsWithoutEvents) {
  const Allocation a = allocation();
  auto back = from_proto(to_proto(a));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, a);
  Allocation plugin = a;
  plugin.system_id = "group-1";
  plugin.task->csi_plugin = TaskCSIPlugin{.id = "hostpath", .type = PluginType::node, .mount_dir = "sock",
                                          .health_timeout = 5s, .stage_publish_base_dir = "/local/csi"};
  back = from_proto(to_proto(plugin));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, plugin);
  Allocation no_task = a;
  no_task.task.reset();
  back = from_proto(to_proto(no_task));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->task.has_value());
}

TEST(ProtoConvert, AllocationWithBadVolumeRequestNamesIt) {
  auto msg = to_proto(allocation());
  msg.mutable_volumes(0)->set_access_mode(static_cast<v1::AccessMode>(99));
  auto back = from_proto(msg);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().find("allocation \"a1\""), std::string::npos) << back.error();
  EXPECT_NE(back.error().find("volume request \"data\""), std::string::npos) << back.error();
  msg = to_proto(allocation());
  *msg.add_volumes() = msg.volumes(0);
  EXPECT_FALSE(from_proto(msg).ok());  // duplicate request names
}

TEST(ProtoConvert, EventsAndTaskEventsRoundTrip) {
  const NodeEvent ne{from_unix_ms(5), "plugin", "healthy", {{"plugin_id", "p"}}};
  EXPECT_EQ(from_proto(to_proto(ne)), ne);
  const TaskEvent te{from_unix_ms(6), "Started", "pid 4"};
  EXPECT_EQ(from_proto(to_proto(te)), te);
}

TEST(ProtoConvert, MountInfoCarriesClaimAndVolumeFields) {
  Volume v;
  v.id = "vol-1";
  v.external_id = "ext";
  v.plugin_id = "hostpath";
  v.secrets = {{"k", "s"}};
  v.context = {{"c", "1"}};
  v.mount_options = {"ext4", {"noatime"}};
  Claim c;
  c.access_mode = AccessMode::single_node_writer;
  c.attachment_mode = AttachmentMode::file_system;
  c.publish_context = {{"dev", "/dev/x"}};
  const auto info = mount_info(v, c, true);
  EXPECT_EQ(info.external_id(), "ext");
  EXPECT_EQ(info.secrets().at("k"), "s");
  EXPECT_EQ(info.publish_context().at("dev"), "/dev/x");
  EXPECT_EQ(info.access_mode(), v1::ACCESS_MODE_SINGLE_NODE_WRITER);
  EXPECT_TRUE(info.read_only());
  auto back = from_proto(info);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->volume_context.at("c"), "1");
  EXPECT_EQ(back->mount_options, v.mount_options);
  EXPECT_EQ(from_proto(to_proto(*back)).value(), *back);
}

TEST(ProtoConvert, MountInfoWithoutModesIsRejected) {
  v1::VolumeMountInfo info;
  info.set_volume_id("vol-1");
  info.set_attachment_mode(v1::ATTACHMENT_MODE_FILE_SYSTEM);
  auto m = from_proto(info);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("vol-1"), std::string::npos);
  EXPECT_NE(m.error().find("access_mode"), std::string::npos);
}

TEST(ProtoConvert, NodeInfoNegativeMaxVolumesIsUnlimited) {
  v1::NodeInfo n;
  n.set_csi_node_id("x");
  n.set_max_volumes(-1);
  EXPECT_EQ(from_proto(n).max_volumes, 0);
}

}  // namespace
}  // namespace mooring::domain
