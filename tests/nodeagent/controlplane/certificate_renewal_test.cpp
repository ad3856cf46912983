// The agent's certificate renewal against a fake control plane: it sends a CSR for a new key and
// its node; a good answer (a certificate for that key and node from our CA) replaces the key and
// the certificate files; an answer for another key or from another CA, or a refusal, changes no
// file and says why.
#include "services/nodeagent/controlplane/certificate_renewal.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "services/nodeagent/controlplane/controlplane_target.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/nodeagent/support/fake_controlplane.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using namespace std::chrono_literals;

class CertificateRenewalTest : public ::testing::Test {
 protected:
  CertificateRenewalTest() : files(pki.agent("node-1")) {
    // A plaintext link to the fake: what is checked here is the renewal, not the handshake.
    renewal = std::make_unique<CertificateRenewal>(
        RenewalOptions{.node_id = "node-1", .files = {files.ca, files.cert, files.key}, .reload_wait = 0ms},
        make_controlplane_target(fake.address(), {}));
  }

  // Signs the CSR with `ca` for `node`, as the control plane does.
  static FakeControlPlane::RenewAnswer signer(tls::KeyPair ca, std::string node = "node-1") {
    return [ca = std::move(ca), node = std::move(node)](const v1::RenewCertificateRequest& req,
                                                        v1::RenewCertificateResponse& resp) {
      auto cert = tls::sign_csr(ca, req.csr(), {.identity = {tls::Role::agent, node}, .dns_names = {},
                                                .ip_addresses = {}, .validity = std::chrono::hours(1)});
      if (!cert) return grpc::Status(grpc::StatusCode::INTERNAL, cert.error());
      resp.set_certificate(*cert);
      resp.set_ca(ca.cert_pem);
      resp.set_generation(2);
      return grpc::Status::OK;
    };
  }

  domain::Status renew() {
    domain::Status out;
    run_async(io, [&]() -> asio::awaitable<void> { out = co_await renewal->renew_once(); });
    return out;
  }

  std::pair<std::string, std::string> on_disk() const {
    return {test::TestPki::read(files.cert), test::TestPki::read(files.key)};
  }

  test::TempDir dir{"renewal"};
  test::TestPki pki{dir.path()};
  test::TlsPaths files;
  FakeControlPlane fake;
  asio::io_context io;
  std::unique_ptr<CertificateRenewal> renewal;
};

TEST_F(CertificateRenewalTest, AGoodAnswerReplacesTheKeyAndTheCertificate) {
  auto ca = tls::read_pair(tls::ca_paths(pki.dir()));
  ASSERT_TRUE(ca) << ca.error();
  std::string sent_node;
  fake.on_renew([&, sign = signer(*ca)](const v1::RenewCertificateRequest& req, v1::RenewCertificateResponse& resp) {
    sent_node = req.node_id();
    return sign(req, resp);
  });
  const auto before = on_disk();
  auto st = renew();
  ASSERT_TRUE(st) << st.error();
  EXPECT_EQ(sent_node, "node-1");
  const auto [cert, key] = on_disk();
  EXPECT_NE(cert, before.first);
  EXPECT_NE(key, before.second);  // a new key, made here
  EXPECT_TRUE(tls::key_matches(cert, key));
  auto info = tls::inspect(cert);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->identity, (tls::Identity{tls::Role::agent, "node-1"}));
  EXPECT_NE(info->serial, tls::inspect(before.first)->serial);
}

TEST_F(CertificateRenewalTest, AnAnswerForAnotherKeyNodeOrCaWritesNothing) {
  auto ca = tls::read_pair(tls::ca_paths(pki.dir()));
  ASSERT_TRUE(ca);
  test::TestPki other(dir.path() / "other", "other");
  auto foreign = tls::read_pair(tls::ca_paths(other.dir()));
  ASSERT_TRUE(foreign);
  const auto before = on_disk();
  // Another node's certificate; one from another CA; one for a key that is not the CSR's.
  auto own_sign = signer(*ca);
  for (auto answer : {signer(*ca, "node-2"), signer(*foreign),
                      FakeControlPlane::RenewAnswer([&](const v1::RenewCertificateRequest&, v1::RenewCertificateResponse& resp) {
                        auto csr = tls::create_csr({tls::Role::agent, "node-1"});
                        v1::RenewCertificateRequest elsewhere;
                        elsewhere.set_csr(csr->csr_pem);
                        return own_sign(elsewhere, resp);
                      })}) {
    fake.on_renew(answer);
    auto st = renew();
    ASSERT_FALSE(st);
    EXPECT_NE(st.error().find("nothing was written"), std::string::npos) << st.error();
    EXPECT_EQ(on_disk(), before);
  }
}

TEST_F(CertificateRenewalTest, ARefusalSaysWhyAndWritesNothing) {
  fake.on_renew([](const v1::RenewCertificateRequest&, v1::RenewCertificateResponse&) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "certificate renewal is off: no CA key");
  });
  const auto before = on_disk();
  auto st = renew();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("renewal is off"), std::string::npos) << st.error();
  EXPECT_EQ(on_disk(), before);
}

}  // namespace
}  // namespace mooring::nodeagent
