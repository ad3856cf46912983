#include "services/controlplane/volumes/volume_view.hpp"

#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/state/state_store.hpp"

namespace mooring::controlplane::volumes {

domain::Volume decorated(const domain::Volume& v, const StateStore& store) {
  domain::Volume out = v;
  const domain::Plugin* p = store.plugin(v.plugin_id);
  if (p) {
    out.controller_required = p->controller_required;
    out.controllers_healthy = p->controllers_healthy;
    out.controllers_expected = p->controllers_expected;
    out.nodes_healthy = p->nodes_healthy;
    out.nodes_expected = p->nodes_expected;
  }
  out.schedulable = !check_schedulable(v, p).has_value();
  return out;
}

}  // namespace mooring::controlplane::volumes
