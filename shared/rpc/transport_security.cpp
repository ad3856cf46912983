#include "shared/rpc/transport_security.hpp"

#include <grpcpp/security/auth_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/server_context.h>

#include <algorithm>
#include <ctime>

#include "shared/async/sleep.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"

namespace mooring::rpc {

namespace {

namespace gx = grpc::experimental;

// Accepts the server's certificate (already verified against the CA by gRPC) only when it
// carries the identity this channel means to reach. Synchronous: a string comparison.
class IdentityVerifier final : public gx::ExternalCertificateVerifier {
 public:
  explicit IdentityVerifier(tls::Identity expected) : expected_(tls::identity_uri(expected)) {}

  bool Verify(gx::TlsCustomVerificationCheckRequest* request, std::function<void(grpc::Status)>,
              grpc::Status* sync_status) override {
    const auto uris = request->uri_names();
    const bool match = std::any_of(uris.begin(), uris.end(), [&](const grpc::string_ref& uri) {
      return std::string_view(uri.data(), uri.size()) == expected_;
    });
    *sync_status =
        match ? grpc::Status::OK
              : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                             "the peer's certificate does not carry " + expected_ + " (subject " +
                                 std::string(request->common_name().data(), request->common_name().size()) + ")");
    return true;
  }
  void Cancel(gx::TlsCustomVerificationCheckRequest*) override {}

 private:
  std::string expected_;
};

std::string date(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string text_of(const grpc::string_ref& s) { return std::string(s.data(), s.size()); }

}  // namespace

domain::Expected<std::shared_ptr<const TransportSecurity>> TransportSecurity::load(
    const TlsFiles& files, std::optional<tls::Identity> expected_own, std::chrono::seconds reload_interval) {
  if (!files.all()) return domain::error("mutual TLS needs a CA file, a certificate file and a key file");
  auto ca = tls::read_text(files.ca_file);
  if (!ca) return domain::error(ca.error());
  auto pair = tls::read_pair({files.cert_file, files.key_file});
  if (!pair) return domain::error(pair.error());
  auto ca_info = tls::inspect(*ca);
  if (!ca_info || !ca_info->is_ca) return domain::error(files.ca_file + " is not a CA certificate");
  auto info = tls::inspect(pair->cert_pem);
  if (!info) return domain::error(files.cert_file + ": " + info.error());
  if (!tls::signed_by(pair->cert_pem, *ca))
    return domain::error(files.cert_file + " (" + info->subject + ") is not signed by the CA in " + files.ca_file);
  if (!info->identity)
    return domain::error(files.cert_file + " (" + info->subject +
                         ") carries no Mooring identity (create it with `mooring tls cert create`)");
  if (expected_own && *info->identity != *expected_own)
    return domain::error(files.cert_file + " is the certificate of the " + tls::describe(*info->identity) +
                         ", this process runs as the " + tls::describe(*expected_own));
  if (!tls::key_matches(pair->cert_pem, pair->key_pem))
    return domain::error(files.key_file + " is not the key of " + files.cert_file);
  auto self = std::shared_ptr<TransportSecurity>(new TransportSecurity());
  self->files_ = files;
  self->identity_ = *info->identity;
  self->provider_ = std::make_shared<gx::FileWatcherCertificateProvider>(
      files.key_file, files.cert_file, files.ca_file, static_cast<unsigned>(reload_interval.count()));
  return std::shared_ptr<const TransportSecurity>(std::move(self));
}

TransportSecurity::~TransportSecurity() = default;

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::server_credentials() const {
  gx::TlsServerCredentialsOptions options(provider_);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::channel_credentials(const tls::Identity& peer) const {
  gx::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider_);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);  // the chain, against our CA
  options.set_certificate_verifier(gx::ExternalCertificateVerifier::Create<IdentityVerifier>(peer));
  options.set_check_call_host(false);  // the identity, not the dialled host name, is what counts
  return grpc::experimental::TlsCredentials(options);
}

std::vector<std::string> TransportSecurity::expiry_warnings(std::chrono::hours within) const {
  std::vector<std::string> out;
  const auto now = std::chrono::system_clock::now();
  for (const auto* path : {&files_.cert_file, &files_.ca_file}) {
    auto pem = tls::read_text(*path);
    auto info = pem ? tls::inspect(*pem) : domain::Expected<tls::CertificateInfo>(domain::error(pem.error()));
    if (!info) {
      out.push_back(*path + ": " + info.error());
      continue;
    }
    if (auto warning = tls::expiry_warning(*info, now, within))
      out.push_back(*warning + " (" + *path + ", not after " + date(info->not_after) + ")");
  }
  return out;
}

std::string TransportSecurity::describe_certificate() const {
  auto pem = tls::read_text(files_.cert_file);
  if (!pem) return pem.error();
  auto info = tls::inspect(*pem);
  if (!info) return files_.cert_file + ": " + info.error();
  return info->subject + ", expires " + date(info->not_after);
}

PeerCertificate peer_certificate(const grpc::ServerContextBase& context) {
  PeerCertificate out;
  const auto auth = context.auth_context();
  if (!auth) return out;
  const auto type = auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  out.tls = !type.empty() && (text_of(type.front()) == GRPC_SSL_TRANSPORT_SECURITY_TYPE ||
                              text_of(type.front()) == GRPC_TLS_TRANSPORT_SECURITY_TYPE);
  if (!out.tls) return out;
  if (const auto subject = auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME); !subject.empty())
    out.subject = text_of(subject.front());
  if (const auto pem = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME); !pem.empty())
    out.pem = text_of(pem.front());
  for (const char* property : {GRPC_PEER_URI_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const auto& value : auth->FindPropertyValues(property)) {
      if (auto id = tls::parse_identity_uri(text_of(value))) {
        out.identity = std::move(id);
        return out;
      }
    }
  }
  return out;
}

void log_certificate_status(const TransportSecurity& security) {
  static const log::Logger logger{"tls"};
  logger.info("mutual TLS certificate", {{"identity", tls::identity_uri(security.identity())},
                                         {"certificate", security.describe_certificate()},
                                         {"file", security.files().cert_file},
                                         {"reload", "when the files change (checked every " +
                                                        std::to_string(kTlsReloadInterval.count()) + "s)"}});
  for (const auto& warning : security.expiry_warnings()) logger.warn("renew the certificate", {{"warning", warning}});
}

boost::asio::awaitable<void> warn_expiry_daily(std::shared_ptr<const TransportSecurity> security) {
  for (;;) {
    const auto end = co_await async::sleep_for(std::chrono::hours(24));
    if (end != async::SleepEnd::elapsed) co_return;
    log_certificate_status(*security);
  }
}

}  // namespace mooring::rpc
