// Node enrollment over a real socket (POST /v1/node/:id/enroll): the route needs node:write (no
// token 401, a read-only token 403); an unknown or down node gets a certificate for the CSR's key
// naming it, signed by the CA; a live node only for the key its certificate holds (409 naming the
// node otherwise) unless the token is a management one; bad node ids and CSRs are 400 naming the
// reason; without the CA key 501. No refusal changes anything.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/controlplane/support/acl_api_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_csr.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::controlplane {
namespace {

using json = nlohmann::json;
using support::parse;

// Made before the API server, which is given its files.
struct EnrollmentCa {
  test::TempDir dir{"enroll"};
  test::TestPki pki{dir.path()};
  tls::PairPaths files() const { return tls::ca_paths(pki.dir()); }
};

class EnrollmentApiTest : protected EnrollmentCa, public support::AclApiFixture {
 protected:
  EnrollmentApiTest() : AclApiFixture(api::ApiOptions{.acl = true, .enrollment_ca = files()}) {}

  void SetUp() override {
    AclApiFixture::SetUp();
    mgmt = bootstrap();
    enroller = token_with(mgmt, "node-enroll", {{"Node", "write"}});
  }

  static json csr_body(const std::string& csr_pem) { return json{{"CSR", csr_pem}}; }

  HttpResult enroll(const std::string& node, const std::string& csr_pem, const std::string& token) {
    return call("POST", "/v1/node/" + node + "/enroll", csr_body(csr_pem).dump(), token);
  }

  // A node record as the agent service leaves it: live (or down) with its certificate's key hash.
  void put_node(const std::string& id, domain::NodeStatus status, const std::string& key_sha256) {
    domain::Node n;
    n.id = id;
    n.status = status;
    n.certificate_key_sha256 = key_sha256;
    auto index = server.on_io([&] {
      Batch b;
      b.put(n);
      return server.store.commit(std::move(b));
    });
    ASSERT_TRUE(index) << index.error();
    server.settle();
  }

  static std::string key_hash(const tls::CsrPair& csr) { return tls::inspect_csr(csr.csr_pem)->public_key_sha256; }

  tls::CsrPair new_csr(const std::string& node) {
    auto csr = tls::create_csr({tls::Role::agent, node});
    EXPECT_TRUE(csr) << csr.error();
    return *csr;
  }

  // The answer is a certificate for this key and node, from the CA, with the CA.
  void expect_issued(const HttpResult& r, const std::string& node, const tls::CsrPair& csr) {
    ASSERT_EQ(r.status, 200u) << r.body;
    const auto body = parse(r);
    const std::string cert = body.value("Certificate", "");
    EXPECT_EQ(body.value("NodeID", ""), node);
    EXPECT_EQ(body.value("CA", ""), test::TestPki::read(files().cert.string()));
    EXPECT_TRUE(tls::signed_by(cert, body.value("CA", "")));
    EXPECT_TRUE(tls::key_matches(cert, csr.key_pem));
    auto info = tls::inspect(cert);
    ASSERT_TRUE(info) << info.error();
    EXPECT_EQ(info->identity, (tls::Identity{tls::Role::agent, node}));
    EXPECT_EQ(body.value("CertificateKeySHA256", ""), info->public_key_sha256);
    // Nothing secret in the answer: no key, no token.
    EXPECT_EQ(r.body.find("PRIVATE KEY"), std::string::npos);
    EXPECT_EQ(r.body.find(enroller), std::string::npos);
  }

  // The 4xx with its message containing `why`, and nothing written.
  void expect_refused(unsigned status, const HttpResult& r, const std::string& why,
                      const std::pair<std::uint64_t, std::size_t>& before) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(parse(r).value("Error", "").find(why), std::string::npos) << r.body;
    EXPECT_EQ(fingerprint(), before);
  }

  // The enrollment token gets 409 naming the node (and nothing changes); a management token
  // gets the certificate.
  void expect_only_management_may(const std::string& node, const tls::CsrPair& csr, const std::string& why) {
    const auto before = fingerprint();
    expect_refused(409, enroll(node, csr.csr_pem, enroller), why, before);
    expect_issued(enroll(node, csr.csr_pem, mgmt), node, csr);
  }

  std::string mgmt;
  std::string enroller;
};

TEST(EnrollmentRouteTable, EnrollNeedsNodeWrite) {
  int found = 0;
  for (const auto& r : api::Api::route_table()) {
    if (r.pattern != "/v1/node/:id/enroll") continue;
    ++found;
    EXPECT_EQ(r.need.kind, acl::Need::Kind::area) << r.method;
    EXPECT_EQ(r.need.area, acl::Area::node) << r.method;
    EXPECT_EQ(r.need.level, acl::Level::write) << r.method;
  }
  EXPECT_EQ(found, 2);  // POST and PUT
}

TEST_F(EnrollmentApiTest, WithoutATokenIs401AndWithAReadOnlyToken403) {
  const auto reader = token_with(mgmt, "reader", {{"Node", "read"}});
  const auto csr = new_csr("node-9");
  const auto before = fingerprint();
  expect_refused(401, enroll("node-9", csr.csr_pem, ""), "ACL token required", before);
  expect_refused(401, enroll("node-9", csr.csr_pem, "00000000-0000-0000-0000-000000000000"), "not found", before);
  expect_refused(403, enroll("node-9", csr.csr_pem, reader), "lacks node:write", before);
}

TEST_F(EnrollmentApiTest, AnUnknownNodeGetsACertificateForItsOwnKeyAndAnEventSaysSo) {
  const auto csr = new_csr("node-9");
  expect_issued(enroll("node-9", csr.csr_pem, enroller), "node-9", csr);
  // PUT works as well, and a CSR without SANs is fine (the identity comes from the path).
  const auto bare = test::make_csr({});
  auto put = call("PUT", "/v1/node/node-8/enroll", csr_body(bare).dump(), enroller);
  EXPECT_EQ(put.status, 200u) << put.body;
  auto events = call("GET", "/v1/events?topic=Node", "", mgmt);
  ASSERT_EQ(events.status, 200u);
  const auto list = parse(events);
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list[0].value("Type", ""), "NodeCertificateIssued");
  EXPECT_EQ(list[0].value("Key", ""), "node-9");
  EXPECT_EQ(events.body.find("BEGIN CERTIFICATE"), std::string::npos);
}

TEST_F(EnrollmentApiTest, ALiveNodeRenewsOnlyWithItsKeyUnlessAManagementTokenAsks) {
  const auto held = new_csr("node-5");
  put_node("node-5", domain::NodeStatus::ready, key_hash(held));
  // Renewal: the same key, a new CSR.
  auto renewal = tls::create_csr({tls::Role::agent, "node-5"}, held.key_pem);
  ASSERT_TRUE(renewal);
  expect_issued(enroll("node-5", renewal->csr_pem, enroller), "node-5", *renewal);

  // Another key while the node is live: whoever holds an enrollment token cannot take it over;
  // a management token may re-key it on purpose.
  expect_only_management_may("node-5", new_csr("node-5"), "node \"node-5\" is live with a certificate for another key");
}

TEST_F(EnrollmentApiTest, ALiveNodeWhoseKeyIsNotKnownNeedsAManagementToken) {
  // node-1 of the fixture is live and never called over mutual TLS.
  expect_only_management_may("node-1", new_csr("node-1"), "node \"node-1\" is live and its certificate's key is not known");
}

TEST_F(EnrollmentApiTest, ADownNodeMayEnrollWithANewKey) {
  put_node("node-6", domain::NodeStatus::down, key_hash(new_csr("node-6")));
  const auto fresh = new_csr("node-6");
  expect_issued(enroll("node-6", fresh.csr_pem, enroller), "node-6", fresh);
}

TEST_F(EnrollmentApiTest, BadNodeIdsAndCsrsAre400NamingTheReasonAndChangeNothing) {
  const auto good = csr_body(new_csr("node-9").csr_pem).dump();
  const auto with = [](const test::CsrSpec& spec) { return csr_body(test::make_csr(spec)).dump(); };
  using Key = test::CsrSpec::KeyType;
  struct Case {
    std::string node;
    std::string body;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"..", good, "node id"},
      {"a%2Fb", good, "node id"},
      {"node%20x", good, "node"},
      {"node-9", "not json", ""},
      {"node-9", "{}", "field \"CSR\": required"},
      {"node-9", R"({"CSR":7})", "field \"CSR\""},
      {"node-9", csr_body("garbage").dump(), "not a PEM certificate signing request"},
      {"node-9", with({.break_signature = true}), "signature does not verify"},
      {"node-9", with({.key = Key::rsa2048}), "not ECDSA P-256"},
      {"node-9", with({.key = Key::p384}), "not ECDSA P-256"},
      // More names than the node's identity, or another identity.
      {"node-9", with({.dns_names = {"controlplane"}}), "asks for DNS names \"controlplane\""},
      {"node-9", with({.emails = {"a@example.com"}}), "other names"},
      {"node-9", with({.uris = {"spiffe://mooring/server"}}), "asks for \"spiffe://mooring/server\""},
      {"node-9", csr_body(new_csr("node-1").csr_pem).dump(), "spiffe://mooring/node/node-1"},
  };
  const auto before = fingerprint();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.node + " " + c.why);
    expect_refused(400, call("POST", "/v1/node/" + c.node + "/enroll", c.body, enroller), c.why, before);
  }
}

class EnrollmentWithoutCaKeyTest : public support::AclApiFixture {};

TEST_F(EnrollmentWithoutCaKeyTest, AnswersThatEnrollmentIsOff) {
  const auto mgmt = bootstrap();
  const auto before = fingerprint();
  auto r = call("POST", "/v1/node/node-9/enroll", json{{"CSR", tls::create_csr({tls::Role::agent, "node-9"})->csr_pem}}.dump(),
                mgmt);
  EXPECT_EQ(r.status, 501u) << r.body;
  EXPECT_NE(r.body.find("--tls-ca-key-file"), std::string::npos) << r.body;
  EXPECT_EQ(fingerprint(), before);
}

}  // namespace
}  // namespace mooring::controlplane
