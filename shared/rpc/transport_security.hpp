// Mutual TLS for the gRPC links between the control plane and node agents. One TransportSecurity
// per process holds the CA, the process's own certificate and key (re-read by gRPC when the files
// change, so renewed certificates take effect without a restart) and makes:
//   - server credentials that require a client certificate signed by the CA;
//   - channel credentials that present ours and accept the peer only when its certificate is
//     signed by the CA *and* carries the identity we mean to reach (tls/identity.hpp), instead of
//     checking a host name: a spoofed address gets nothing.
// gRPC 1.51 cannot pin a TLS version: its range is TLS 1.2-1.3; OpenSSL 3 on both ends
// negotiates 1.3. UNIX-socket channels (CSI plugins) never use this.
// gRPC types are only forward-declared here.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "shared/domain/result.hpp"
#include "shared/tls/identity.hpp"

namespace grpc {
class ChannelCredentials;
class ServerCredentials;
class ServerContextBase;
namespace experimental {
class CertificateProviderInterface;
}
}  // namespace grpc

namespace mooring::rpc {

struct TlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;

  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
  bool all() const { return !ca_file.empty() && !cert_file.empty() && !key_file.empty(); }
};

// How often gRPC re-reads the files (a renewed certificate is used within this long).
inline constexpr std::chrono::seconds kTlsReloadInterval{5};

class TransportSecurity {
 public:
  // Checks the files first (readable PEM, the key matches the certificate, the certificate is
  // signed by the CA and carries a Mooring identity) so a mistake is an error at start, not
  // a failed handshake later. `expected_own` (when given) must be the certificate's identity.
  static domain::Expected<std::shared_ptr<const TransportSecurity>> load(
      const TlsFiles& files, std::optional<tls::Identity> expected_own = std::nullopt,
      std::chrono::seconds reload_interval = kTlsReloadInterval);

  ~TransportSecurity();

  std::shared_ptr<grpc::ServerCredentials> server_credentials() const;
  // The peer must present a certificate from the CA carrying `peer`.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const tls::Identity& peer) const;

  const TlsFiles& files() const { return files_; }
  // The identity in our own certificate (as loaded at start).
  const tls::Identity& identity() const { return identity_; }

  // Re-reads the certificate and the CA from disk: one line per file expiring within `within`
  // (or expired, or unreadable). Logged at start, daily and on SIGHUP.
  std::vector<std::string> expiry_warnings(std::chrono::hours within = std::chrono::hours(24 * 30)) const;
  // "subject, expires <date>" of the certificate now on disk, for logs.
  std::string describe_certificate() const;

 private:
  TransportSecurity() = default;
  TlsFiles files_;
  tls::Identity identity_;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
};

// Who is calling, as the server's TLS handshake established it.
struct PeerCertificate {
  bool tls = false;                       // false: a plaintext connection (an --insecure server)
  std::optional<tls::Identity> identity;  // from the certificate's URI SAN
  std::string subject;                    // for logs
  std::string pem;                        // the certificate itself; parse it only where needed
};
PeerCertificate peer_certificate(const grpc::ServerContextBase& context);

// Logs the certificate now on disk and a warning for each file expiring within 30 days (at
// start and on SIGHUP).
void log_certificate_status(const TransportSecurity& security);
// log_certificate_status once a day, until cancelled.
boost::asio::awaitable<void> warn_expiry_daily(std::shared_ptr<const TransportSecurity> security);

}  // namespace mooring::rpc
