// Mutual TLS on our gRPC server and channels: a client with a certificate from the CA that
// expects the server's identity gets through and is identified; a plaintext client, a client of
// another CA, and a client expecting another identity are refused; bad files fail at load.
#include "shared/rpc/transport_security.hpp"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/server_callback.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>

#include "csi/v1/csi.grpc.pb.h"
#include "shared/rpc/channel.hpp"
#include "shared/rpc/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

#include <gtest/gtest.h>

namespace mooring::rpc {
namespace {

namespace asio = boost::asio;
namespace v1 = ::csi::v1;
using namespace std::chrono_literals;

// Answers GetPluginInfo with who called: the URI of the caller's certificate, or "plaintext".
class WhoAmI final : public v1::Identity::CallbackService {
 public:
  explicit WhoAmI(asio::any_io_executor ex) : ex_(std::move(ex)) {}
  grpc::ServerUnaryReactor* GetPluginInfo(grpc::CallbackServerContext* ctx, const v1::GetPluginInfoRequest*,
                                          v1::GetPluginInfoResponse* resp) override {
    const auto peer = peer_certificate(*ctx);
    return serve(ex_, ctx, "GetPluginInfo", [peer, resp]() -> asio::awaitable<grpc::Status> {
      if (!peer.tls) resp->set_name("plaintext");
      else resp->set_name(peer.identity ? tls::identity_uri(*peer.identity) + " " + peer.subject : "none");
      co_return grpc::Status::OK;
    });
  }

 private:
  asio::any_io_executor ex_;
};

class TransportSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    thread_ = std::thread([this] { io_.run(); });
    auto server_security = TransportSecurity::load(files(pki_.server()));
    ASSERT_TRUE(server_security) << server_security.error();
    std::string error;
    server_ = Server::start({.address = "127.0.0.1:0", .services = {&service_}, .security = *server_security}, error);
    ASSERT_TRUE(server_) << error;
    target_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_) server_->shutdown_blocking(1s);
    work_.reset();
    thread_.join();
  }

  static TlsFiles files(const test::TlsPaths& p) { return {p.ca, p.cert, p.key}; }

  // GetPluginInfo through `channel`: the status and the name the server answered.
  static std::pair<grpc::Status, std::string> call(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Identity::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::GetPluginInfoRequest req;
    v1::GetPluginInfoResponse resp;
    auto st = stub->GetPluginInfo(&ctx, req, &resp);
    return {st, resp.name()};
  }

  std::shared_ptr<grpc::Channel> tls_channel(const test::TlsPaths& p, tls::Identity peer = {tls::Role::server, {}}) {
    auto security = TransportSecurity::load(files(p));
    EXPECT_TRUE(security) << security.error();
    return make_channel(target_, ChannelOptions{.security = *security, .peer = peer});
  }

  test::TempDir dir_{"rpc-tls"};
  test::TestPki pki_{dir_ / "pki"};
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::thread thread_;
  WhoAmI service_{io_.get_executor()};
  std::unique_ptr<Server> server_;
  std::string target_;
};

TEST_F(TransportSecurityTest, ClientWithACertificateFromTheCaIsServedAndIdentified) {
  auto [st, who] = call(tls_channel(pki_.agent("node-a")));
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(who.substr(0, who.find(' ')), "spiffe://mooring/node/node-a");
  EXPECT_NE(who.find("agent.node-a.mooring"), std::string::npos) << who;
}

TEST_F(TransportSecurityTest, PlaintextClientIsRefused) {
  auto [st, who] = call(make_channel(target_));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_EQ(who, "");
}

TEST_F(TransportSecurityTest, ClientWithoutACertificateIsRefused) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = test::TestPki::read(pki_.server().ca);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto [st, who] = call(grpc::CreateCustomChannel(target_, grpc::SslCredentials(ssl), args));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_EQ(who, "");
}

TEST_F(TransportSecurityTest, ClientWithACertificateFromAnotherCaIsRefused) {
  test::TestPki other(dir_ / "other", "other");
  auto [st, who] = call(tls_channel(other.agent("node-a")));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_EQ(who, "");
}

TEST_F(TransportSecurityTest, ServerWithoutTheExpectedIdentityIsNotTrusted) {
  // The server's certificate says "server"; a channel meant for node-b's agent must not use it.
  auto [st, who] = call(tls_channel(pki_.agent("node-a"), {tls::Role::agent, "node-b"}));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_EQ(who, "");
}

TEST_F(TransportSecurityTest, BadFilesFailAtLoadNamingTheProblem) {
  test::TestPki other(dir_ / "other", "other");
  const auto agent = pki_.agent("node-a");
  auto foreign = TransportSecurity::load({other.server().ca, agent.cert, agent.key});
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().find("is not signed by the CA"), std::string::npos) << foreign.error();
  auto wrong_key = TransportSecurity::load({agent.ca, agent.cert, pki_.server().key});
  ASSERT_FALSE(wrong_key);
  EXPECT_NE(wrong_key.error().find("is not the key of"), std::string::npos) << wrong_key.error();
  auto missing = TransportSecurity::load({agent.ca, (dir_ / "nope.pem").string(), agent.key});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("nope.pem does not exist"), std::string::npos) << missing.error();
  auto someone_else = TransportSecurity::load({agent.ca, agent.cert, agent.key}, tls::Identity{tls::Role::agent, "node-b"});
  ASSERT_FALSE(someone_else);
  EXPECT_NE(someone_else.error().find("agent of node node-a"), std::string::npos) << someone_else.error();
  auto ok = TransportSecurity::load({agent.ca, agent.cert, agent.key}, tls::Identity{tls::Role::agent, "node-a"});
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_TRUE((*ok)->expiry_warnings(std::chrono::hours(24)).empty());
  EXPECT_EQ((*ok)->expiry_warnings(std::chrono::hours(24 * 365)).size(), 2u);  // 30-day test certificates
}

}  // namespace
}  // namespace mooring::rpc
