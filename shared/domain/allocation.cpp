// Allocation rules shared by the control plane (claims, placement) and the node agent (task env).
#include "shared/domain/allocation.hpp"

#include "shared/domain/ids.hpp"

namespace mooring::domain {

std::string claimed_volume_id(const VolumeRequest& request, int alloc_index) {
  return request.per_alloc ? per_alloc_volume_id(request.source, alloc_index) : request.source;
}

std::string claimed_volume_key(const Allocation& alloc, const VolumeRequest& request) {
  return volume_key(alloc.ns, claimed_volume_id(request, alloc.index));
}

std::string volume_env_var(std::string_view request_name) {
  std::string out = "MOORING_VOLUME_";
  out.reserve(out.size() + request_name.size());
  for (char c : request_name) {
    if (c >= 'a' && c <= 'z') {
      out += static_cast<char>(c - 'a' + 'A');
    } else if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
      out += c;
    } else {
      out += '_';
    }
  }
  return out;
}

ClaimMode claim_mode(const VolumeRequest& request) {
  return request.read_only || is_read_only(request.access_mode) ? ClaimMode::read : ClaimMode::write;
}

bool is_terminal(const Allocation& alloc) { return is_terminal(alloc.client_status); }

}  // namespace mooring::domain
