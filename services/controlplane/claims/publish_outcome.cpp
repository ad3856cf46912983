#include "services/controlplane/claims/publish_outcome.hpp"

#include "services/controlplane/claims/claim_rules.hpp"

namespace mooring::controlplane {

bool publish_pending(const domain::Claim& claim) {
  return claim.state == domain::ClaimState::taken && claim.last_error == kPublishPending;
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
