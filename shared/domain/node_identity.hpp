// Domain: what the control plane holds about a node's identity, kept apart from the node record
// so that a purge does not forget it: the certificate it accepts for the node (by serial), a
// renewal not used yet, the certificate a renewal replaced (accepted for a short overlap), the
// time before which every certificate of the node is refused (an operator's purge), and the
// one-time introduction tokens made for enrolling the node (their SecretIDs only as SHA-256).
// The rules that read and move it are services/controlplane/nodes/node_identity.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/domain/time.hpp"

namespace mooring::domain {

// One certificate of the node, as its serial tells it apart; unset when `serial` is empty.
struct NodeCertificate {
  std::string serial;  // upper-case hex (tls::CertificateInfo::serial)
  std::string key_sha256;
  Time issued{};
  Time expires{};
  bool empty() const { return serial.empty(); }
  bool operator==(const NodeCertificate&) const = default;
};

// A one-time introduction token: enrolls this node once, before it expires.
struct Introduction {
  std::string accessor_id;
  std::string secret_hash;  // hex SHA-256 of the SecretID; never in API output
  std::string created_by;   // the ACL token's name ("" with ACLs off)
  Time create_time{};
  Time expiration_time{};
  Time used_time{};  // unset: not used yet
  bool operator==(const Introduction&) const = default;
};

struct NodeIdentity {
  std::string node_id;
  // Moves with every certificate issued for the node and every revocation: events and the API
  // name it, so "which identity is this" has a short answer.
  std::uint64_t generation = 0;
  // Pinned by enrollment and renewal: with it set, only this certificate (and `pending`, and
  // `previous` until `previous_until`) acts for the node. Unset: the node's certificates were made
  // outside enrollment (`mooring tls cert create`) and are accepted unless issued before
  // `revoked_before`.
  NodeCertificate current;
  NodeCertificate pending;   // a renewal signed but not yet seen in a call; becomes `current` then
  NodeCertificate previous;  // the certificate a renewal replaced
  Time previous_until{};
  Time revoked_before{};  // an operator's purge: certificates issued before this are refused
  std::vector<Introduction> introductions;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const NodeIdentity&) const = default;
};

}  // namespace mooring::domain
