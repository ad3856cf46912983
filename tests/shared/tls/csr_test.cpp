// Certificate signing requests for node enrollment: a CSR made here keeps its key, names the
// identity it asks for and survives signing with the same key; CSRs that are not PEM, whose
// signature is broken or whose key is not P-256 are refused saying so; the SANs a CSR asks for
// are reported (the caller decides), and only the request's names end up in the certificate.
#include <gtest/gtest.h>

#include "shared/tls/certificates.hpp"
#include "tests/support/test_csr.hpp"

namespace mooring::tls {
namespace {

KeyPair make_ca() {
  auto ca = create_ca({});
  EXPECT_TRUE(ca) << ca.error();
  return *ca;
}

const Identity kNode1{Role::agent, "node-1"};

TEST(TlsCsr, SignedCertificateHoldsTheCsrKeyAndTheRequestedIdentityOnly) {
  const auto ca = make_ca();
  auto csr = create_csr(kNode1);
  ASSERT_TRUE(csr) << csr.error();
  auto info = inspect_csr(csr->csr_pem);
  ASSERT_TRUE(info) << info.error();
  EXPECT_EQ(info->uris, std::vector<std::string>{"spiffe://mooring/node/node-1"});
  EXPECT_TRUE(info->dns_names.empty());
  EXPECT_EQ(info->public_key_sha256.size(), 64u);

  auto cert = sign_csr(ca, csr->csr_pem, {.identity = kNode1, .dns_names = {}, .ip_addresses = {}, .validity = std::chrono::hours(24 * 30)});
  ASSERT_TRUE(cert) << cert.error();
  EXPECT_TRUE(signed_by(*cert, ca.cert_pem));
  EXPECT_TRUE(key_matches(*cert, csr->key_pem));
  auto leaf = inspect(*cert);
  ASSERT_TRUE(leaf) << leaf.error();
  EXPECT_EQ(leaf->identity, kNode1);
  EXPECT_EQ(leaf->uris, std::vector<std::string>{"spiffe://mooring/node/node-1"});
  EXPECT_TRUE(leaf->dns_names.empty());
  EXPECT_TRUE(leaf->ip_addresses.empty());
  EXPECT_EQ(leaf->public_key_sha256, info->public_key_sha256);
  EXPECT_EQ(leaf->subject, "CN=agent.node-1.mooring,O=Mooring");
}

TEST(TlsCsr, AnExistingKeyIsReusedSoARenewalKeepsTheKeyHash) {
  auto first = create_csr(kNode1);
  ASSERT_TRUE(first) << first.error();
  auto again = create_csr(kNode1, first->key_pem);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->key_pem, first->key_pem);
  EXPECT_EQ(inspect_csr(again->csr_pem)->public_key_sha256, inspect_csr(first->csr_pem)->public_key_sha256);
  auto other = create_csr(kNode1);
  ASSERT_TRUE(other);
  EXPECT_NE(inspect_csr(other->csr_pem)->public_key_sha256, inspect_csr(first->csr_pem)->public_key_sha256);
  EXPECT_FALSE(create_csr(kNode1, "not a key"));
}

TEST(TlsCsr, CertificateKeyHashIsTheSameForTheSameKeyAndDiffersOtherwise) {
  const auto ca = make_ca();
  auto a = create_certificate(ca, {.identity = kNode1});
  auto b = create_certificate(ca, {.identity = kNode1});
  ASSERT_TRUE(a && b);
  auto csr = create_csr(kNode1, a->key_pem);
  ASSERT_TRUE(csr);
  EXPECT_EQ(inspect(a->cert_pem)->public_key_sha256, inspect_csr(csr->csr_pem)->public_key_sha256);
  EXPECT_NE(inspect(a->cert_pem)->public_key_sha256, inspect(b->cert_pem)->public_key_sha256);
}

TEST(TlsCsr, GarbageBrokenSignatureAndOtherKeyTypesAreRefusedSayingWhy) {
  const auto ca = make_ca();
  const auto expect_refused = [&](const std::string& pem, const std::string& why) {
    auto info = inspect_csr(pem);
    ASSERT_FALSE(info) << why;
    EXPECT_NE(info.error().find(why), std::string::npos) << info.error();
    auto cert = sign_csr(ca, pem, {.identity = kNode1});
    ASSERT_FALSE(cert) << why;
    EXPECT_NE(cert.error().find(why), std::string::npos) << cert.error();
  };
  expect_refused("not a csr", "not a PEM certificate signing request");
  expect_refused(ca.cert_pem, "not a PEM certificate signing request");
  expect_refused(test::make_csr({.break_signature = true}), "signature does not verify");
  expect_refused(test::make_csr({.key = test::CsrSpec::KeyType::p384}), "not ECDSA P-256");
  expect_refused(test::make_csr({.key = test::CsrSpec::KeyType::rsa2048}), "not ECDSA P-256");
}

TEST(TlsCsr, RequestedSansAreReportedForTheCallerToJudge) {
  auto info = inspect_csr(test::make_csr({.uris = {"spiffe://mooring/server"},
                                          .dns_names = {"evil.example.com"},
                                          .emails = {"a@example.com"}}));
  ASSERT_TRUE(info) << info.error();
  EXPECT_EQ(info->uris, std::vector<std::string>{"spiffe://mooring/server"});
  EXPECT_EQ(info->dns_names, std::vector<std::string>{"evil.example.com"});
  EXPECT_EQ(info->other_names, std::vector<std::string>{"email:a@example.com"});
  // Signing never copies them: the certificate carries the request's identity.
  const auto ca = make_ca();
  auto cert = sign_csr(ca, test::make_csr({.dns_names = {"evil.example.com"}}), {.identity = kNode1, .dns_names = {}});
  ASSERT_TRUE(cert) << cert.error();
  EXPECT_TRUE(inspect(*cert)->dns_names.empty());
}

}  // namespace
}  // namespace mooring::tls
