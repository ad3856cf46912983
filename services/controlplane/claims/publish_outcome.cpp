#include "services/controlplane/claims/publish_outcome.hpp"

#include "services/controlplane/claims/claim_rules.hpp"

namespace mooring::controlplane {

bool publish_pending(const domain::Claim& claim) {
  return claim.state == domain::ClaimState::taken && claim.last_error == kPublishPending;
}

const domain::Claim* release_ahead_on_node(const domain::Volume& volume, const std::string& node_id,
                                           const std::string& allocation_id, bool read_only) {
  for (const auto& [alloc, c] : volume.claims) {
    if (alloc == allocation_id || c.node_id != node_id || !domain::is_past(c.state)) continue;
    if (c.controller_publish == domain::ControllerPublish::not_needed) continue;
    if (c.state == domain::ClaimState::node_detached) return &c;
    const bool theirs_read_only = c.mode == domain::ClaimMode::read;
    if (domain::is_before(c.state, domain::ClaimState::node_detached) && theirs_read_only != read_only) return &c;
  }
  return nullptr;
}

PublishFailure classify_publish_failure(grpc::StatusCode code, bool sent, bool retry_of_pending, bool unheard) {
  const auto outcome = csi::classify(csi::Rpc::ControllerPublishVolume, code);
  // Nothing sent, or a final error, is certain only on the first attempt: an earlier attempt may
  // have published (the control plane was killed before it recorded the answer), so a retry
  // that fails in any way leaves the claim for release with ControllerUnpublish. Found by the
  // kill -9 test: a retry that found no healthy controller dropped a published claim.
  const bool final_first = outcome == csi::Outcome::final_error && !retry_of_pending;
  const bool nothing_sent_first = !sent && !retry_of_pending;
  // A retry no controller's agent heard while one's node is up (its agent restarting after a
  // failover): releasing would unpublish and then publish again under a new claim's id, which the
  // plugin hears twice. The claim keeps waiting and its publish goes again, the same call. A
  // first attempt is never kept: freed when surely not sent, released otherwise, as before.
  const bool kept = retry_of_pending && unheard;
  return {
      .outcome = outcome, .certain = nothing_sent_first || final_first, .rejected = sent && final_first, .kept = kept};
}

void record_publish(domain::Volume& volume, const std::string& allocation_id,
                    std::map<std::string, std::string> publish_context, domain::Time now) {
  auto& claim = volume.claims.at(allocation_id);
  claim.publish_context = std::move(publish_context);
  claim.last_error.clear();
  claim.update_time = now;
}

void record_publish_failure(domain::Volume& volume, const std::string& allocation_id, const PublishFailure& failure,
                            std::string error, domain::Time now) {
  if (failure.certain) {
    free_claim(volume, allocation_id);
    return;
  }
  (void)advance_claim(volume, allocation_id, domain::ClaimState::unpublishing, now);
  (void)record_release_failure(volume, allocation_id, std::move(error), domain::Time{}, now);
}

}  // namespace mooring::controlplane
