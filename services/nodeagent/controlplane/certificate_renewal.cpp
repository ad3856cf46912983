#include "services/nodeagent/controlplane/certificate_renewal.hpp"

#include <grpcpp/client_context.h>

#include <algorithm>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "services/nodeagent/controlplane/controlplane_target.hpp"
#include "shared/async/sleep.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"
#include "shared/tls/pair_replacement.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using std::chrono::system_clock;

const log::Logger kLog{"tls-renewal"};

std::string when(system_clock::time_point t) {
  return domain::format_time(std::chrono::time_point_cast<std::chrono::milliseconds>(t));
}

}  // namespace

CertificateRenewal::CertificateRenewal(RenewalOptions options, std::shared_ptr<ControlPlaneTarget> target)
    : options_(std::move(options)), target_(std::move(target)) {}

CertificateRenewal::~CertificateRenewal() = default;

asio::awaitable<domain::Status> CertificateRenewal::renew_once() {
  const tls::Identity identity{tls::Role::agent, options_.node_id};
  auto csr = tls::create_csr(identity);  // a new key, made here; only the CSR leaves
  if (!csr) co_return domain::error("cannot make a key and CSR: " + csr.error());
  v1::RenewCertificateRequest req;
  req.set_node_id(options_.node_id);
  req.set_csr(csr->csr_pem);
  v1::RenewCertificateResponse resp;
  const auto st = co_await target_->call(options_.call_timeout,
                                         [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
                                           stub.async()->RenewCertificate(ctx, &req, &resp, std::move(done));
                                         });
  if (!st.ok()) co_return domain::error("RenewCertificate: " + st.error_message());
  auto ca = tls::read_text(options_.files.ca_file);
  if (!ca) co_return domain::error(ca.error());
  auto info = tls::inspect(resp.certificate());
  // What came back must be for our key and node, from the CA we trust: nothing else is written.
  if (!info || info->identity != identity || !tls::key_matches(resp.certificate(), csr->key_pem) ||
      !tls::signed_by(resp.certificate(), *ca))
    co_return domain::error("the control plane answered with a certificate that is not for " +
                            tls::identity_uri(identity) + ", this key and our CA; nothing was written");
  // Key first, then the certificate (tls::replace_pair: a crash between them is undone at start);
  // gRPC reads them every few seconds, and a read between the renames is corrected by the next.
  if (auto w = tls::replace_pair({options_.files.cert_file, options_.files.key_file}, csr->key_pem, resp.certificate());
      !w)
    co_return w;
  kLog.info("certificate renewed", {{"serial", info->serial},
                                    {"expires", when(info->not_after)},
                                    {"generation", static_cast<int64_t>(resp.generation())},
                                    {"file", options_.files.cert_file}});
  if (co_await async::sleep_for(options_.reload_wait) == async::SleepEnd::cancelled) co_return domain::Status{};
  target_->reconnect();
  co_return domain::Status{};
}

asio::awaitable<void> CertificateRenewal::run() {
  unsigned failures = 0;
  while (true) {
    auto pem = tls::read_text(options_.files.cert_file);
    auto info = pem ? tls::inspect(*pem) : tls::Expected<tls::CertificateInfo>(domain::error(pem.error()));
    std::chrono::milliseconds wait = options_.max_sleep;
    if (!info) {
      kLog.warn("cannot read the certificate to renew it",
                {{"file", options_.files.cert_file}, {"error", info.error()}});
    } else if (const auto now = system_clock::now(); now < tls::renew_at(*info)) {
      const auto due = std::chrono::ceil<std::chrono::milliseconds>(tls::renew_at(*info) - now);
      wait = std::min(due, options_.max_sleep);
      if (failures > 0) kLog.info("certificate renewal done", {{"expires", when(info->not_after)}});
      failures = 0;
    } else if (auto renewed = co_await renew_once(); !renewed) {
      wait = options_.backoff.delay(failures++);
      if (failures == 1 || failures % 10 == 0)
        kLog.warn(
            "certificate renewal failed; retrying",
            {{"error", renewed.error()}, {"expires", when(info->not_after)}, {"delay", wait}, {"failures", failures}});
    } else {
      continue;  // read the new certificate back
    }
    if (co_await async::sleep_for(wait) == async::SleepEnd::cancelled) co_return;
  }
}

}  // namespace mooring::nodeagent
