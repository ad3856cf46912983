#include "services/controlplane/http/tls_context.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>

#include "shared/tls/certificates.hpp"

namespace mooring::controlplane::http {

namespace ssl = boost::asio::ssl;

namespace {

std::string problem(const std::string& what, const std::string& file, const boost::system::error_code& ec) {
  return what + " " + file + ": " + ec.message();
}

}  // namespace

domain::Expected<std::shared_ptr<ssl::context>> make_server_tls(const TlsFiles& files) {
  if (files.key_file.empty()) return domain::error("a TLS certificate needs its key file (--tls-key)");
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  if (ec) return domain::error("TLS options: " + ec.message());
  ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (ctx->use_certificate_chain_file(files.cert_file, ec); ec)
    return domain::error(problem("TLS certificate", files.cert_file, ec));
  if (ctx->use_private_key_file(files.key_file, ssl::context::pem, ec); ec)
    return domain::error(problem("TLS key", files.key_file, ec));
  if (::SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return domain::error("TLS key " + files.key_file + " does not belong to the certificate " + files.cert_file);
  if (!files.peer_ca_file.empty()) {
    if (ctx->load_verify_file(files.peer_ca_file, ec); ec)
      return domain::error(problem("TLS CA of the control planes", files.peer_ca_file, ec));
  }
  if (!files.client_ca_file.empty()) {
    if (ctx->load_verify_file(files.client_ca_file, ec); ec)
      return domain::error(problem("TLS client CA", files.client_ca_file, ec));
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return domain::error("TLS verify mode: " + ec.message());
  } else if (!files.peer_ca_file.empty()) {
    // Asked, not required: a browser or the CLI sends none; a certificate that does not verify
    // does not end the handshake either (the connection is then simply not a peer's: the
    // session reads SSL_get_verify_result).
    ctx->set_verify_mode(ssl::verify_peer, ec);
    if (ec) return domain::error("TLS verify mode: " + ec.message());
    ctx->set_verify_callback([](bool, ssl::verify_context&) { return true; }, ec);
    if (ec) return domain::error("TLS verify callback: " + ec.message());
  }
  return ctx;
}

bool is_control_plane(X509* cert) {
  if (cert == nullptr) return false;
  const auto info = tls::inspect(cert);
  return info.identity && info.identity->role == tls::Role::server;
}

}  // namespace mooring::controlplane::http
