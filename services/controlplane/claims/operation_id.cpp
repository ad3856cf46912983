#include "services/controlplane/claims/operation_id.hpp"

namespace mooring::controlplane {

namespace {

// "<rpc> <volume key> <allocation id> <claim create time, Unix ms>": readable in the agent's
// debug log. Volume keys and allocation ids are validated ids (no spaces), so the parts cannot
// run into each other. The claim's create_time is what tells one claim of an allocation from a
// later one after a drop (the same allocation may claim the volume again).
std::string operation_id(const char* rpc, const std::string& volume_key, const std::string& allocation_id,
                         const domain::Claim& claim) {
  return std::string(rpc) + " " + volume_key + " " + allocation_id + " " +
         std::to_string(domain::to_unix_ms(claim.create_time));
}

}  // namespace

std::string publish_operation_id(const std::string& volume_key, const std::string& allocation_id,
                                 const domain::Claim& claim) {
  return operation_id("ControllerPublishVolume", volume_key, allocation_id, claim);
}

std::string unpublish_operation_id(const std::string& volume_key, const std::string& allocation_id,
                                   const domain::Claim& claim) {
  return operation_id("ControllerUnpublishVolume", volume_key, allocation_id, claim);
}

}  // namespace mooring::controlplane
