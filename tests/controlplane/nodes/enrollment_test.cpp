// The node enrollment rule alone: a CSR asks for the node's identity or nothing; an unknown or
// down node may enroll any key; a live node only the key it holds, unless a management token
// asks; every refusal names the node.
#include <gtest/gtest.h>

#include "services/controlplane/nodes/enrollment.hpp"

namespace mooring::controlplane {
namespace {

domain::Node node(domain::NodeStatus status, std::string key) {
  domain::Node n;
  n.id = "node-1";
  n.status = status;
  n.certificate_key_sha256 = std::move(key);
  return n;
}

EnrollmentRequest request(std::string key, bool management = false) {
  EnrollmentRequest r{.node_id = "node-1", .csr = {}, .management = management};
  r.csr.public_key_sha256 = std::move(key);
  return r;
}

TEST(EnrollmentRule, UnknownAndDownNodesMayEnrollAnyKey) {
  EXPECT_FALSE(check_enrollment(nullptr, request("k2")));
  const auto down = node(domain::NodeStatus::down, "k1");
  EXPECT_FALSE(check_enrollment(&down, request("k2")));
}

TEST(EnrollmentRule, ALiveNodeOnlyWithItsKeyUnlessManagementAsks) {
  for (auto status : {domain::NodeStatus::ready, domain::NodeStatus::initializing}) {
    const auto live = node(status, "k1");
    EXPECT_FALSE(check_enrollment(&live, request("k1")));
    auto other = check_enrollment(&live, request("k2"));
    ASSERT_TRUE(other);
    EXPECT_EQ(other->kind, Refusal::Kind::conflict);
    EXPECT_NE(other->message.find("node \"node-1\" is live with a certificate for another key"), std::string::npos);
    EXPECT_FALSE(check_enrollment(&live, request("k2", /*management=*/true)));
  }
  const auto unknown_key = node(domain::NodeStatus::ready, "");
  auto refused = check_enrollment(&unknown_key, request("k1"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->kind, Refusal::Kind::conflict);
  EXPECT_FALSE(check_enrollment(&unknown_key, request("k1", true)));
}

TEST(EnrollmentRule, ACsrAskingForMoreThanTheNodesIdentityIsInvalidEvenForManagement) {
  auto with = [](auto fill) {
    auto r = request("k1", true);
    fill(r.csr);
    return check_enrollment(nullptr, r);
  };
  EXPECT_FALSE(with([](tls::CsrInfo& c) { c.uris = {"spiffe://mooring/node/node-1"}; }));
  for (auto bad : {with([](tls::CsrInfo& c) { c.uris = {"spiffe://mooring/server"}; }),
                   with([](tls::CsrInfo& c) { c.uris = {"spiffe://mooring/node/node-1", "spiffe://mooring/cli"}; }),
                   with([](tls::CsrInfo& c) { c.dns_names = {"localhost"}; }),
                   with([](tls::CsrInfo& c) { c.ip_addresses = {"127.0.0.1"}; }),
                   with([](tls::CsrInfo& c) { c.other_names = {"email:a@b"}; })}) {
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->kind, Refusal::Kind::invalid);
    EXPECT_NE(bad->message.find("node \"node-1\""), std::string::npos) << bad->message;
  }
}

}  // namespace
}  // namespace mooring::controlplane
