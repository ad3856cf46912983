// The REST API over HTTPS: the real server with real certificates (shared/tls), reached by the
// CLI's client. Plain HTTP and foreign CAs get nothing; client certificates are required when a
// client CA is configured; a reload swaps the certificate for new connections without a restart.
#include <filesystem>

#include <gtest/gtest.h>

#include "cli/http_client.hpp"
#include "shared/tls/cert_files.hpp"
#include "tests/controlplane/support/api_server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::controlplane {
namespace {

namespace fs = std::filesystem;

struct CertFiles {
  std::string cert;
  std::string key;
};

class Https : public ::testing::Test {
 protected:
  void SetUp() override {
    pki = std::make_unique<test::TestPki>(dir / "pki");
    auto server = pki->server();
    ca = server.ca;
    server_cert = {server.cert, server.key};
  }

  // A server certificate from the test CA for other names than the ones the client dials.
  CertFiles issue_for(const std::string& stem, std::vector<std::string> dns_names) {
    auto signer = tls::read_pair(tls::ca_paths(pki->dir()));
    if (!signer) throw std::runtime_error(signer.error());
    auto pair = tls::create_certificate(
        *signer, {.identity = {tls::Role::server, {}}, .dns_names = std::move(dns_names), .ip_addresses = {}});
    if (!pair) throw std::runtime_error(pair.error());
    tls::PairPaths paths{dir / (stem + ".pem"), dir / (stem + "-key.pem")};
    if (auto w = tls::write_pair(paths, *pair); !w) throw std::runtime_error(w.error());
    return {paths.cert, paths.key};
  }

  void start(http::TlsFiles tls) {
    http::ServerConfig config;
    config.tls = std::move(tls);
    api.start(config);
  }

  http::TlsFiles server_files() const { return {.cert_file = server_cert.cert, .key_file = server_cert.key}; }

  domain::Expected<cli::HttpResponse> get(const std::string& scheme, cli::TlsClientFiles files,
                                          const std::string& host = "127.0.0.1") {
    auto endpoint = cli::parse_address(scheme + "://" + host + ":" + std::to_string(api.port));
    if (!endpoint) return domain::error(endpoint.error());
    cli::HttpRequest req;
    req.target = "/v1/volumes";
    req.timeout = std::chrono::seconds(5);
    return cli::HttpClient(*endpoint, std::move(files)).send(req);
  }

  test::TempDir dir{"mooring-https"};
  std::unique_ptr<test::TestPki> pki;
  std::string ca;
  CertFiles server_cert;
  ApiServer api;
};

TEST_F(Https, ServesTheApiToAClientTrustingItsCa) {
  start(server_files());
  auto res = get("https", {.ca_file = ca});
  ASSERT_TRUE(res) << res.error();
  EXPECT_EQ(res->status, 200u);
  EXPECT_EQ(res->body, "[]");
  auto by_name = get("https", {.ca_file = ca}, "localhost");
  ASSERT_TRUE(by_name) << by_name.error();
  EXPECT_EQ(by_name->status, 200u);
}

// The server answers nothing to plain HTTP; the CLI's client says what to set instead.
TEST_F(Https, PlainHttpToTheHttpsPortGetsNoAnswer) {
  start(server_files());
  auto res = get("http", {});
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().find("speaks HTTPS: set MOORING_ADDR=https://"), std::string::npos) << res.error();
}

TEST_F(Https, ACertificateFromAnotherCaIsRefusedByTheClient) {
  start(server_files());
  test::TestPki other(dir / "other-pki", "other");
  auto res = get("https", {.ca_file = other.server().ca});
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().find("TLS handshake failed"), std::string::npos) << res.error();
}

TEST_F(Https, ACertificateForAnotherHostIsRefusedByTheClient) {
  auto elsewhere = issue_for("elsewhere", {"cp.elsewhere.example"});
  start({.cert_file = elsewhere.cert, .key_file = elsewhere.key});
  auto res = get("https", {.ca_file = ca});
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().find("TLS handshake failed"), std::string::npos) << res.error();
}

TEST_F(Https, AClientCaMakesClientCertificatesRequired) {
  auto files = server_files();
  files.client_ca_file = ca;
  start(files);
  auto anonymous = get("https", {.ca_file = ca});
  EXPECT_FALSE(anonymous) << "status " << anonymous->status;
  test::TestPki other(dir / "other-pki", "other");
  auto foreign = other.cli();
  auto refused = get("https", {.ca_file = ca, .cert_file = foreign.cert, .key_file = foreign.key});
  EXPECT_FALSE(refused);
  auto client = pki->cli();
  auto res = get("https", {.ca_file = ca, .cert_file = client.cert, .key_file = client.key});
  ASSERT_TRUE(res) << res.error();
  EXPECT_EQ(res->status, 200u);
}

TEST_F(Https, ReloadServesRenewedFilesToNewConnections) {
  // Start with a certificate the client will not accept (wrong host), then renew it in place.
  auto wrong = issue_for("wrong-host", {"cp.elsewhere.example"});
  const auto cert = dir / "live.pem";
  const auto key = dir / "live-key.pem";
  fs::copy_file(wrong.cert, cert);
  fs::copy_file(wrong.key, key);
  start({.cert_file = cert, .key_file = key});
  ASSERT_FALSE(get("https", {.ca_file = ca}));

  fs::copy_file(server_cert.cert, cert, fs::copy_options::overwrite_existing);
  fs::copy_file(server_cert.key, key, fs::copy_options::overwrite_existing);
  auto reloaded = api.on_io([&] { return api.server->reload_tls(); });
  ASSERT_TRUE(reloaded) << reloaded.error();
  auto res = get("https", {.ca_file = ca});
  ASSERT_TRUE(res) << res.error();
  EXPECT_EQ(res->status, 200u);
}

TEST_F(Https, AReloadWithBrokenFilesKeepsTheOldOnesAndSaysWhy) {
  const auto cert = dir / "live.pem";
  const auto key = dir / "live-key.pem";
  fs::copy_file(server_cert.cert, cert);
  fs::copy_file(server_cert.key, key);
  start({.cert_file = cert, .key_file = key});
  auto other = pki->cli();
  fs::copy_file(other.key, key, fs::copy_options::overwrite_existing);  // key no longer matches
  auto reloaded = api.on_io([&] { return api.server->reload_tls(); });
  ASSERT_FALSE(reloaded);
  EXPECT_NE(reloaded.error().find("live-key.pem"), std::string::npos) << reloaded.error();
  EXPECT_NE(reloaded.error().find("mismatch"), std::string::npos) << reloaded.error();
  auto res = get("https", {.ca_file = ca});
  ASSERT_TRUE(res) << res.error();
  EXPECT_EQ(res->status, 200u);
}

TEST(HttpsFiles, MissingFilesAreNamedInTheError) {
  auto ctx = http::make_server_tls({.cert_file = "/nonexistent/cert.pem", .key_file = "/nonexistent/key.pem"});
  ASSERT_FALSE(ctx);
  EXPECT_NE(ctx.error().find("/nonexistent/cert.pem"), std::string::npos) << ctx.error();
}

}  // namespace
}  // namespace mooring::controlplane
