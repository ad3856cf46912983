// Node identity with the real binaries (mutual TLS, ACLs on, the control plane holding the CA key):
// a node:write token can no longer take a live node over (purge 409, enrollment 409, nothing
// changed); a re-enrolled node's old certificate is refused on every call; introduction tokens
// enroll their own node once, before they expire; an agent with a short certificate TTL renews
// its own certificate over mutual TLS and keeps working past the first one's expiry; a forced
// purge by a management token locks the node's agent out until it enrolls again. Root only.
#include <gtest/gtest.h>

#include <thread>

#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/e2e/agent_calls.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using grpc::StatusCode;

class NodeIdentityE2E : public ::testing::Test {
 protected:
  void start(const std::string& node_cert_ttl = "") {
    cluster = std::make_unique<Cluster>(
        ClusterOptions{.mutual_tls = true, .acl = true, .enrollment = true, .node_cert_ttl = node_cert_ttl});
    cluster->start_controlplane();
    auto boot = cluster->request("POST", "/v1/acl/bootstrap");
    ASSERT_EQ(boot.status, 200u) << boot.body;
    mgmt = json::parse(boot.body).value("SecretID", "");
    cluster->use_token(mgmt);
    auto policy = cluster->request("PUT", "/v1/acl/policy/node-admin",
                                   json{{"Name", "node-admin"}, {"Rules", {{"Node", "write"}}}}.dump());
    ASSERT_EQ(policy.status, 200u) << policy.body;
    auto token = cluster->request("PUT", "/v1/acl/token",
                                  json{{"Name", "node-admin"}, {"Type", "client"}, {"Policies", {"node-admin"}}}.dump());
    ASSERT_EQ(token.status, 200u) << token.body;
    node_writer = json::parse(token.body).value("SecretID", "");
    controlplane = "127.0.0.1:" + std::to_string(cluster->grpc_port());
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  HttpResult as(const std::string& token, const std::string& method, const std::string& target,
                const std::string& body = {}) {
    return cluster->request(method, target, body, {{"X-Mooring-Token", token}});
  }

  // A one-time introduction token for `node`, made by the node:write token, in a file.
  std::string intro_file(const std::string& node, const std::string& ttl = "1h") {
    auto r = as(node_writer, "POST", "/v1/node/" + node + "/intro", json{{"TTL", ttl}}.dump());
    EXPECT_EQ(r.status, 200u) << r.body;
    const auto file = cluster->dir() / ("intro-" + node + "-" + std::to_string(++intros));
    test::write_file(file, json::parse(r.body).value("SecretID", "") + "\n");
    return file.string();
  }

  // `mooring tls cert request` for `node`, with an introduction token file (or, when empty, the
  // management token), into the cluster's PKI directory: over the files the fixture starts the
  // node's agent with, as an operator enrolls a node in place. Its exit code; its output in `out`.
  int enroll(const std::string& node, const std::string& token_file, std::string* out = nullptr) {
    const auto log = cluster->dir() / ("enroll-" + node + ".out");
    std::filesystem::remove(log);
    std::vector<std::string> args{"tls", "cert", "request", "-node-id", node, "-dir", cluster->pki().dir().string()};
    if (!token_file.empty()) args.insert(args.end(), {"-intro-token-file", token_file});
    std::map<std::string, std::string> env{{"MOORING_ADDR", "https://127.0.0.1:" + std::to_string(cluster->http_port())},
                                           {"MOORING_CACERT", cluster->pki().server().ca}};
    if (token_file.empty()) env["MOORING_TOKEN"] = mgmt;
    test::ChildProcess cli(test::SpawnOptions{
        .binary = test::binary_path("cli/mooring"), .args = args, .env = env, .inherit_env = false, .output_file = log});
    auto status = cli.wait_for_exit(30s);
    if (out) *out = test::read_file(log);
    return status && status->exited ? status->code : -1;
  }

  // The node's certificate files in the PKI directory (enrolled, or made by the fixture).
  test::TlsPaths files_of(const std::string& node) const {
    const auto paths = tls::pair_paths(cluster->pki().dir(), {tls::Role::agent, node});
    return {cluster->pki().server().ca, paths.cert.string(), paths.key.string()};
  }
  // A copy of them, to call with after they were replaced.
  test::TlsPaths keep_copy(const std::string& node, const std::string& name) const {
    const auto now = files_of(node);
    const test::TlsPaths copy{now.ca, (cluster->dir() / (name + ".pem")).string(),
                              (cluster->dir() / (name + "-key.pem")).string()};
    std::filesystem::copy_file(now.cert, copy.cert);
    std::filesystem::copy_file(now.key, copy.key);
    return copy;
  }

  json identity(const std::string& node) {
    auto r = cluster->request("GET", "/v1/node/" + node + "/identity");
    return r.status == 200 ? json::parse(r.body) : json();
  }

  static tls::CertificateInfo info_of(const std::string& cert_file) {
    auto pem = tls::read_text(cert_file);
    EXPECT_TRUE(pem) << pem.error();
    auto info = pem ? tls::inspect(*pem) : tls::Expected<tls::CertificateInfo>(domain::error("unreadable"));
    EXPECT_TRUE(info) << info.error();
    return info ? *info : tls::CertificateInfo{};
  }

  std::unique_ptr<Cluster> cluster;
  std::string mgmt, node_writer, controlplane;
  int intros = 0;
};

TEST_F(NodeIdentityE2E, ANodeWriteTokenCannotPurgeOrEnrollALiveNodeAndNothingChanges) {
  MOORING_REQUIRE_ROOT();
  start();
  cluster->start_node("node-1");
  const auto before = cluster->get("/v1/node/node-1");
  const auto serial_before = info_of(files_of("node-1").cert).serial;

  // Issue 40's takeover: purge the running node, then enroll its id with a fresh key.
  auto purge = as(node_writer, "DELETE", "/v1/node/node-1");
  EXPECT_EQ(purge.status, 409u) << purge.body;
  EXPECT_NE(purge.body.find("node \\\"node-1\\\" is live"), std::string::npos) << purge.body;
  std::string out;
  EXPECT_NE(enroll("node-1", intro_file("node-1"), &out), 0) << out;
  EXPECT_NE(out.find("is live"), std::string::npos) << out;
  EXPECT_EQ(info_of(files_of("node-1").cert).serial, serial_before) << "nothing written on a refusal";

  // Nothing changed: the node is there, its identity pinned nothing, its own certificate acts.
  const auto after = cluster->get("/v1/node/node-1");
  EXPECT_EQ(after.value("CreateIndex", 0), before.value("CreateIndex", 0));
  EXPECT_EQ(after.value("Status", ""), "ready");
  EXPECT_EQ(identity("node-1")["Certificate"].value("Serial", ""), "");
  EXPECT_EQ(identity("node-1").value("Generation", -1), 0);
  auto own = cluster->pki().agent("node-1");
  EXPECT_TRUE(heartbeat_as(agent_channel(controlplane, &own), "node-1").ok());
}

TEST_F(NodeIdentityE2E, AReEnrolledNodesOldCertificateIsRefusedOnEveryCall) {
  MOORING_REQUIRE_ROOT();
  start();
  cluster->start_node("node-1");
  const auto old_cert = keep_copy("node-1", "old-node-1");
  ASSERT_TRUE(heartbeat_as(agent_channel(controlplane, &old_cert), "node-1").ok());

  // A deliberate re-key by a management token (the one way to enroll a live node), in place.
  std::string out;
  ASSERT_EQ(enroll("node-1", "", &out), 0) << out;
  const auto renewed = info_of(files_of("node-1").cert);
  EXPECT_EQ(identity("node-1")["Certificate"].value("Serial", ""), renewed.serial);

  // The old certificate: refused for Heartbeat and WatchAllocations, naming why.
  auto old_channel = agent_channel(controlplane, &old_cert);
  const auto hb = heartbeat_as(old_channel, "node-1");
  EXPECT_EQ(hb.error_code(), StatusCode::UNAUTHENTICATED) << hb.error_message();
  EXPECT_NE(hb.error_message().find("no longer acts"), std::string::npos) << hb.error_message();
  int allocations = -1;
  EXPECT_EQ(watch_as(old_channel, "node-1", &allocations).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(allocations, 0);
  // The new one acts, and the running agent moves to it by itself: gRPC re-reads the files, and
  // a refused call makes the agent dial anew.
  const auto now_files = files_of("node-1");
  EXPECT_TRUE(heartbeat_as(agent_channel(controlplane, &now_files), "node-1").ok());
  EXPECT_TRUE(Cluster::eventually([&] {
    auto node = cluster->get("/v1/node/node-1");
    return node.value("Status", "") == "ready" && node.value("CertificateKeySHA256", "") == renewed.public_key_sha256;
  }, 30s)) << cluster->get("/v1/node/node-1").dump();
}

TEST_F(NodeIdentityE2E, IntroductionTokensEnrollTheirOwnNodeOnceBeforeTheyExpire) {
  MOORING_REQUIRE_ROOT();
  start();
  const auto token = intro_file("node-3");
  std::string out;
  ASSERT_EQ(enroll("node-3", token, &out), 0) << out;
  cluster->start_node("node-3");  // with the certificate enrollment wrote
  ASSERT_FALSE(cluster->create_volume("vol-3").is_null());
  EXPECT_EQ(cluster->run_task("on-3", "vol-3", "node-3", "echo enrolled > \"$MOORING_VOLUME_DATA/f\""), "complete");

  // Used, another node's, expired: refused naming why, nothing written.
  EXPECT_NE(enroll("node-3", token, &out), 0);
  EXPECT_NE(out.find("was used at"), std::string::npos) << out;
  EXPECT_NE(enroll("node-4", token, &out), 0);
  EXPECT_NE(out.find("was made for node \"node-3\""), std::string::npos) << out;
  const auto short_lived = intro_file("node-4", "1ms");
  std::this_thread::sleep_for(50ms);
  EXPECT_NE(enroll("node-4", short_lived, &out), 0);
  EXPECT_NE(out.find("expired at"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(files_of("node-4").cert));
  // The tokens are events; their secrets are nowhere in the answers.
  auto events = cluster->get("/v1/events?topic=Node&type=NodeIntroductionCreated");
  EXPECT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events.dump().find(test::read_file(token).substr(0, 36)), std::string::npos);
}

TEST_F(NodeIdentityE2E, AnAgentWithAShortTtlRenewsItsOwnCertificateAndKeepsWorking) {
  MOORING_REQUIRE_ROOT();
  start("45s");
  std::string out;
  ASSERT_EQ(enroll("node-3", intro_file("node-3"), &out), 0) << out;
  const auto first = info_of(files_of("node-3").cert);
  const auto first_files = keep_copy("node-3", "first-node-3");
  cluster->start_node("node-3");

  // Past the first certificate's end: the agent renewed (two thirds in) and uses the new one.
  const auto deadline = first.not_after + 5s;
  while (std::chrono::system_clock::now() < deadline) std::this_thread::sleep_for(500ms);
  const auto now_held = info_of(files_of("node-3").cert);
  EXPECT_NE(now_held.serial, first.serial);
  EXPECT_GT(now_held.not_after, first.not_after);
  const auto id = identity("node-3");
  EXPECT_EQ(id["Certificate"].value("Serial", ""), now_held.serial) << id.dump();
  EXPECT_GE(id.value("Generation", 0), 2) << id.dump();
  EXPECT_NE(cluster->node_log("node-3").find("certificate renewed"), std::string::npos);
  EXPECT_EQ(cluster->get("/v1/node/node-3").value("Status", ""), "ready");
  // And it works: a lifecycle on the node, after the first certificate expired.
  ASSERT_FALSE(cluster->create_volume("after-expiry").is_null());
  EXPECT_EQ(cluster->run_task("renewed", "after-expiry", "node-3", "echo ok > \"$MOORING_VOLUME_DATA/f\""), "complete");
  // The first certificate is over: no handshake, no call.
  EXPECT_FALSE(heartbeat_as(agent_channel(controlplane, &first_files), "node-3").ok());
  const auto events = cluster->get("/v1/events?topic=Node&type=NodeCertificateRenewed");
  EXPECT_GE(events.size(), 1u);
}

TEST_F(NodeIdentityE2E, AForcedPurgeByAManagementTokenLocksTheAgentOutUntilItEnrollsAgain) {
  MOORING_REQUIRE_ROOT();
  start();
  cluster->start_node("node-2");
  EXPECT_EQ(as(node_writer, "DELETE", "/v1/node/node-2?force=true").status, 403u);
  auto forced = as(mgmt, "DELETE", "/v1/node/node-2?force=true");
  ASSERT_EQ(forced.status, 200u) << forced.body;

  // Its certificate no longer acts: the running agent cannot register again.
  auto cert = cluster->pki().agent("node-2");
  const auto hb = heartbeat_as(agent_channel(controlplane, &cert), "node-2");
  EXPECT_EQ(hb.error_code(), StatusCode::UNAUTHENTICATED) << hb.error_message();
  EXPECT_NE(hb.error_message().find("purged"), std::string::npos) << hb.error_message();
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(cluster->request("GET", "/v1/node/node-2").status, 404u);

  // Enrolled again in place (the purge opened it to an introduction token), the running agent
  // is back by itself.
  std::string out;
  ASSERT_EQ(enroll("node-2", intro_file("node-2"), &out), 0) << out;
  EXPECT_TRUE(Cluster::eventually([&] {
    auto r = cluster->request("GET", "/v1/node/node-2");
    return r.status == 200 && json::parse(r.body).value("Status", "") == "ready";
  }, 30s)) << cluster->node_log("node-2");
}

}  // namespace
}  // namespace mooring::e2e
