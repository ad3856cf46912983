// Whose the objects a plugin holds are (acl/plugin_objects.hpp has what the owner may do): a
// backend volume is the namespace's whose volume registers it; a snapshot is its record's
// namespace, else the registered source volume's (snapshots taken before records existed, or
// outside Mooring); anything else is nobody's, the cluster's. Refusals name the right, never the
// object or its owner.
#include <nlohmann/json.hpp>

#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

const domain::Volume* registering_volume(const StateStore& store, const std::string& plugin_id,
                                         const std::string& external_id) {
  if (external_id.empty()) return nullptr;
  domain::Volume backend;
  backend.plugin_id = plugin_id;
  backend.external_id = external_id;
  // By the plugin's provider, and as a volume registered before the provider was known is keyed.
  const auto* p = store.plugin(plugin_id);
  for (const auto& provider : {p ? p->provider : std::string(), std::string()}) {
    backend.provider = provider;
    if (const auto& keys = store.volume_keys_with_backend(backend); !keys.empty()) return store.volume(*keys.begin());
  }
  return nullptr;
}

acl::Owner snapshot_owner(const StateStore& store, const std::string& plugin_id, const std::string& snapshot_id,
                          const std::string& external_source_volume_id) {
  if (const auto* r = store.snapshot_record(plugin_id, snapshot_id)) return r->ns;
  if (const auto* v = registering_volume(store, plugin_id, external_source_volume_id)) return v->ns;
  return std::nullopt;
}

Failure denied(const Asker& asker, acl::Use use, std::string_view what) {
  return {Failure::Kind::forbidden, "permission denied: token " + nlohmann::json(asker.token).dump() + " lacks " +
                                        acl::use_need(use) + " for " + std::string(what)};
}

asio::awaitable<Outcome<acl::Owner>> VolumeLifecycle::snapshot_owner_at(std::string plugin_id, std::string snapshot_id,
                                                                        StringMap secrets) {
  if (const auto* r = store_.snapshot_record(plugin_id, snapshot_id)) co_return acl::Owner(r->ns);
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return acl::Owner();
  // GET_SNAPSHOT (CSI 1.12) reads the one snapshot; NOT_FOUND is an answer there: nobody's.
  if (const auto get = domain::controller_supports(*p, &domain::ControllerInfo::supports_get_snapshot); get && *get) {
    ::csi::v1::GetSnapshotRequest one;
    one.set_snapshot_id(snapshot_id);
    put_secrets(one.mutable_secrets(), secrets);
    auto res = co_await controller_.get_snapshot(plugin_id, std::move(one));
    if (res.status.error_code() == grpc::StatusCode::NOT_FOUND && !res.no_target) co_return acl::Owner();
    if (!res.ok()) co_return plugin_failure(res);
    const auto& s = res.response.snapshot();
    co_return snapshot_owner(store_, plugin_id, s.snapshot_id(), s.source_volume_id());
  }
  // A plugin that cannot list has no way to say whose the snapshot is: nobody's. One whose
  // capability is not known yet (its agent is starting) might: retry shortly, not a refusal.
  if (auto cannot = unsupported(*p, &domain::ControllerInfo::supports_list_snapshots, "")) {
    if (cannot->kind == Failure::Kind::unavailable) co_return *cannot;
    co_return acl::Owner();
  }
  ::csi::v1::ListSnapshotsRequest csi;
  csi.set_snapshot_id(snapshot_id);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await controller_.list_snapshots(plugin_id, csi);
  if (!res.ok()) co_return plugin_failure(res);
  if (res.response.entries().empty()) co_return acl::Owner();
  const auto& s = res.response.entries(0).snapshot();
  co_return snapshot_owner(store_, plugin_id, s.snapshot_id(), s.source_volume_id());
}

}  // namespace mooring::controlplane::volumes
