// The node enrollment rule alone: a CSR asks for the node's identity or nothing; with an
// introduction token, an unknown node, a down node whose certificate has expired, and a purged
// node may enroll; a live node, or one holding a certificate that has not expired, is refused
// naming why; a management token may enroll any node (a deliberate re-key).
#include <gtest/gtest.h>

#include "services/controlplane/nodes/enrollment.hpp"
#include "services/controlplane/nodes/node_identity.hpp"

namespace mooring::controlplane {
namespace {

using namespace std::chrono_literals;

const domain::Time kNow = domain::from_unix_ms(1'700'000'000'000);

domain::Node node(domain::NodeStatus status, domain::Time cert_expires = {}) {
  domain::Node n;
  n.id = "node-1";
  n.status = status;
  n.certificate_expires = cert_expires;
  return n;
}

domain::NodeIdentity pinned(domain::Time expires) {
  domain::NodeIdentity id;
  id.node_id = "node-1";
  pin_enrolled(id, {.serial = "AA", .key_sha256 = "k1", .issued = kNow - 1h, .expires = expires});
  return id;
}

EnrollmentRequest request(bool management = false) {
  return EnrollmentRequest{.node_id = "node-1", .csr = {}, .management = management};
}

void expect_conflict(const Verdict& v, const std::string& why) {
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Refusal::Kind::conflict);
  EXPECT_NE(v->message.find("node \"node-1\""), std::string::npos) << v->message;
  EXPECT_NE(v->message.find(why), std::string::npos) << v->message;
}

TEST(EnrollmentRule, UnknownNodesAndDownOnesWithoutAValidCertificateMayEnroll) {
  EXPECT_FALSE(check_enrollment(nullptr, nullptr, request(), kNow));
  const auto down_expired = node(domain::NodeStatus::down, kNow - 1s);
  EXPECT_FALSE(check_enrollment(&down_expired, nullptr, request(), kNow));
  const auto down_plain = node(domain::NodeStatus::down);  // plaintext: it never showed a certificate
  EXPECT_FALSE(check_enrollment(&down_plain, nullptr, request(), kNow));
  const auto expired = pinned(kNow - 1s);
  EXPECT_FALSE(check_enrollment(nullptr, &expired, request(), kNow));
}

TEST(EnrollmentRule, ALiveNodeIsRefusedWhateverItsKeyUnlessManagementAsks) {
  for (auto status : {domain::NodeStatus::ready, domain::NodeStatus::initializing}) {
    const auto live = node(status);
    expect_conflict(check_enrollment(&live, nullptr, request(), kNow), "is live");
    EXPECT_FALSE(check_enrollment(&live, nullptr, request(/*management=*/true), kNow));
  }
}

TEST(EnrollmentRule, AnUnexpiredCertificateIsRefusedUntilPurgedUnlessManagementAsks) {
  // Down, with the certificate it last called with still valid (made outside enrollment).
  const auto down = node(domain::NodeStatus::down, kNow + 1h);
  expect_conflict(check_enrollment(&down, nullptr, request(), kNow), "holds a certificate valid until");
  expect_conflict(check_enrollment(&down, nullptr, request(), kNow), "purge the node first");
  // The one enrollment pinned, with or without a node record (the GC purged the record).
  const auto identity = pinned(kNow + 1h);
  expect_conflict(check_enrollment(nullptr, &identity, request(), kNow), "holds a certificate valid until");
  EXPECT_FALSE(check_enrollment(&down, &identity, request(true), kNow));
  // An operator's purge revoked it: enrollment is open again.
  auto purged = identity;
  revoke(purged, kNow);
  EXPECT_FALSE(check_enrollment(nullptr, &purged, request(), kNow));
}

TEST(EnrollmentRule, ACsrAskingForMoreThanTheNodesIdentityIsInvalidEvenForManagement) {
  auto with = [](auto fill) {
    auto r = request(true);
    fill(r.csr);
    return check_enrollment(nullptr, nullptr, r, kNow);
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
  // Renewal checks the same names.
  tls::CsrInfo server;
  server.uris = {"spiffe://mooring/server"};
  EXPECT_TRUE(check_csr_names("node-1", server));
}

}  // namespace
}  // namespace mooring::controlplane
