#include "services/controlplane/nodes/node_identity.hpp"

#include <algorithm>

#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::format_time;
using domain::in_quotes;

namespace {

std::string generation_text(const domain::NodeIdentity& id) { return "generation " + std::to_string(id.generation); }

}  // namespace

std::optional<std::string> refuse_certificate(const std::string& node_id, const domain::NodeIdentity* identity,
                                              const domain::NodeCertificate& presented, domain::Time now) {
  const std::string who = "node " + in_quotes(node_id);
  const std::string cert = "certificate " + presented.serial + " of " + who;
  // A connection opened before the certificate expired would otherwise keep acting with it.
  if (domain::is_set(presented.expires) && presented.expires <= now)
    return cert + " expired at " + format_time(presented.expires) +
           "; the agent renews it before then, or enroll the node again";
  if (!identity) return std::nullopt;
  if (!identity->current.empty()) {
    const auto& s = presented.serial;
    if (s == identity->current.serial || (!identity->pending.empty() && s == identity->pending.serial))
      return std::nullopt;
    if (!identity->previous.empty() && s == identity->previous.serial) {
      if (now < identity->previous_until) return std::nullopt;
      return cert + " was replaced by its renewal (" + generation_text(*identity) + ") and stopped acting at " +
             format_time(identity->previous_until);
    }
    return cert + " no longer acts: the node's identity is " + generation_text(*identity) + ", certificate " +
           identity->current.serial + " issued " + format_time(identity->current.issued) +
           " (it was enrolled again); enroll the node again to act for it";
  }
  if (domain::is_set(identity->revoked_before) && presented.issued < identity->revoked_before)
    return cert + " was issued " + format_time(presented.issued) + ", before the node was purged at " +
           format_time(identity->revoked_before) +
           "; certificates from before the purge no longer act: enroll the "
           "node again";
  return std::nullopt;
}

bool adopt_renewal(domain::NodeIdentity& identity, const std::string& serial, domain::Time now) {
  if (identity.pending.empty() || serial != identity.pending.serial) return false;
  identity.previous = std::move(identity.current);
  identity.previous_until = now + std::chrono::duration_cast<domain::Duration>(kRenewalOverlap);
  identity.current = std::move(identity.pending);
  identity.pending = {};
  return true;
}

void pin_enrolled(domain::NodeIdentity& identity, domain::NodeCertificate cert) {
  identity.current = std::move(cert);
  identity.pending = {};
  identity.previous = {};
  identity.previous_until = {};
  identity.revoked_before = {};  // the pinned serial decides from now on
  ++identity.generation;
}

void hold_renewal(domain::NodeIdentity& identity, domain::NodeCertificate cert) {
  identity.pending = std::move(cert);
  ++identity.generation;
}

void revoke(domain::NodeIdentity& identity, domain::Time now) {
  identity.current = {};
  identity.pending = {};
  identity.previous = {};
  identity.previous_until = {};
  identity.revoked_before = now;
  ++identity.generation;
}

domain::NodeIdentity identity_of(const domain::NodeIdentity* stored, const std::string& node_id) {
  if (stored) return *stored;
  domain::NodeIdentity fresh;
  fresh.node_id = node_id;
  return fresh;
}

domain::Expected<std::chrono::milliseconds> introduction_ttl(const std::string& text) {
  if (text.empty()) return std::chrono::duration_cast<std::chrono::milliseconds>(kDefaultIntroductionTtl);
  auto ttl = domain::parse_duration(text);
  if (!ttl) return domain::error("field \"TTL\": " + ttl.error());
  if (ttl->count() <= 0) return domain::error("field \"TTL\": must be positive, got \"" + text + "\"");
  if (*ttl > kMaxIntroductionTtl)
    return domain::error("field \"TTL\": at most " + domain::format_duration(kMaxIntroductionTtl) + ", got \"" + text +
                         "\" (an introduction token is for joining a node now, not a standing credential)");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*ttl);
}

void add_introduction(domain::NodeIdentity& identity, domain::Introduction intro, domain::Time now) {
  prune_introductions(identity, now);
  identity.introductions.push_back(std::move(intro));
}

Pruned prune_introductions(domain::NodeIdentity& identity, domain::Time now) {
  const auto dropped =
      std::erase_if(identity.introductions, [&](const domain::Introduction& i) { return i.expiration_time <= now; });
  const bool holds_more = !identity.current.empty() || !identity.pending.empty() || !identity.previous.empty() ||
                          domain::is_set(identity.revoked_before) || !identity.introductions.empty();
  if (!holds_more) return Pruned::remove;
  return dropped > 0 ? Pruned::changed : Pruned::unchanged;
}

IntroductionCheck check_introduction(const std::map<std::string, domain::NodeIdentity>& identities,
                                     const std::string& node_id, const std::string& secret_hash, domain::Time now) {
  for (const auto& [holder, identity] : identities) {
    for (std::size_t i = 0; i < identity.introductions.size(); ++i) {
      const auto& intro = identity.introductions[i];
      if (intro.secret_hash != secret_hash) continue;
      IntroductionCheck out{.index = i};
      const std::string token = "introduction token " + in_quotes(intro.accessor_id);
      if (holder != node_id) {
        out.status = 403;
        out.why = token + " was made for node " + in_quotes(holder) + ", not node " + in_quotes(node_id);
      } else if (intro.expiration_time <= now) {
        out.status = 401;
        out.why = token + " for node " + in_quotes(node_id) + " expired at " + format_time(intro.expiration_time) +
                  "; make a new one (mooring node intro create)";
      } else if (domain::is_set(intro.used_time)) {
        out.status = 401;
        out.why = token + " for node " + in_quotes(node_id) + " was used at " + format_time(intro.used_time) +
                  "; it enrolls once: make a new one (mooring node intro create)";
      }
      return out;
    }
  }
  return {.status = 401,
          .why = "introduction token not found (never made, or expired and dropped); make one for node " +
                 in_quotes(node_id) + " with mooring node intro create"};
}

}  // namespace mooring::controlplane
