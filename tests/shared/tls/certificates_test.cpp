// Creating certificates: a P-256 CA, leaves signed by it carrying their identity and SANs, the
// validity asked for, bad names refused; files written 0600 and never over existing ones.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>

#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::tls {
namespace {

using namespace std::chrono;

KeyPair make_ca() {
  auto ca = create_ca({});
  EXPECT_TRUE(ca) << ca.error();
  return *ca;
}

// The key's curve name ("prime256v1") and whether it is EC.
std::string curve_of(const std::string& key_pem) {
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (!key) return "";
  char name[64] = {};
  size_t len = 0;
  EVP_PKEY_get_utf8_string_param(key, "group", name, sizeof name, &len);
  EVP_PKEY_free(key);
  return name;
}

TEST(TlsCertificates, CaIsSelfSignedP256WithTheValidityAsked) {
  auto ca = create_ca({.days = 10});
  ASSERT_TRUE(ca) << ca.error();
  EXPECT_EQ(curve_of(ca->key_pem), "prime256v1");
  auto info = inspect(ca->cert_pem);
  ASSERT_TRUE(info) << info.error();
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->subject, "CN=Mooring CA,O=Mooring");
  EXPECT_EQ(info->issuer, info->subject);
  EXPECT_TRUE(signed_by(ca->cert_pem, ca->cert_pem));
  const auto days = duration_cast<hours>(info->not_after - system_clock::now()).count() / 24.0;
  EXPECT_NEAR(days, 10, 0.1);
}

TEST(TlsCertificates, ALeafLastsTheValidityAskedAndEachHasItsOwnSerial) {
  const auto ca = make_ca();
  auto a = create_certificate(ca, {.identity = {Role::agent, "node-7"}, .validity = seconds(45)});
  auto b = create_certificate(ca, {.identity = {Role::agent, "node-7"}, .validity = seconds(45)});
  ASSERT_TRUE(a && b);
  auto ia = inspect(a->cert_pem), ib = inspect(b->cert_pem);
  ASSERT_TRUE(ia && ib);
  EXPECT_FALSE(ia->serial.empty());
  EXPECT_NE(ia->serial, ib->serial);
  // Backdated for clock skew; issued_at undoes it, and the validity counts from there.
  EXPECT_EQ(ia->not_before + kNotBeforeBackdate, issued_at(*ia));
  EXPECT_NEAR(duration_cast<milliseconds>(ia->not_after - issued_at(*ia)).count(), 45'000, 1'000);
  EXPECT_FALSE(create_certificate(ca, {.identity = {Role::agent, "node-7"}, .validity = seconds(0)}));
}

TEST(TlsCertificates, RenewalIsDueTwoThirdsIntoALifeCountedFromIssue) {
  CertificateInfo info;
  info.not_before = system_clock::time_point(hours(1000)) - kNotBeforeBackdate;
  info.not_after = system_clock::time_point(hours(1000)) + seconds(45);
  EXPECT_EQ(renew_at(info), system_clock::time_point(hours(1000)) + seconds(30));
  // A certificate shorter than the backdate (made by hand) still gets a time inside its life.
  info.not_before = info.not_after - seconds(30);
  EXPECT_LE(renew_at(info), info.not_after);
  EXPECT_GE(renew_at(info), info.not_before);
}

TEST(TlsCertificates, AgentCertificateCarriesItsNodeIdAndSans) {
  const auto ca = make_ca();
  auto leaf = create_certificate(ca, {.identity = {Role::agent, "node-7"},
                                      .dns_names = {"localhost", "node7.example.com"},
                                      .ip_addresses = {"127.0.0.1", "10.0.0.7", "::1"},
                                      .validity = std::chrono::hours(24 * 30)});
  ASSERT_TRUE(leaf) << leaf.error();
  EXPECT_EQ(curve_of(leaf->key_pem), "prime256v1");
  EXPECT_TRUE(signed_by(leaf->cert_pem, ca.cert_pem));
  auto info = inspect(leaf->cert_pem);
  ASSERT_TRUE(info) << info.error();
  EXPECT_FALSE(info->is_ca);
  ASSERT_TRUE(info->identity);
  EXPECT_EQ(info->identity->role, Role::agent);
  EXPECT_EQ(info->identity->node_id, "node-7");
  EXPECT_EQ(info->subject, "CN=agent.node-7.mooring,O=Mooring");
  EXPECT_EQ(info->issuer, "CN=Mooring CA,O=Mooring");
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"localhost", "node7.example.com"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"127.0.0.1", "10.0.0.7", "::1"}));
  EXPECT_EQ(info->uris, (std::vector<std::string>{"spiffe://mooring/node/node-7"}));
}

TEST(TlsCertificates, ServerAndCliCertificatesNameTheirRole) {
  const auto ca = make_ca();
  for (const auto role : {Role::server, Role::cli}) {
    auto leaf = create_certificate(ca, {.identity = {role, {}}});
    ASSERT_TRUE(leaf) << leaf.error();
    auto info = inspect(leaf->cert_pem);
    ASSERT_TRUE(info && info->identity);
    EXPECT_EQ(info->identity->role, role);
    EXPECT_EQ(info->dns_names, std::vector<std::string>{"localhost"});
    EXPECT_EQ(info->ip_addresses, std::vector<std::string>{"127.0.0.1"});
  }
}

TEST(TlsCertificates, ACertificateOfAnotherCaDoesNotVerify) {
  const auto ca = make_ca();
  const auto other = make_ca();
  auto leaf = create_certificate(other, {.identity = {Role::server, {}}});
  ASSERT_TRUE(leaf);
  EXPECT_FALSE(signed_by(leaf->cert_pem, ca.cert_pem));
}

TEST(TlsCertificates, BadInputIsRefusedWithTheReason) {
  const auto ca = make_ca();
  auto bad_ip = create_certificate(ca, {.identity = {Role::server, {}}, .ip_addresses = {"300.1.1.1"}});
  ASSERT_FALSE(bad_ip);
  EXPECT_NE(bad_ip.error().find("300.1.1.1"), std::string::npos) << bad_ip.error();
  // A comma would smuggle another SAN into a config-string API; here it is just not a DNS name.
  auto bad_dns = create_certificate(ca, {.identity = {Role::server, {}}, .dns_names = {"a,URI:spiffe://mooring/cli"}});
  ASSERT_FALSE(bad_dns);
  EXPECT_NE(bad_dns.error().find("is not a DNS name"), std::string::npos) << bad_dns.error();
  auto bad_node = create_certificate(ca, {.identity = {Role::agent, "a/b"}});
  ASSERT_FALSE(bad_node);
  EXPECT_NE(bad_node.error().find("node id"), std::string::npos);
  auto mismatched = create_certificate(KeyPair{ca.cert_pem, make_ca().key_pem}, {.identity = {Role::server, {}}});
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().find("does not match"), std::string::npos) << mismatched.error();
  EXPECT_FALSE(create_ca({.days = 0}));
  EXPECT_FALSE(inspect("not a certificate"));
}

TEST(TlsCertificates, ExpiryWarningOnlyWithinTheWindow) {
  CertificateInfo info;
  info.subject = "CN=x";
  const auto now = system_clock::now();
  info.not_after = now + hours(24 * 31);
  EXPECT_FALSE(expiry_warning(info, now));
  info.not_after = now + hours(24 * 29 + 1);
  EXPECT_EQ(expiry_warning(info, now), "certificate CN=x expires in 29 days");
  info.not_after = now - hours(1);
  EXPECT_EQ(expiry_warning(info, now), "certificate CN=x has expired");
}

TEST(TlsCertFiles, PairsAreWritten0600AndNeverOverwritten) {
  test::TempDir dir("tls-files");
  const auto ca = make_ca();
  const auto paths = ca_paths(dir / "tls");
  auto written = write_pair(paths, ca);
  ASSERT_TRUE(written) << written.error();
  for (const auto& p : {paths.cert, paths.key}) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << p;
  }
  auto again = write_pair(paths, make_ca());
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().find("already exists"), std::string::npos);
  auto read = read_pair(paths);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->cert_pem, ca.cert_pem);
  EXPECT_EQ(read->key_pem, ca.key_pem);
  EXPECT_EQ(pair_paths(dir.path(), {Role::agent, "n1"}).key, dir / "agent-n1-key.pem");
}

}  // namespace
}  // namespace mooring::tls
