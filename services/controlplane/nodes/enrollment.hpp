// Nodes room: node enrollment (as kubelet TLS bootstrapping), the rule alone. A node makes its
// own key and sends a CSR; the control plane signs a certificate for spiffe://mooring/node/<id>
// so the CA key never goes to the nodes. Who may have that signed:
//   - the caller shows a one-time introduction token made for this node (checked before, by
//     check_introduction in node_identity.hpp), or a management token;
//   - the CSR asks for nothing but that identity (no other URI, DNS, IP or other SAN);
//   - with an introduction token, a node that is live, or that holds a certificate that has not
//     expired (the one enrollment or renewal pinned, or the one it last called with), is refused:
//     a running node renews its own certificate over mutual TLS, and a down one is purged first;
//   - a management token may enroll any node (a deliberate re-key).
// Pure: the API reads the CSR, the node and its identity, then asks. See docs/node-enrollment.md.
#pragma once

#include <chrono>
#include <string>

#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/certificates.hpp"

namespace mooring::controlplane {

struct EnrollmentRequest {
  std::string node_id;      // validated by the caller (path id and tls::is_valid_node_id)
  tls::CsrInfo csr;         // a CSR tls::inspect_csr accepted
  bool management = false;  // a management token asks (else an introduction token did)
};

// What enrollment and renewal ask the CA to sign for a node: its identity and nothing else (no
// DNS or IP names: the control plane checks agents by the URI), valid for `validity`.
tls::CertRequest node_certificate_request(const std::string& node_id, std::chrono::seconds validity);
// A signed certificate as the node's identity record keeps it.
domain::NodeCertificate certificate_of(const tls::CertificateInfo& info);

// nullopt: the CSR asks for nothing but the node's identity (enrollment and renewal alike);
// otherwise `invalid`, naming the name it asks for.
Verdict check_csr_names(const std::string& node_id, const tls::CsrInfo& csr);

// nullopt: sign it. `invalid` for a CSR asking for more than the node's identity; `conflict`
// (naming the node and why) for a live node or an unexpired certificate, unless management.
Verdict check_enrollment(const domain::Node* node, const domain::NodeIdentity* identity,
                         const EnrollmentRequest& request, domain::Time now);

}  // namespace mooring::controlplane
