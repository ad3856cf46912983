// Volume stats on demand (GET /v1/volume/csi/:id?stats=refresh): every node with a taken claim
// polls NodeGetVolumeStats now, and the answers are recorded as a heartbeat's reports are.
#include <set>

#include "services/controlplane/claims/volume_health.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

asio::awaitable<Outcome<std::uint64_t>> VolumeLifecycle::refresh_stats(std::string key) {
  const domain::Volume* v = store_.volume(key);
  if (!v) co_return missing_volume(key);
  std::set<std::string> nodes;
  for (const auto& [alloc, c] : v->claims)
    if (c.state == domain::ClaimState::taken) nodes.insert(c.node_id);
  std::uint64_t index = store_.index();
  for (const auto& node : nodes) {
    v1::NodeVolumeStatsRequest req;
    req.set_volume_id(key);
    auto r = co_await controller_.node_volume_stats(node, std::move(req));
    if (!r.ok()) {
      // The last report stands; the read shows its UpdateTime.
      log_.warn("volume stats refresh failed on a node", {{"volume_id", key}, {"node_id", node}, {"error", r.error}});
      continue;
    }
    std::vector<domain::VolumeStatsReport> reports;
    for (const auto& s : r.response.stats())
      if (s.volume_id() == key) reports.push_back(domain::from_proto(s));
    // Planned against the state now: claims may have moved while the node answered.
    auto change = plan_volume_stats(node, reports, [this](const std::string& k) { return store_.volume(k); });
    if (change.empty()) continue;
    Batch batch;
    for (auto& changed : change.volumes) batch.put(std::move(changed));
    for (auto& e : change.events) batch.add_event(std::move(e));
    auto committed = store_.commit(std::move(batch));
    if (!committed) co_return write_failed("record stats of volume " + in_quotes(key), committed.error());
    index = *committed;
  }
  co_return index;
}

}  // namespace mooring::controlplane::volumes
