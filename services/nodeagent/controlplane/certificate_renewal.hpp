// The agent renews its own certificate (mutual TLS with the control plane): two thirds into the
// certificate's life (tls::renew_at) it makes a new key, sends a CSR over the channel its current
// certificate opened (RenewCertificate), checks the answer is a certificate for that key and this
// node from our CA, and writes the key, then the certificate, each atomically. gRPC re-reads the
// files within rpc::kTlsReloadInterval (the agent's server presents the new one from then on);
// after that the channels to the control plane are dialled anew, so every call presents it too
// and the control plane adopts it (services/controlplane/nodes/node_identity.hpp). A failure is
// retried with backoff until the certificate expires; past that the node enrolls again.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "shared/async/backoff.hpp"
#include "shared/domain/result.hpp"
#include "shared/rpc/transport_security.hpp"

namespace mooring::nodeagent {

class ControlPlaneTarget;

struct RenewalOptions {
  std::string node_id;
  rpc::TlsFiles files;  // the agent's own: the certificate and key written over, the CA checked against
  // From the files written until the control plane is dialled anew: gRPC has read them by then.
  std::chrono::milliseconds reload_wait = rpc::kTlsReloadInterval + std::chrono::seconds(1);
  std::chrono::milliseconds call_timeout{std::chrono::seconds(10)};
  async::Backoff backoff{std::chrono::seconds(5), std::chrono::minutes(5), 2.0, 0.2};
  // The files are read again at least this often: an operator may have replaced them.
  std::chrono::milliseconds max_sleep{std::chrono::hours(1)};
};

class CertificateRenewal {
 public:
  CertificateRenewal(RenewalOptions options, std::shared_ptr<ControlPlaneTarget> target);
  ~CertificateRenewal();

  // Renews whenever the certificate on disk is due, until the awaiting coroutine is cancelled.
  boost::asio::awaitable<void> run();
  // One renewal now: asked, checked, written, and the control plane dialled anew.
  boost::asio::awaitable<domain::Status> renew_once();

 private:
  RenewalOptions options_;
  std::shared_ptr<ControlPlaneTarget> target_;
};

}  // namespace mooring::nodeagent
