#include "services/nodeagent/plugins/fingerprint.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "tests/nodeagent/support/fake_plugin.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using grpc::Status;
using grpc::StatusCode;

v1::PluginFingerprint run_fingerprint(Fingerprinter& f, PluginClient& p) {
  asio::io_context io;
  auto fut = asio::co_spawn(io, f.fingerprint(p), asio::use_future);
  io.run();
  return fut.get();
}

TEST(Fingerprint, MinimalNodePluginIsHealthyAndNilProbeReadyMeansReady) {
  FakePlugin p;  // no capabilities at all, Probe without `ready`
  Fingerprinter f("hp", PluginRole::node);
  const auto fp = run_fingerprint(f, p);
  EXPECT_TRUE(fp.healthy()) << fp.health_description();
  EXPECT_EQ(fp.plugin_id(), "hp");
  EXPECT_EQ(fp.type(), v1::PLUGIN_TYPE_NODE);
  EXPECT_EQ(fp.provider(), "hostpath.mooring.dev");
  EXPECT_EQ(fp.version(), "1.2.3");
  EXPECT_FALSE(fp.requires_controller_plugin());
  EXPECT_TRUE(fp.has_node_info());
  EXPECT_FALSE(fp.has_controller_info());
  EXPECT_EQ(fp.node_info().csi_node_id(), "csi-node-1");
  EXPECT_EQ(fp.node_info().max_volumes(), 0);  // 0 = unlimited
  EXPECT_GT(fp.update_time_ms(), 0);
  // A node plugin is never asked controller questions.
  EXPECT_EQ(std::count(p.calls.begin(), p.calls.end(), "ControllerGetCapabilities"), 0);
}

TEST(Fingerprint, AGroupControllerPluginReportsGroupSnapshotsAndOthersAreNotAsked) {
  FakePlugin p;
  p.add_plugin_cap(::csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  Fingerprinter plain("hp", PluginRole::controller);
  auto fp = run_fingerprint(plain, p);
  EXPECT_TRUE(fp.healthy()) << fp.health_description();
  EXPECT_FALSE(fp.controller_info().supports_group_snapshot());
  EXPECT_EQ(std::count(p.calls.begin(), p.calls.end(), "GroupControllerGetCapabilities"), 0);

  p.add_plugin_cap(::csi::v1::PluginCapability::Service::GROUP_CONTROLLER_SERVICE);
  p.gcaps.add_capabilities()->mutable_rpc()->set_type(
      ::csi::v1::GroupControllerServiceCapability::RPC::CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
  Fingerprinter group("hp", PluginRole::controller);
  fp = run_fingerprint(group, p);
  EXPECT_TRUE(fp.healthy()) << fp.health_description();
  EXPECT_TRUE(fp.controller_info().supports_group_snapshot());

  p.fail["GroupControllerGetCapabilities"] = Status(StatusCode::UNAVAILABLE, "gone");
  fp = run_fingerprint(group, p);
  EXPECT_FALSE(fp.healthy());
  EXPECT_NE(fp.health_description().find("GroupControllerGetCapabilities"), std::string::npos);
}

TEST(Fingerprint, MonolithReportsControllerAndNodeCapabilitiesAndTopology) {
  FakePlugin p;
  p.add_plugin_cap(::csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  p.add_plugin_cap(::csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  p.add_controller_cap(::csi::v1::ControllerServiceCapability::RPC::PUBLISH_UNPUBLISH_VOLUME);
  p.add_controller_cap(::csi::v1::ControllerServiceCapability::RPC::CREATE_DELETE_VOLUME);
  p.add_node_cap(::csi::v1::NodeServiceCapability::RPC::STAGE_UNSTAGE_VOLUME);
  p.ninfo.set_max_volumes_per_node(16);
  (*p.ninfo.mutable_accessible_topology()->mutable_segments())["zone"] = "a";
  p.probe_resp.mutable_ready()->set_value(true);
  Fingerprinter f("hp", PluginRole::monolith);
  const auto fp = run_fingerprint(f, p);
  EXPECT_TRUE(fp.healthy()) << fp.health_description();
  EXPECT_EQ(fp.type(), v1::PLUGIN_TYPE_MONOLITH);
  EXPECT_TRUE(fp.requires_controller_plugin());
  EXPECT_TRUE(fp.requires_topologies());
  EXPECT_TRUE(fp.controller_info().supports_attach_detach());
  EXPECT_TRUE(fp.controller_info().supports_create_delete());
  EXPECT_FALSE(fp.controller_info().supports_expand());
  EXPECT_TRUE(fp.node_info().requires_node_stage_volume());
  EXPECT_EQ(fp.node_info().max_volumes(), 16);
  EXPECT_EQ(fp.node_info().accessible_topology().at("zone"), "a");
}

TEST(Fingerprint, ControllerPluginIsNotAskedForNodeInfo) {
  FakePlugin p;
  p.ninfo.set_node_id("");  // would be an error for a node plugin
  Fingerprinter f("ctl", PluginRole::controller);
  const auto fp = run_fingerprint(f, p);
  EXPECT_TRUE(fp.healthy()) << fp.health_description();
  EXPECT_TRUE(fp.has_controller_info());
  EXPECT_FALSE(fp.has_node_info());
  EXPECT_EQ(std::count(p.calls.begin(), p.calls.end(), "NodeGetInfo"), 0);
}

TEST(Fingerprint, EmptyCsiNodeIdIsAnErrorNamingThePlugin) {
  FakePlugin p;
  p.ninfo.set_node_id("");
  Fingerprinter f("hp", PluginRole::node);
  const auto fp = run_fingerprint(f, p);
  EXPECT_FALSE(fp.healthy());
  EXPECT_NE(fp.health_description().find("hp"), std::string::npos) << fp.health_description();
  EXPECT_NE(fp.health_description().find("node"), std::string::npos) << fp.health_description();
}

TEST(Fingerprint, FailingCapabilityCallMakesThePluginUnhealthyWithTheReason) {
  for (const std::string call : {"GetPluginCapabilities", "ControllerGetCapabilities", "NodeGetCapabilities",
                                 "NodeGetInfo", "GetPluginInfo", "Probe"}) {
    FakePlugin p;
    p.fail[call] = Status(StatusCode::INTERNAL, "boom in " + call);
    Fingerprinter f("hp", PluginRole::monolith);
    const auto fp = run_fingerprint(f, p);
    EXPECT_FALSE(fp.healthy()) << call;
    EXPECT_NE(fp.health_description().find(call + " failed: INTERNAL: boom in " + call), std::string::npos)
        << fp.health_description();
  }
}

TEST(Fingerprint, ProbeNotReadyIsUnhealthyButCapabilitiesAreStillKnown) {
  FakePlugin p;
  p.probe_resp.mutable_ready()->set_value(false);
  p.add_controller_cap(::csi::v1::ControllerServiceCapability::RPC::PUBLISH_UNPUBLISH_VOLUME);
  Fingerprinter f("hp", PluginRole::monolith);
  const auto fp = run_fingerprint(f, p);
  EXPECT_FALSE(fp.healthy());
  EXPECT_NE(fp.health_description().find("not ready"), std::string::npos);
  EXPECT_TRUE(fp.controller_info().supports_attach_detach());
}

TEST(Fingerprint, AfterAFailureWhatWasLearnedIsKeptAndRecoveryIsHealthyAgain) {
  FakePlugin p;
  Fingerprinter f("hp", PluginRole::node);
  ASSERT_TRUE(run_fingerprint(f, p).healthy());
  p.fail["Probe"] = Status(StatusCode::FAILED_PRECONDITION, "disk gone");
  auto fp = run_fingerprint(f, p);
  EXPECT_FALSE(fp.healthy());
  EXPECT_EQ(fp.provider(), "hostpath.mooring.dev");
  EXPECT_EQ(fp.node_info().csi_node_id(), "csi-node-1");
  p.fail.clear();
  fp = run_fingerprint(f, p);
  EXPECT_TRUE(fp.healthy());
  EXPECT_EQ(f.last().health_description(), "healthy");
}

TEST(Fingerprint, ClosedClientMarksThePluginUnhealthyAfterShutdown) {
  FakePlugin p;
  Fingerprinter f("hp", PluginRole::monolith);
  ASSERT_TRUE(run_fingerprint(f, p).healthy());
  p.close("agent shutting down");
  const auto fp = run_fingerprint(f, p);
  EXPECT_FALSE(fp.healthy());
  EXPECT_NE(fp.health_description().find("agent shutting down"), std::string::npos);
  EXPECT_EQ(fp.provider(), "hostpath.mooring.dev");  // still a correctly populated fingerprint
  EXPECT_EQ(fp.node_info().csi_node_id(), "csi-node-1");
}

TEST(Fingerprint, BeforeTheFirstRunThePluginIsNotHealthy) {
  Fingerprinter f("hp", PluginRole::node);
  EXPECT_FALSE(f.last().healthy());
  EXPECT_EQ(f.mark(false, "starting").health_description(), "starting");
}

}  // namespace
}  // namespace mooring::nodeagent
