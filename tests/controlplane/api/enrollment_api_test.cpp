// Node identity over a real socket. Introduction tokens (POST /v1/node/:id/intro): node:write
// makes them (401 without a token, 403 read-only), the answer carries the SecretID once, the
// state and the event only its hash and accessor, a bad TTL is 400. Enrollment (POST
// /v1/node/:id/enroll): an introduction token for the node enrolls it once (used, expired or
// another node's: 401/403 naming why); an unknown node gets a certificate for the CSR's key
// naming it, signed by the CA, and its identity pins that certificate; a live node, or one with
// an unexpired certificate, is 409 naming why unless a management token asks; bad node ids and
// CSRs are 400 naming the reason; without the CA key 501. Purge: a live node 409 unless forced by
// a management token. No refusal changes anything.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "services/controlplane/acl/secret.hpp"
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
  EnrollmentApiTest() : AclApiFixture(api::ApiOptions{.acl = true, .enrollment_ca = files(), .node_cert_ttl = std::chrono::hours(2)}) {}

  void SetUp() override {
    AclApiFixture::SetUp();
    mgmt = bootstrap();
    operator_token = token_with(mgmt, "node-admin", {{"Node", "write"}});
  }

  // A one-time introduction token for `node` (its SecretID), made by the node:write token.
  std::string intro(const std::string& node, const std::string& ttl = "") {
    auto r = call("POST", "/v1/node/" + node + "/intro", ttl.empty() ? "" : json{{"TTL", ttl}}.dump(), operator_token);
    EXPECT_EQ(r.status, 200u) << r.body;
    return parse(r).value("SecretID", "");
  }

  static std::string body(const std::string& csr_pem, const std::string& intro_token = "") {
    json b{{"CSR", csr_pem}};
    if (!intro_token.empty()) b["IntroToken"] = intro_token;
    return b.dump();
  }

  HttpResult enroll(const std::string& node, const std::string& csr_pem, const std::string& intro_token,
                    const std::string& token = "") {
    return call("POST", "/v1/node/" + node + "/enroll", body(csr_pem, intro_token), token);
  }

  // A node record as the agent service leaves it: live or down, with its certificate's expiry.
  void put_node(const std::string& id, domain::NodeStatus status, domain::Time cert_expires = {}) {
    domain::Node n;
    n.id = id;
    n.status = status;
    n.certificate_expires = cert_expires;
    auto index = server.on_io([&] {
      Batch b;
      b.put(n);
      return server.store.commit(std::move(b));
    });
    ASSERT_TRUE(index) << index.error();
    server.settle();
  }

  json identity(const std::string& node) {
    auto r = call("GET", "/v1/node/" + node + "/identity", "", mgmt);
    return r.status == 200 ? parse(r) : json();
  }

  tls::CsrPair new_csr(const std::string& node) {
    auto csr = tls::create_csr({tls::Role::agent, node});
    EXPECT_TRUE(csr) << csr.error();
    return *csr;
  }

  // The answer is a certificate for this key and node, from the CA, with the CA, lasting the
  // configured TTL; the node's identity pins it.
  void expect_issued(const HttpResult& r, const std::string& node, const tls::CsrPair& csr) {
    ASSERT_EQ(r.status, 200u) << r.body;
    const auto answer = parse(r);
    const std::string cert = answer.value("Certificate", "");
    EXPECT_EQ(answer.value("NodeID", ""), node);
    EXPECT_EQ(answer.value("CA", ""), test::TestPki::read(files().cert.string()));
    EXPECT_TRUE(tls::signed_by(cert, answer.value("CA", "")));
    EXPECT_TRUE(tls::key_matches(cert, csr.key_pem));
    auto info = tls::inspect(cert);
    ASSERT_TRUE(info) << info.error();
    EXPECT_EQ(info->identity, (tls::Identity{tls::Role::agent, node}));
    EXPECT_EQ(answer.value("CertificateKeySHA256", ""), info->public_key_sha256);
    // --node-cert-ttl (the two ends are taken a moment apart, in whole seconds).
    const auto lifetime = info->not_after - tls::issued_at(*info);
    EXPECT_GE(lifetime, std::chrono::hours(2) - std::chrono::seconds(1));
    EXPECT_LE(lifetime, std::chrono::hours(2) + std::chrono::seconds(1));
    EXPECT_EQ(identity(node)["Certificate"].value("Serial", ""), info->serial);
    EXPECT_EQ(answer.value("Serial", ""), info->serial);
    // Nothing secret in the answer: no key, no token.
    EXPECT_EQ(r.body.find("PRIVATE KEY"), std::string::npos);
  }

  // The 4xx with its message containing `why`, and nothing written.
  void expect_refused(unsigned status, const HttpResult& r, const std::string& why,
                      const std::pair<std::uint64_t, std::size_t>& before) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(parse(r).value("Error", "").find(why), std::string::npos) << r.body;
    EXPECT_EQ(fingerprint(), before);
  }

  std::string mgmt;
  std::string operator_token;
};

TEST(EnrollmentRouteTable, IntroNeedsNodeWriteEnrollTakesItsOwnCredentialPurgeForcedNeedsManagement) {
  int intro = 0, enroll = 0, identity = 0;
  for (const auto& r : api::Api::route_table()) {
    if (r.pattern == "/v1/node/:id/intro") {
      ++intro;
      EXPECT_EQ(r.need.kind, acl::Need::Kind::area) << r.method;
      EXPECT_EQ(r.need.area, acl::Area::node) << r.method;
      EXPECT_EQ(r.need.level, acl::Level::write) << r.method;
    }
    if (r.pattern == "/v1/node/:id/enroll") {
      ++enroll;  // an introduction token in the body, or a management token: the endpoint checks
      EXPECT_EQ(r.need.kind, acl::Need::Kind::anyone) << r.method;
    }
    if (r.pattern == "/v1/node/:id/identity") {
      ++identity;
      EXPECT_EQ(r.need.level, acl::Level::read) << r.method;
    }
  }
  EXPECT_EQ(intro, 2);   // POST and PUT
  EXPECT_EQ(enroll, 2);  // POST and PUT
  EXPECT_EQ(identity, 1);
}

TEST_F(EnrollmentApiTest, IntroductionTokensNeedNodeWriteAndKeepOnlyTheirHash) {
  const auto reader = token_with(mgmt, "reader", {{"Node", "read"}});
  const auto before = fingerprint();
  expect_refused(401, call("POST", "/v1/node/node-9/intro", "", ""), "ACL token required", before);
  expect_refused(403, call("POST", "/v1/node/node-9/intro", "", reader), "lacks node:write", before);
  expect_refused(400, call("POST", "/v1/node/node-9/intro", R"({"TTL":"200h"})", operator_token), "at most 168h", before);
  expect_refused(400, call("POST", "/v1/node/node-9/intro", R"({"TTL":"soon"})", operator_token), "field \"TTL\"", before);
  expect_refused(400, call("POST", "/v1/node/node-9/intro", R"({"Node":"x"})", operator_token), "unknown field", before);
  expect_refused(400, call("POST", "/v1/node/..%2Fx/intro", "", operator_token), "node", before);

  auto r = call("POST", "/v1/node/node-9/intro", R"({"TTL":"15m"})", operator_token);
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto made = parse(r);
  const std::string secret = made.value("SecretID", "");
  ASSERT_FALSE(secret.empty());
  EXPECT_EQ(made.value("NodeID", ""), "node-9");
  // The record shows the accessor and expiry, never the secret or its hash; so does the event.
  const auto shown = identity("node-9");
  ASSERT_EQ(shown["Introductions"].size(), 1u) << shown.dump();
  EXPECT_EQ(shown["Introductions"][0].value("AccessorID", ""), made.value("AccessorID", ""));
  EXPECT_EQ(shown["Introductions"][0].value("CreatedBy", ""), "node-admin-token");
  EXPECT_EQ(shown.dump().find(secret), std::string::npos);
  EXPECT_EQ(shown.dump().find(acl::secret_hash(secret)), std::string::npos);
  auto events = call("GET", "/v1/events?topic=Node&type=NodeIntroductionCreated", "", mgmt);
  ASSERT_EQ(events.status, 200u);
  EXPECT_EQ(parse(events).size(), 1u) << events.body;
  EXPECT_EQ(events.body.find(secret), std::string::npos);
  // The stored row holds the hash only.
  const auto stored = server.on_io([this] {
    std::string rows;
    for (const auto& tx : server.backend.transactions)
      for (const auto& m : tx.mutations) rows += m.value.value_or("");
    return rows;
  });
  EXPECT_EQ(stored.find(secret), std::string::npos);
  EXPECT_NE(stored.find(acl::secret_hash(secret)), std::string::npos);
}

TEST_F(EnrollmentApiTest, AnUnknownNodeEnrollsOnceWithItsIntroductionTokenAndAnEventSaysSo) {
  const auto token = intro("node-9");
  const auto csr = new_csr("node-9");
  expect_issued(enroll("node-9", csr.csr_pem, token), "node-9", csr);
  EXPECT_EQ(identity("node-9").value("Generation", 0), 1);
  auto events = call("GET", "/v1/events?topic=Node&type=NodeCertificateIssued", "", mgmt);
  ASSERT_EQ(events.status, 200u);
  const auto list = parse(events);
  ASSERT_EQ(list.size(), 1u) << events.body;
  EXPECT_EQ(list[0].value("Key", ""), "node-9");
  EXPECT_NE(list[0]["Details"].value("by", "").find("introduction token"), std::string::npos) << events.body;
  EXPECT_EQ(events.body.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(events.body.find(token), std::string::npos);

  // Used: the same token again is 401 naming why, and nothing changes.
  const auto before = fingerprint();
  expect_refused(401, enroll("node-9", new_csr("node-9").csr_pem, token), "was used at", before);
}

// A node that was only ever introduced, whose introduction expired, leaves no record behind once
// another enrollment prunes it: the record is erased, not kept empty.
TEST_F(EnrollmentApiTest, ARecordLeftWithOnlyExpiredIntroductionsIsErasedByTheNextEnrollment) {
  const auto token = intro("node-9");
  intro("node-7", "1ms");  // after node-9's: making an introduction prunes the others too
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(server.on_io([&] { return server.store.node_identity("node-7") != nullptr; }));
  const auto csr = new_csr("node-9");
  expect_issued(enroll("node-9", csr.csr_pem, token), "node-9", csr);
  EXPECT_FALSE(server.on_io([&] { return server.store.node_identity("node-7") != nullptr; }));
  EXPECT_FALSE(server.on_io([&] { return server.store.node_identities().contains("node-7"); }));
}

TEST_F(EnrollmentApiTest, MissingExpiredAndOtherNodesIntroductionTokensAreRefusedNamingWhy) {
  const auto for_node_8 = intro("node-8");
  const auto short_lived = intro("node-9", "1ms");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto csr = new_csr("node-9");
  const auto before = fingerprint();
  expect_refused(401, enroll("node-9", csr.csr_pem, ""), "needs an introduction token", before);
  expect_refused(401, enroll("node-9", csr.csr_pem, "00000000-0000-0000-0000-000000000000"), "not found", before);
  expect_refused(401, enroll("node-9", csr.csr_pem, short_lived), "expired at", before);
  expect_refused(403, enroll("node-9", csr.csr_pem, for_node_8), "was made for node \"node-8\", not node \"node-9\"",
                 before);
  // A node:write ACL token is no enrollment credential any more (only management re-keys).
  expect_refused(401, enroll("node-9", csr.csr_pem, "", operator_token), "needs an introduction token", before);
  // The other node's token still enrolls its own node.
  const auto csr8 = new_csr("node-8");
  expect_issued(enroll("node-8", csr8.csr_pem, for_node_8), "node-8", csr8);
}

TEST_F(EnrollmentApiTest, ALiveNodeIsRefusedWithAnIntroductionTokenAndOnlyAManagementTokenReKeysIt) {
  // node-1 of the fixture is live (it heartbeats): taking its id over is what issue 40 found.
  const auto token = intro("node-1");
  const auto csr = new_csr("node-1");
  const auto before = fingerprint();
  expect_refused(409, enroll("node-1", csr.csr_pem, token), "node \"node-1\" is live", before);
  // The token is not spent by the refusal; a management token re-keys on purpose.
  EXPECT_EQ(identity("node-1")["Introductions"][0].value("UsedTime", ""), "");
  expect_issued(enroll("node-1", csr.csr_pem, "", mgmt), "node-1", csr);
}

TEST_F(EnrollmentApiTest, ADownNodeWithAnUnexpiredCertificateIsRefusedUntilPurged) {
  put_node("node-6", domain::NodeStatus::down, domain::now() + std::chrono::hours(1));
  const auto token = intro("node-6");
  const auto csr = new_csr("node-6");
  const auto before = fingerprint();
  expect_refused(409, enroll("node-6", csr.csr_pem, token), "holds a certificate valid until", before);
  // An operator's purge revokes it; the same token then enrolls the node.
  auto purged = call("DELETE", "/v1/node/node-6", "", operator_token);
  ASSERT_EQ(purged.status, 200u) << purged.body;
  EXPECT_NE(identity("node-6").value("RevokedBefore", ""), "");
  expect_issued(enroll("node-6", csr.csr_pem, token), "node-6", csr);
}

TEST_F(EnrollmentApiTest, PurgingALiveNodeIs409UnlessForcedByAManagementToken) {
  const auto before = fingerprint();
  expect_refused(409, call("DELETE", "/v1/node/node-1", "", operator_token), "node \"node-1\" is live", before);
  // Forcing needs management: every spelling the endpoint reads as true is checked.
  for (const auto* force : {"?force=true", "?force=1", "?force"})
    expect_refused(403, call("DELETE", std::string("/v1/node/node-1") + force, "", operator_token), "lacks management",
                   before);
  expect_refused(400, call("DELETE", "/v1/node/node-1?force=maybe", "", mgmt), "must be true or false", before);
  auto forced = call("DELETE", "/v1/node/node-1?force=true", "", mgmt);
  ASSERT_EQ(forced.status, 200u) << forced.body;
  EXPECT_EQ(call("GET", "/v1/node/node-1", "", mgmt).status, 404u);
  const auto revoked = identity("node-1");
  EXPECT_NE(revoked.value("RevokedBefore", ""), "") << revoked.dump();
  EXPECT_EQ(revoked.value("Generation", 0), 1);
}

TEST_F(EnrollmentApiTest, BadNodeIdsAndCsrsAre400NamingTheReasonAndChangeNothing) {
  const auto good = body(new_csr("node-9").csr_pem, intro("node-9"));
  const auto with = [&](const test::CsrSpec& spec) { return body(test::make_csr(spec), intro("node-9")); };
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
      {"node-9", body("", intro("node-9")), "field \"CSR\""},
      {"node-9", json{{"CSR", 7}, {"IntroToken", intro("node-9")}}.dump(), "field \"CSR\""},
      {"node-9", json{{"CSR", "x"}, {"IntroToken", 7}}.dump(), "field \"IntroToken\""},
      {"node-9", body("garbage", intro("node-9")), "not a PEM certificate signing request"},
      {"node-9", with({.break_signature = true}), "signature does not verify"},
      {"node-9", with({.key = Key::rsa2048}), "not ECDSA P-256"},
      {"node-9", with({.key = Key::p384}), "not ECDSA P-256"},
      // More names than the node's identity, or another identity.
      {"node-9", with({.dns_names = {"controlplane"}}), "asks for DNS names \"controlplane\""},
      {"node-9", with({.emails = {"a@example.com"}}), "other names"},
      {"node-9", with({.uris = {"spiffe://mooring/server"}}), "asks for \"spiffe://mooring/server\""},
      {"node-9", body(new_csr("node-1").csr_pem, intro("node-9")), "spiffe://mooring/node/node-1"},
  };
  const auto before = fingerprint();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.node + " " + c.why);
    expect_refused(400, call("POST", "/v1/node/" + c.node + "/enroll", c.body), c.why, before);
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
