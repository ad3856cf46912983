// Pure rules shared by both services: mount option merge, env var names, usage directory
// names, per-alloc sources, claim counts and plugin aggregation.
#include "shared/domain/allocation.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"
#include "shared/domain/volume_capability.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

TEST(MountOptions, RequestWinsWhenSet) {
  const MountOptions volume{"ext4", {"noatime", "ro"}};
  EXPECT_EQ(merge_mount_options(volume, {}), volume);
  EXPECT_EQ(merge_mount_options(volume, {"xfs", {}}), (MountOptions{"xfs", {"noatime", "ro"}}));
  EXPECT_EQ(merge_mount_options(volume, {"", {"sync"}}), (MountOptions{"ext4", {"sync"}}));
  EXPECT_EQ(merge_mount_options({}, {"xfs", {"sync"}}), (MountOptions{"xfs", {"sync"}}));
}

TEST(EnvVar, UpperCasesAndReplacesOtherCharacters) {
  EXPECT_EQ(volume_env_var("data"), "MOORING_VOLUME_DATA");
  EXPECT_EQ(volume_env_var("my-vol.1"), "MOORING_VOLUME_MY_VOL_1");
  EXPECT_EQ(volume_env_var("Already_Upper9"), "MOORING_VOLUME_ALREADY_UPPER9");
  EXPECT_EQ(volume_env_var("a b/c"), "MOORING_VOLUME_A_B_C");
  EXPECT_EQ(volume_env_var("caf\xc3\xa9"), "MOORING_VOLUME_CAF__");
}

TEST(Usage, MatchesNomadsDirectoryNames) {
  EXPECT_EQ(usage_dir_name(false, AttachmentMode::file_system, AccessMode::single_node_writer),
            "rw-file-system-single-node-writer");
  EXPECT_EQ(usage_dir_name(true, AttachmentMode::block_device, AccessMode::multi_node_reader_only),
            "ro-block-device-multi-node-reader-only");
}

TEST(VolumeRequest, PerAllocClaimsSuffixedSourceAndModeFollowsReadOnly) {
  VolumeRequest r;
  r.source = "data";
  EXPECT_EQ(claimed_volume_id(r, 2), "data");
  r.per_alloc = true;
  EXPECT_EQ(claimed_volume_id(r, 2), "data[2]");
  r.access_mode = AccessMode::single_node_writer;
  EXPECT_EQ(claim_mode(r), ClaimMode::write);
  r.read_only = true;
  EXPECT_EQ(claim_mode(r), ClaimMode::read);
  r.read_only = false;
  r.access_mode = AccessMode::multi_node_reader_only;
  EXPECT_EQ(claim_mode(r), ClaimMode::read);
}

TEST(Allocation, TerminalFollowsClientStatus) {
  Allocation a;
  a.desired_status = DesiredStatus::stop;
  a.client_status = ClientStatus::running;
  EXPECT_FALSE(is_terminal(a));
  a.client_status = ClientStatus::complete;
  EXPECT_TRUE(is_terminal(a));
}

TEST(Volume, CountsOnlyTakenClaimsAndFindsCapabilities) {
  Volume v;
  v.requested_capabilities = {{AccessMode::multi_node_single_writer, AttachmentMode::file_system}};
  v.claims["a1"] = Claim{.allocation_id = "a1", .mode = ClaimMode::write};
  v.claims["a2"] = Claim{.allocation_id = "a2", .mode = ClaimMode::read};
  v.claims["a3"] = Claim{.allocation_id = "a3", .mode = ClaimMode::read};
  v.claims["a4"] = Claim{.allocation_id = "a4", .mode = ClaimMode::write, .state = ClaimState::node_detached};
  EXPECT_EQ(current_writers(v), 1);
  EXPECT_EQ(current_readers(v), 2);
  EXPECT_TRUE(has_capability(v, AccessMode::multi_node_single_writer, AttachmentMode::file_system));
  EXPECT_FALSE(has_capability(v, AccessMode::multi_node_single_writer, AttachmentMode::block_device));
}

PluginInstance instance(std::string node, PluginType type, bool healthy, std::int64_t t) {
  PluginInstance i;
  i.plugin_id = "hostpath";
  i.node_id = std::move(node);
  i.type = type;
  i.healthy = healthy;
  i.provider = "hostpath.mooring.io";
  i.version = "v" + std::to_string(t);
  i.requires_controller_plugin = has_controller(type);
  i.update_time = from_unix_ms(t);
  return i;
}

TEST(Plugin, UpsertPlacesInstancesByTypeAndRecounts) {
  Plugin p;
  upsert_instance(p, instance("n1", PluginType::monolith, true, 1));
  upsert_instance(p, instance("n2", PluginType::node, false, 3));
  upsert_instance(p, instance("n3", PluginType::controller, true, 2));
  EXPECT_EQ(p.id, "hostpath");
  EXPECT_EQ(p.controllers_expected, 2);
  EXPECT_EQ(p.controllers_healthy, 2);
  EXPECT_EQ(p.nodes_expected, 2);
  EXPECT_EQ(p.nodes_healthy, 1);
  EXPECT_TRUE(p.controller_required);
  EXPECT_EQ(p.version, "v3");  // newest instance wins

  // n1 is now node-only: it leaves the controller map.
  upsert_instance(p, instance("n1", PluginType::node, true, 4));
  EXPECT_EQ(p.controllers.count("n1"), 0u);
  EXPECT_EQ(p.controllers_expected, 1);
  EXPECT_EQ(p.nodes_expected, 2);

  EXPECT_TRUE(remove_node(p, "n3"));
  EXPECT_FALSE(remove_node(p, "n3"));
  EXPECT_EQ(p.controllers_expected, 0);
  EXPECT_FALSE(p.controller_required);
}

}  // namespace
}  // namespace mooring::domain
