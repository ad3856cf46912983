// Nodes room: a node's identity over its life, the rules alone (pure; the callers read the store
// and commit). A node agent acts with a certificate for spiffe://mooring/node/<id>; which of the
// node's certificates may act is kept in its domain::NodeIdentity, apart from the node record:
//   - enrollment pins the certificate it signs: from then on only that one (by serial) acts, so a
//     re-enrollment locks the previous key out at once;
//   - a renewal (the agent, over its mutual-TLS channel) is held as pending, and becomes the
//     current one with the first call made with it; the one it replaces keeps acting for
//     kRenewalOverlap, so the calls the agent has in flight on its old connection are not cut;
//   - an operator's purge refuses every certificate of the node issued before it (certificates
//     made outside enrollment too); a later enrollment pins a new one;
//   - no certificate acts past its notAfter, even on a connection opened before;
//   - with no record (never enrolled, renewed or purged), any certificate from the CA naming the
//     node acts, as before node identities were kept.
// Introduction tokens: one-time, bound to one node, with a TTL, made by node:write; enrollment
// needs one (or a management token). See docs/node-enrollment.md and docs/security.md.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "shared/domain/node_identity.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

// How long the certificate a renewal replaced still acts once the new one is in use.
inline constexpr std::chrono::minutes kRenewalOverlap{2};
// Introduction tokens live this long unless asked otherwise, and at most kMaxIntroductionTtl.
inline constexpr std::chrono::hours kDefaultIntroductionTtl{1};
inline constexpr std::chrono::hours kMaxIntroductionTtl{24 * 7};

// nullopt: the certificate may act for the node. Otherwise why not, naming the node and what
// replaced or revoked the certificate (the agent's log and the refusal say it).
std::optional<std::string> refuse_certificate(const std::string& node_id, const domain::NodeIdentity* identity,
                                              const domain::NodeCertificate& presented, domain::Time now);

// A call made with the pending renewal: it becomes the current certificate and the one it
// replaces acts until now + kRenewalOverlap. False when `serial` is not the pending one.
bool adopt_renewal(domain::NodeIdentity& identity, const std::string& serial, domain::Time now);

// Enrollment signed `cert`: it is the only certificate of the node that acts from now on.
void pin_enrolled(domain::NodeIdentity& identity, domain::NodeCertificate cert);
// A renewal signed `cert`: pending until a call is made with it (adopt_renewal).
void hold_renewal(domain::NodeIdentity& identity, domain::NodeCertificate cert);
// An operator purged the node: every certificate of it issued before `now` is refused.
void revoke(domain::NodeIdentity& identity, domain::Time now);

// The record of `node_id` to change: a copy of the stored one, or a new one.
domain::NodeIdentity identity_of(const domain::NodeIdentity* stored, const std::string& node_id);

// ---- introduction tokens ----
// The TTL asked for ("30m"; empty: the default), or why it cannot be (not a duration, not
// positive, longer than kMaxIntroductionTtl).
domain::Expected<std::chrono::milliseconds> introduction_ttl(const std::string& text);
// Adds `intro` and drops the introductions that have expired (used or not): a record never grows
// past the tokens still alive.
void add_introduction(domain::NodeIdentity& identity, domain::Introduction intro, domain::Time now);

// Every commit of an introduction or an enrollment also prunes the other records (expired
// tokens are never kept, so the table and check_introduction's scan stay as small as the tokens
// alive): `identity` without its expired introductions. Pruned::remove for a record that holds
// nothing else (a node that never enrolled and was never purged): it is erased.
enum class Pruned { unchanged, changed, remove };
Pruned prune_introductions(domain::NodeIdentity& identity, domain::Time now);

// Whether the introduction token whose SecretID hashes to `secret_hash` may enroll `node_id`.
struct IntroductionCheck {
  std::size_t index = 0;  // the token's position in the node's introductions (status 0)
  unsigned status = 0;    // 0: it may; 401 (unknown, expired, used) or 403 (another node's)
  std::string why;
};
IntroductionCheck check_introduction(const std::map<std::string, domain::NodeIdentity>& identities,
                                     const std::string& node_id, const std::string& secret_hash, domain::Time now);

}  // namespace mooring::controlplane
