// Mutual TLS with the real binaries: the control plane and agents run with certificates from one
// CA, and a claim goes through as without TLS; plaintext and foreign-CA clients are refused on
// both gRPC ports; an agent's certificate acts only for its own node; only the control plane may
// call an agent. Root only (bind mounts).
#include <gtest/gtest.h>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "mooring/v1/nodeagent.grpc.pb.h"
#include "shared/rpc/channel.hpp"
#include "shared/rpc/transport_security.hpp"
#include "tests/e2e/agent_calls.hpp"
#include "tests/e2e/cluster.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

class MutualTls : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>(ClusterOptions{.mutual_tls = true});
    cluster->start_controlplane();
    cluster->start_node("node-1");
    cluster->start_node("node-2");
    controlplane = "127.0.0.1:" + std::to_string(cluster->grpc_port());
    agent = cluster->get("/v1/node/node-1").value("Address", "");
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  static grpc::Status node_detach(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::NodeAgent::NewStub(ch);
    v1::NodeDetachVolumeRequest req;
    req.set_volume_id("no-such-volume");
    v1::NodeDetachVolumeResponse resp;
    return call_with_deadline([&](grpc::ClientContext& ctx) { return stub->NodeDetachVolume(&ctx, req, &resp); });
  }

  std::unique_ptr<Cluster> cluster;
  std::string controlplane;  // the control plane's gRPC address
  std::string agent;         // node-1's agent gRPC address
};

TEST_F(MutualTls, ClaimLifecycleWorksOverMutualTls) {
  EXPECT_NE(cluster->controlplane_log().find("tls=mutual"), std::string::npos);
  EXPECT_NE(cluster->node_log("node-1").find("tls=mutual"), std::string::npos);
  ASSERT_FALSE(cluster->create_volume("shared").is_null());
  auto writer = cluster->run_alloc(
      allocation("writer", "shared", "node-1", "echo over-tls > \"$MOORING_VOLUME_DATA/greeting\"; sleep 600"));
  ASSERT_FALSE(writer.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(writer) == "running"; }));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").size() >= 1; }));
  EXPECT_EQ(cluster->volume("shared")["Claims"][0]["State"], "taken");
  ASSERT_EQ(cluster->stop_alloc(writer).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("shared") == 0; })) << cluster->volume("shared").dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }));
  // The controller side of the release went from the control plane to an agent over mTLS.
  std::size_t controller_unpublishes = 0;
  for (auto n : {"node-1", "node-2"}) controller_unpublishes += cluster->calls(n, "ControllerUnpublishVolume").size();
  EXPECT_EQ(controller_unpublishes, 1u);
}

TEST_F(MutualTls, PlaintextAndForeignCaClientsAreRefusedOnBothPorts) {
  ASSERT_FALSE(agent.empty());
  test::TestPki other(cluster->dir() / "other-pki", "other");
  const auto foreign = other.agent("node-1");
  const auto foreign_server = other.server();
  const tls::Identity node1{tls::Role::agent, "node-1"};

  EXPECT_EQ(heartbeat_as(agent_channel(controlplane, nullptr), "node-1").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(heartbeat_as(agent_channel(controlplane, &foreign), "node-1").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(node_detach(agent_channel(agent, nullptr, node1)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(node_detach(agent_channel(agent, &foreign_server, node1)).error_code(), grpc::StatusCode::UNAVAILABLE);

  // Certificates from the right CA but the wrong role: only the control plane may call an agent.
  auto node2 = cluster->pki().agent("node-2");
  auto cli = cluster->pki().cli();
  EXPECT_EQ(node_detach(agent_channel(agent, &node2, node1)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(node_detach(agent_channel(agent, &cli, node1)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The node's own certificate reaches the control plane (the control test of the refusals).
  auto node1_cert = cluster->pki().agent("node-1");
  EXPECT_TRUE(heartbeat_as(agent_channel(controlplane, &node1_cert), "node-1").ok());
}

TEST_F(MutualTls, AnAgentCertificateActsOnlyForItsOwnNode) {
  ASSERT_FALSE(cluster->create_volume("vol-b").is_null());
  auto on_b = cluster->run_alloc(allocation("on-b", "vol-b", "node-2", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(on_b) == "running"; }));

  auto cert = cluster->pki().agent("node-1");
  auto ch = agent_channel(controlplane, &cert);
  auto stub = v1::ControlPlane::NewStub(ch);
  {
    v1::RegisterNodeRequest req;
    req.set_node_id("node-2");
    req.set_address("127.0.0.1:1");
    v1::RegisterNodeResponse resp;
    EXPECT_EQ(call_with_deadline([&](auto& ctx) { return stub->RegisterNode(&ctx, req, &resp); }).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(heartbeat_as(ch, "node-2").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  {
    v1::WatchAllocationsRequest req;
    req.set_node_id("node-2");
    v1::WatchAllocationsResponse resp;
    EXPECT_EQ(call_with_deadline([&](auto& ctx) { return stub->WatchAllocations(&ctx, req, &resp); }).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(resp.allocations_size(), 0);
  }
  {
    // Its own node id, but node-2's allocation: marking it complete would free its claim.
    v1::UpdateAllocationsRequest req;
    req.set_node_id("node-1");
    auto* u = req.add_updates();
    u->set_alloc_id(on_b);
    u->set_client_status(v1::CLIENT_STATUS_COMPLETE);
    v1::UpdateAllocationsResponse resp;
    EXPECT_EQ(call_with_deadline([&](auto& ctx) { return stub->UpdateAllocations(&ctx, req, &resp); }).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    v1::ClaimVolumeRequest req;
    req.set_volume_id("vol-b");
    req.set_alloc_id(on_b);
    req.set_node_id("node-1");
    req.set_mode(v1::CLAIM_MODE_WRITE);
    v1::ClaimVolumeResponse resp;
    EXPECT_EQ(call_with_deadline([&](auto& ctx) { return stub->ClaimVolume(&ctx, req, &resp); }).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_FALSE(resp.has_volume());
  }
  {
    v1::UnpublishVolumeRequest req;
    req.set_volume_id("vol-b");
    req.set_alloc_id(on_b);
    req.set_node_id("node-2");
    v1::UnpublishVolumeResponse resp;
    EXPECT_EQ(call_with_deadline([&](auto& ctx) { return stub->UnpublishVolume(&ctx, req, &resp); }).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Nothing changed: node-2 keeps its address, its allocation runs, its claim is taken.
  EXPECT_NE(cluster->get("/v1/node/node-2").value("Address", ""), "127.0.0.1:1");
  EXPECT_EQ(cluster->alloc_status(on_b), "running");
  EXPECT_EQ(cluster->volume("vol-b")["Claims"][0]["State"], "taken");
  // The refusals are logged with the certificate's subject.
  const auto log = cluster->controlplane_log();
  EXPECT_NE(log.find("call refused"), std::string::npos);
  EXPECT_NE(log.find("agent.node-1.mooring"), std::string::npos);
}

TEST_F(MutualTls, AnAgentRefusesToStartWithAnotherNodesCertificate) {
  auto cert = cluster->pki().agent("node-1");
  NodeOptions options;
  options.agent_args = {"--tls-cert-file", cert.cert, "--tls-key-file", cert.key};
  cluster->start_node("node-3", options, /*wait_healthy=*/false);
  EXPECT_TRUE(Cluster::eventually([&] { return !cluster->node_running("node-3"); }));
  EXPECT_NE(cluster->node_log("node-3").find("agent of node node-1"), std::string::npos) << cluster->node_log("node-3");
}

TEST_F(MutualTls, NodeStatusShowsTheAgentsCertificateExpiryAndKey) {
  // The control plane reads it from the certificate the agent called with, not from its word.
  auto pem = tls::read_text(cluster->pki().agent("node-1").cert);
  ASSERT_TRUE(pem) << pem.error();
  auto info = tls::inspect(*pem);
  ASSERT_TRUE(info) << info.error();
  const auto expected =
      domain::format_time(std::chrono::time_point_cast<std::chrono::milliseconds>(info->not_after));
  EXPECT_EQ(cluster->get("/v1/node/node-1").value("CertificateExpires", ""), expected);
  EXPECT_EQ(cluster->get("/v1/nodes")[0].value("CertificateExpires", ""), expected);
  // And the certificate's key, which node enrollment holds a live node to.
  EXPECT_EQ(cluster->get("/v1/node/node-1").value("CertificateKeySHA256", ""), info->public_key_sha256);

  // The CLI shows it, with a hint a month ahead (the test certificates last 30 days).
  const auto out_file = cluster->dir() / "node-status.out";
  test::ChildProcess cli(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"),
      .args = {"node", "status", "node-1"},
      .env = {{"MOORING_ADDR", "https://127.0.0.1:" + std::to_string(cluster->http_port())},
              {"MOORING_CACERT", cluster->pki().server().ca}},
      .output_file = out_file});
  auto status = cli.wait_for_exit(30s);
  ASSERT_TRUE(status && status->exited && status->code == 0) << test::read_file(out_file);
  const auto out = test::read_file(out_file);
  EXPECT_NE(out.find("Certificate Expires"), std::string::npos) << out;
  EXPECT_NE(out.find(expected), std::string::npos) << out;
  EXPECT_NE(out.find("renew it"), std::string::npos) << out;
}

}  // namespace
}  // namespace mooring::e2e
