// Nodes room: node enrollment (as kubelet TLS bootstrapping), the rule alone. A node makes its
// own key and sends a CSR; the control plane signs a certificate for spiffe://mooring/node/<id>
// so the CA key never goes to the nodes. Who may have that signed:
//   - the CSR asks for nothing but that identity (no other URI, DNS, IP or other SAN);
//   - a node that is not live (unknown, or down) may enroll with any key;
//   - a live node only with the key its current certificate holds (a renewal), unless the
//     caller holds a management token (a deliberate re-key).
// Pure: the API reads the CSR and the node, then asks. See docs/node-enrollment.md.
#pragma once

#include <string>

#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/node.hpp"
#include "shared/tls/certificates.hpp"

namespace mooring::controlplane {

struct EnrollmentRequest {
  std::string node_id;  // validated by the caller (path id and tls::is_valid_node_id)
  tls::CsrInfo csr;     // a CSR tls::inspect_csr accepted
  bool management = false;
};

// nullopt: sign it. `invalid` for a CSR asking for more than the node's identity; `conflict`
// (naming the node) for a live node and another key.
Verdict check_enrollment(const domain::Node* node, const EnrollmentRequest& request);

}  // namespace mooring::controlplane
