// mooring-hostpath's CSI contract beyond the happy path: required fields, refusals with the
// right codes and messages, pagination, publication rules, capacity, identity and node info.
#include <gtest/gtest.h>

#include <set>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/mountinfo.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathRules : public PluginTest {
 protected:
  HostpathRules() : PluginTest("hp-rules") {}
};

template <class Fn>
StatusCode code_of(Fn fn) {
  grpc::ClientContext ctx;
  set_deadline(ctx);
  return fn(ctx).error_code();
}

TEST_F(HostpathRules, MissingRequiredFieldsAreInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto& c = plugin_->controller();
  auto& n = plugin_->node();
  const auto cap = mount_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  const std::string id = vol.volume_id();

  struct Case {
    std::string what;
    std::function<grpc::Status(grpc::ClientContext&)> call;
  };
  std::vector<Case> cases;
  auto add = [&](std::string what, auto fn) { cases.push_back({std::move(what), fn}); };
  add("CreateVolume without name", [&](grpc::ClientContext& ctx) {
    csi::v1::CreateVolumeRequest r;
    *r.add_volume_capabilities() = cap;
    csi::v1::CreateVolumeResponse o;
    return c.CreateVolume(&ctx, r, &o);
  });
  add("CreateVolume without capabilities", [&](grpc::ClientContext& ctx) {
    csi::v1::CreateVolumeRequest r;
    r.set_name("x");
    csi::v1::CreateVolumeResponse o;
    return c.CreateVolume(&ctx, r, &o);
  });
  add("DeleteVolume without id", [&](grpc::ClientContext& ctx) {
    csi::v1::DeleteVolumeResponse o;
    return c.DeleteVolume(&ctx, {}, &o);
  });
  add("ControllerPublish without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerPublishVolumeRequest r;
    r.set_node_id("node-a");
    *r.mutable_volume_capability() = cap;
    csi::v1::ControllerPublishVolumeResponse o;
    return c.ControllerPublishVolume(&ctx, r, &o);
  });
  add("ControllerPublish without node id", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerPublishVolumeRequest r;
    r.set_volume_id(id);
    *r.mutable_volume_capability() = cap;
    csi::v1::ControllerPublishVolumeResponse o;
    return c.ControllerPublishVolume(&ctx, r, &o);
  });
  add("ControllerPublish without capability", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerPublishVolumeRequest r;
    r.set_volume_id(id);
    r.set_node_id("node-a");
    csi::v1::ControllerPublishVolumeResponse o;
    return c.ControllerPublishVolume(&ctx, r, &o);
  });
  add("ControllerUnpublish without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerUnpublishVolumeResponse o;
    return c.ControllerUnpublishVolume(&ctx, {}, &o);
  });
  add("ValidateVolumeCapabilities without capabilities", [&](grpc::ClientContext& ctx) {
    csi::v1::ValidateVolumeCapabilitiesRequest r;
    r.set_volume_id(id);
    csi::v1::ValidateVolumeCapabilitiesResponse o;
    return c.ValidateVolumeCapabilities(&ctx, r, &o);
  });
  add("ValidateVolumeCapabilities without id", [&](grpc::ClientContext& ctx) {
    csi::v1::ValidateVolumeCapabilitiesRequest r;
    *r.add_volume_capabilities() = cap;
    csi::v1::ValidateVolumeCapabilitiesResponse o;
    return c.ValidateVolumeCapabilities(&ctx, r, &o);
  });
  add("ControllerExpandVolume without range", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerExpandVolumeRequest r;
    r.set_volume_id(id);
    csi::v1::ControllerExpandVolumeResponse o;
    return c.ControllerExpandVolume(&ctx, r, &o);
  });
  add("ControllerGetVolume without id", [&](grpc::ClientContext& ctx) {
    csi::v1::ControllerGetVolumeResponse o;
    return c.ControllerGetVolume(&ctx, {}, &o);
  });
  add("CreateSnapshot without name", [&](grpc::ClientContext& ctx) {
    csi::v1::CreateSnapshotRequest r;
    r.set_source_volume_id(id);
    csi::v1::CreateSnapshotResponse o;
    return c.CreateSnapshot(&ctx, r, &o);
  });
  add("CreateSnapshot without source", [&](grpc::ClientContext& ctx) {
    csi::v1::CreateSnapshotRequest r;
    r.set_name("s");
    csi::v1::CreateSnapshotResponse o;
    return c.CreateSnapshot(&ctx, r, &o);
  });
  add("DeleteSnapshot without id", [&](grpc::ClientContext& ctx) {
    csi::v1::DeleteSnapshotResponse o;
    return c.DeleteSnapshot(&ctx, {}, &o);
  });
  add("NodeStage without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeStageVolumeRequest r;
    r.set_staging_target_path((dir_ / "s").string());
    *r.mutable_volume_capability() = cap;
    csi::v1::NodeStageVolumeResponse o;
    return n.NodeStageVolume(&ctx, r, &o);
  });
  add("NodeStage without staging path", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeStageVolumeRequest r;
    r.set_volume_id(id);
    *r.mutable_volume_capability() = cap;
    csi::v1::NodeStageVolumeResponse o;
    return n.NodeStageVolume(&ctx, r, &o);
  });
  add("NodeStage without capability", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeStageVolumeRequest r;
    r.set_volume_id(id);
    r.set_staging_target_path((dir_ / "s").string());
    csi::v1::NodeStageVolumeResponse o;
    return n.NodeStageVolume(&ctx, r, &o);
  });
  add("NodePublish without target", [&](grpc::ClientContext& ctx) {
    csi::v1::NodePublishVolumeRequest r;
    r.set_volume_id(id);
    r.set_staging_target_path((dir_ / "s").string());
    *r.mutable_volume_capability() = cap;
    csi::v1::NodePublishVolumeResponse o;
    return n.NodePublishVolume(&ctx, r, &o);
  });
  add("NodePublish without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::NodePublishVolumeRequest r;
    r.set_staging_target_path((dir_ / "s").string());
    r.set_target_path((dir_ / "t").string());
    *r.mutable_volume_capability() = cap;
    csi::v1::NodePublishVolumeResponse o;
    return n.NodePublishVolume(&ctx, r, &o);
  });
  add("NodePublish without capability", [&](grpc::ClientContext& ctx) {
    csi::v1::NodePublishVolumeRequest r;
    r.set_volume_id(id);
    r.set_staging_target_path((dir_ / "s").string());
    r.set_target_path((dir_ / "t").string());
    csi::v1::NodePublishVolumeResponse o;
    return n.NodePublishVolume(&ctx, r, &o);
  });
  add("NodeUnpublish without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeUnpublishVolumeRequest r;
    r.set_target_path((dir_ / "t").string());
    csi::v1::NodeUnpublishVolumeResponse o;
    return n.NodeUnpublishVolume(&ctx, r, &o);
  });
  add("NodeUnpublish without target", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeUnpublishVolumeRequest r;
    r.set_volume_id(id);
    csi::v1::NodeUnpublishVolumeResponse o;
    return n.NodeUnpublishVolume(&ctx, r, &o);
  });
  add("NodeUnstage without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeUnstageVolumeRequest r;
    r.set_staging_target_path((dir_ / "s").string());
    csi::v1::NodeUnstageVolumeResponse o;
    return n.NodeUnstageVolume(&ctx, r, &o);
  });
  add("NodeUnstage without staging path", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeUnstageVolumeRequest r;
    r.set_volume_id(id);
    csi::v1::NodeUnstageVolumeResponse o;
    return n.NodeUnstageVolume(&ctx, r, &o);
  });
  add("NodeGetVolumeStats without path", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeGetVolumeStatsRequest r;
    r.set_volume_id(id);
    csi::v1::NodeGetVolumeStatsResponse o;
    return n.NodeGetVolumeStats(&ctx, r, &o);
  });
  add("NodeExpandVolume without volume id", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeExpandVolumeRequest r;
    r.set_volume_path((dir_ / "t").string());
    csi::v1::NodeExpandVolumeResponse o;
    return n.NodeExpandVolume(&ctx, r, &o);
  });
  add("NodeExpandVolume without path", [&](grpc::ClientContext& ctx) {
    csi::v1::NodeExpandVolumeRequest r;
    r.set_volume_id(id);
    csi::v1::NodeExpandVolumeResponse o;
    return n.NodeExpandVolume(&ctx, r, &o);
  });

  for (const auto& c : cases) {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    const auto st = c.call(ctx);
    EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << c.what << ": " << st.error_message();
    EXPECT_FALSE(st.error_message().empty()) << c.what;
  }
  EXPECT_TRUE(test::mounts_under(dir_.path()).empty());
}

TEST_F(HostpathRules, BlockAccessToAFilesystemVolumeIsNotConfirmedAndSaysWhy) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::VolumeCapability block;
  block.mutable_block();
  block.mutable_access_mode()->set_mode(AM::SINGLE_NODE_WRITER);
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  csi::v1::ValidateVolumeCapabilitiesRequest vreq;
  vreq.set_volume_id(vol.volume_id());
  *vreq.add_volume_capabilities() = block;
  csi::v1::ValidateVolumeCapabilitiesResponse vresp;
  grpc::ClientContext vctx;
  set_deadline(vctx);
  ASSERT_TRUE(plugin_->controller().ValidateVolumeCapabilities(&vctx, vreq, &vresp).ok());
  EXPECT_FALSE(vresp.has_confirmed());
  EXPECT_NE(vresp.message().find("block"), std::string::npos);

  *vreq.mutable_volume_capabilities(0) = mount_capability(AM::MULTI_NODE_MULTI_WRITER);
  grpc::ClientContext vctx2;
  set_deadline(vctx2);
  ASSERT_TRUE(plugin_->controller().ValidateVolumeCapabilities(&vctx2, vreq, &vresp).ok());
  EXPECT_TRUE(vresp.has_confirmed());
}

TEST_F(HostpathRules, SameNameWithIncompatibleSizeIsAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("dup", kMi, &vol).ok());
  const auto st = plugin_->create_volume("dup", 2 * kMi, nullptr);
  EXPECT_EQ(st.error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_NE(st.error_message().find(vol.volume_id()), std::string::npos);
}

TEST_F(HostpathRules, ListVolumesPaginatesWithoutRepeatsAndAbortsOnABadToken) {
  ASSERT_NO_FATAL_FAILURE(start());
  std::set<std::string> created;
  for (int i = 0; i < 5; ++i) {
    csi::v1::Volume v;
    ASSERT_TRUE(plugin_->create_volume("v" + std::to_string(i), kMi, &v).ok());
    created.insert(v.volume_id());
  }
  ASSERT_TRUE(plugin_->controller_publish(*created.begin(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  std::set<std::string> seen;
  std::vector<int> page_sizes;
  std::string token;
  bool saw_published = false;
  do {
    csi::v1::ListVolumesRequest req;
    req.set_max_entries(2);
    req.set_starting_token(token);
    csi::v1::ListVolumesResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->controller().ListVolumes(&ctx, req, &resp).ok());
    page_sizes.push_back(resp.entries_size());
    for (const auto& e : resp.entries()) {
      EXPECT_TRUE(seen.insert(e.volume().volume_id()).second) << "repeated " << e.volume().volume_id();
      if (e.volume().volume_id() == *created.begin()) {
        ASSERT_EQ(e.status().published_node_ids_size(), 1);
        EXPECT_EQ(e.status().published_node_ids(0), "node-a");
        saw_published = true;
      }
    }
    token = resp.next_token();
  } while (!token.empty() && page_sizes.size() < 10);
  EXPECT_EQ(seen, created);
  EXPECT_EQ(page_sizes, (std::vector<int>{2, 2, 1}));
  EXPECT_TRUE(saw_published);

  csi::v1::ListVolumesRequest bad;
  bad.set_starting_token("invalid-token");
  csi::v1::ListVolumesResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().ListVolumes(&ctx, bad, &resp).error_code(), StatusCode::ABORTED);
  bad.set_starting_token("");
  bad.set_max_entries(-1);
  grpc::ClientContext ctx2;
  set_deadline(ctx2);
  EXPECT_EQ(plugin_->controller().ListVolumes(&ctx2, bad, &resp).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathRules, SingleNodeVolumeRefusesASecondNodeNamingTheFirst) {
  ASSERT_NO_FATAL_FAILURE(start({"node-a", "monolith", {"--known-nodes", "node-b,node-c"}}));
  csi::v1::Volume single, multi;
  ASSERT_TRUE(plugin_->create_volume("single", kMi, &single).ok());
  ASSERT_TRUE(plugin_->create_volume("multi", kMi, &multi, AM::MULTI_NODE_MULTI_WRITER).ok());

  ASSERT_TRUE(plugin_->controller_publish(single.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  auto st = plugin_->controller_publish(single.volume_id(), "node-b", AM::SINGLE_NODE_WRITER);
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("node-a"), std::string::npos) << st.error_message();
  // Same node, different readonly flag: incompatible republish.
  EXPECT_EQ(plugin_->controller_publish(single.volume_id(), "node-a", AM::SINGLE_NODE_WRITER, true).error_code(),
            StatusCode::ALREADY_EXISTS);
  // Once released from node-a, node-b may have it.
  ASSERT_TRUE(plugin_->controller_unpublish(single.volume_id(), "node-a").ok());
  EXPECT_TRUE(plugin_->controller_publish(single.volume_id(), "node-b", AM::SINGLE_NODE_WRITER).ok());

  // Multi-node volumes go to several nodes; deleting one that is published is refused.
  EXPECT_TRUE(plugin_->controller_publish(multi.volume_id(), "node-b", AM::MULTI_NODE_MULTI_WRITER).ok());
  EXPECT_TRUE(plugin_->controller_publish(multi.volume_id(), "node-c", AM::MULTI_NODE_MULTI_WRITER).ok());
  st = plugin_->delete_volume(multi.volume_id());
  EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("node-b"), std::string::npos);
  // Unpublish with an empty node id releases every node.
  EXPECT_TRUE(plugin_->controller_unpublish(multi.volume_id(), "").ok());
  EXPECT_TRUE(plugin_->delete_volume(multi.volume_id()).ok());
}

TEST_F(HostpathRules, UnknownNodeAndUnknownVolumeAreNotFound) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  auto st = plugin_->controller_publish(vol.volume_id(), "node-nobody", AM::SINGLE_NODE_WRITER);
  EXPECT_EQ(st.error_code(), StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("node-nobody"), std::string::npos);
  EXPECT_EQ(plugin_->controller_publish("vol-0000000000000000", "node-a", AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::NOT_FOUND);
  EXPECT_EQ(plugin_->stage("vol-0000000000000000", dir_ / "s", AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::NOT_FOUND);
  EXPECT_EQ(code_of([&](grpc::ClientContext& ctx) {
              csi::v1::ControllerGetVolumeRequest r;
              r.set_volume_id("vol-0000000000000000");
              csi::v1::ControllerGetVolumeResponse o;
              return plugin_->controller().ControllerGetVolume(&ctx, r, &o);
            }),
            StatusCode::NOT_FOUND);
  EXPECT_EQ(code_of([&](grpc::ClientContext& ctx) {
              csi::v1::ControllerExpandVolumeRequest r;
              r.set_volume_id("vol-0000000000000000");
              r.mutable_capacity_range()->set_required_bytes(kMi);
              csi::v1::ControllerExpandVolumeResponse o;
              return plugin_->controller().ControllerExpandVolume(&ctx, r, &o);
            }),
            StatusCode::NOT_FOUND);
  // Deleting what does not exist is success.
  EXPECT_TRUE(plugin_->delete_volume("vol-0000000000000000").ok());
}

TEST_F(HostpathRules, NodesRegisteredInTheSharedDataDirAreKnownAndMaxVolumesIsEnforced) {
  ASSERT_NO_FATAL_FAILURE(start({"ctrl", "controller", {}}));
  csi::v1::Volume v1, v2;
  ASSERT_TRUE(plugin_->create_volume("v1", kMi, &v1).ok());
  ASSERT_TRUE(plugin_->create_volume("v2", kMi, &v2).ok());
  EXPECT_EQ(plugin_->controller_publish(v1.volume_id(), "node-x", AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::NOT_FOUND);
  // A node plugin on the same data dir registers node-x (with room for one volume).
  test::TempDir node_dir("hp-nodex");
  test::ChildProcess node_plugin({test::binary_path("mooring-hostpath"),
                                  {"--endpoint", "unix://" + (node_dir / "n.sock").string(), "--data-dir",
                                   plugin_->data_dir().string(), "--mode", "node", "--node-id", "node-x",
                                   "--max-volumes", "1"},
                                  {},
                                  true,
                                  node_dir / "out"});
  ASSERT_TRUE(node_plugin.wait_for_path(node_dir / "n.sock", std::chrono::seconds(30))) << node_plugin.output();
  EXPECT_TRUE(plugin_->controller_publish(v1.volume_id(), "node-x", AM::SINGLE_NODE_WRITER).ok());
  EXPECT_EQ(plugin_->controller_publish(v2.volume_id(), "node-x", AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
  // The controller-only plugin serves no Node service.
  csi::v1::NodeGetInfoResponse info;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->node().NodeGetInfo(&ctx, {}, &info).error_code(), StatusCode::UNIMPLEMENTED);
}

TEST_F(HostpathRules, CapacityFlagBoundsCreateAndGetCapacity) {
  ASSERT_NO_FATAL_FAILURE(start({"node-a", "monolith", {"--capacity", "10Mi", "--max-volume-size", "6Mi"}}));
  auto capacity = [&] {
    csi::v1::GetCapacityResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_TRUE(plugin_->controller().GetCapacity(&ctx, {}, &resp).ok());
    return resp.available_capacity();
  };
  EXPECT_EQ(capacity(), 10 * kMi);
  ASSERT_TRUE(plugin_->create_volume("a", 4 * kMi, nullptr).ok());
  EXPECT_EQ(capacity(), 6 * kMi);
  EXPECT_EQ(plugin_->create_volume("big", 7 * kMi, nullptr).error_code(), StatusCode::OUT_OF_RANGE);
  ASSERT_TRUE(plugin_->create_volume("b", 5 * kMi, nullptr).ok());
  EXPECT_EQ(plugin_->create_volume("c", 2 * kMi, nullptr).error_code(), StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(HostpathRules, IdentityAndNodeInfoDescribeThePlugin) {
  ASSERT_NO_FATAL_FAILURE(
      start({"node-a", "monolith", {"--plugin-name", "test.mooring.io", "--topology", "zone=z1", "--max-volumes", "7"}}));
  csi::v1::GetPluginInfoResponse info;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->identity().GetPluginInfo(&ctx, {}, &info).ok());
  }
  EXPECT_EQ(info.name(), "test.mooring.io");
  EXPECT_FALSE(info.vendor_version().empty());
  csi::v1::GetPluginCapabilitiesResponse caps;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->identity().GetPluginCapabilities(&ctx, {}, &caps).ok());
  }
  std::set<int> services;
  for (const auto& c : caps.capabilities()) {
    if (c.has_service()) services.insert(c.service().type());
  }
  EXPECT_TRUE(services.contains(csi::v1::PluginCapability::Service::CONTROLLER_SERVICE));
  EXPECT_TRUE(services.contains(csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS));
  csi::v1::ProbeResponse probe;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->identity().Probe(&ctx, {}, &probe).ok());
  }
  EXPECT_TRUE(probe.ready().value());
  csi::v1::NodeGetInfoResponse node;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->node().NodeGetInfo(&ctx, {}, &node).ok());
  }
  EXPECT_EQ(node.node_id(), "node-a");
  EXPECT_EQ(node.max_volumes_per_node(), 7);
  EXPECT_EQ(node.accessible_topology().segments().at("zone"), "z1");
  csi::v1::NodeGetCapabilitiesResponse ncaps;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->node().NodeGetCapabilities(&ctx, {}, &ncaps).ok());
  }
  std::set<int> rpcs;
  for (const auto& c : ncaps.capabilities()) rpcs.insert(c.rpc().type());
  using NT = csi::v1::NodeServiceCapability::RPC;
  EXPECT_TRUE(rpcs.contains(NT::STAGE_UNSTAGE_VOLUME));
  EXPECT_TRUE(rpcs.contains(NT::GET_VOLUME_STATS));
  EXPECT_TRUE(rpcs.contains(NT::EXPAND_VOLUME));

  // Volumes created without a topology requirement live in this plugin's zone.
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  ASSERT_EQ(vol.accessible_topology_size(), 1);
  EXPECT_EQ(vol.accessible_topology(0).segments().at("zone"), "z1");
  // A requirement no node can satisfy is RESOURCE_EXHAUSTED.
  csi::v1::CreateVolumeRequest req;
  req.set_name("elsewhere");
  *req.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  (*req.mutable_accessibility_requirements()->add_requisite()->mutable_segments())["zone"] = "z9";
  csi::v1::CreateVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_EQ(plugin_->controller().CreateVolume(&ctx, req, &resp).error_code(), StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace mooring::hostpath
