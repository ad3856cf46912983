// Volumes room: claims as objects (Nomad 1.10's /v1/volumes/claims). A claim is named by its
// volume and allocation ("<volume id>:<allocation id>", neither of which may hold a ':') in the
// volume's namespace, and shown with the step its release is at: the claim GC's own next decision
// (gc/release_rules.hpp), so what the list says is what the GC will do.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/domain/volume.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::volumes {

struct ClaimView {
  std::string ns;
  std::string volume_id;
  std::string plugin_id;
  domain::Claim claim;
  std::string release_step;    // "in-use" while taken; then the GC's next step ("detach-node", ...)
  std::string release_reason;  // why, in the GC's words
};

struct ClaimFilter {
  std::string ns;  // "" (or "*"): every namespace
  std::string volume_id, node_id, allocation_id;
  std::optional<domain::ClaimState> state;
};

std::string claim_id(std::string_view volume_id, std::string_view allocation_id);
struct ClaimRef {
  std::string volume_id, allocation_id;
};
// nullopt when `id` is not "<volume id>:<allocation id>" with two valid ids; `why` says what is wrong.
std::optional<ClaimRef> parse_claim_id(std::string_view id, std::string& why);

// Every claim the filter keeps, in volume key then allocation order.
std::vector<ClaimView> list_claims(const StateStore& store, const ClaimFilter& filter);
// One claim of the volume `key` (domain::volume_key), or nullopt.
std::optional<ClaimView> find_claim(const StateStore& store, const std::string& key, const std::string& allocation_id);

}  // namespace mooring::controlplane::volumes
