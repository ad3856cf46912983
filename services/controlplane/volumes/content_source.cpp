// What a create fills its volume from. CloneID and SnapshotID are ids a plugin holds, so each is
// resolved to what Mooring knows of it and the asker must be able to read that (issue 40: a
// namespace token cloned another namespace's volume by its external id):
// - CloneID: a volume of the new volume's namespace by its id (the plugin gets its external id),
//   else the volume that registers that external id, in whatever namespace; the id here wins,
//   since Mooring ids are what the API shows. Reading it needs csi-read-volume in its namespace.
// - SnapshotID: a snapshot recorded in the new volume's namespace under that Name, else the
//   snapshot with that id (its record, or the registered volume it was taken from); the name
//   wins, as the id here does for CloneID. csi-read-volume in its namespace.
// - An id nothing here names is storage of unknown tenancy: operator:write.
// The refusal names the right and the field, never what the id turned out to name.
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

struct Resolved {
  std::string plugin_id;  // the id the plugin gets
  acl::Owner owner;
};

Outcome<Resolved> clone_of(const StateStore& store, const domain::Volume& v) {
  if (const domain::Volume* here = store.volume(v.ns, v.clone_id)) {
    if (here->plugin_id != v.plugin_id)
      return invalid("volume " + in_quotes(v.id) + ": CloneID " + in_quotes(v.clone_id) + " is a volume of plugin " +
                     in_quotes(here->plugin_id) + ", not of " + in_quotes(v.plugin_id) +
                     "; a clone is made by the plugin that holds its source");
    return Resolved{here->external_id, v.ns};
  }
  if (const domain::Volume* registered = registering_volume(store, v.plugin_id, v.clone_id))
    return Resolved{v.clone_id, registered->ns};
  return Resolved{v.clone_id, std::nullopt};
}

// The snapshot recorded in `ns` under `name` for the plugin, or null.
const SnapshotRecord* snapshot_named(const StateStore& store, const std::string& plugin_id, const std::string& ns,
                                     const std::string& name) {
  for (const auto& [key, r] : store.snapshot_records())
    if (r.plugin_id == plugin_id && r.ns == ns && r.name == name) return &r;
  return nullptr;
}

}  // namespace

asio::awaitable<Outcome<ContentSource>> VolumeLifecycle::content_source(domain::Volume v, Asker asker) {
  ContentSource out;
  const auto of_volume = " of volume " + in_quotes(v.id);
  if (!v.clone_id.empty()) {
    auto clone = clone_of(store_, v);
    if (!clone) co_return clone.error();
    if (!acl::may_use(asker.acl, acl::Use::read, {clone->owner}))
      co_return denied(asker, acl::Use::read, "the volume CloneID" + of_volume + " names");
    out.clone_external_id = clone->plugin_id;
  }
  if (!v.snapshot_id.empty()) {
    acl::Owner owner;
    if (const auto* named = snapshot_named(store_, v.plugin_id, v.ns, v.snapshot_id)) {
      out.snapshot_id = named->id;
      owner = named->ns;
    } else {
      out.snapshot_id = v.snapshot_id;
      if (!asker.acl.is_management()) {  // management reads anything: no need to ask the plugin
        auto found = co_await snapshot_owner_at(v.plugin_id, v.snapshot_id, v.secrets);
        if (!found) co_return found.error();
        owner = *found;
      }
    }
    if (!acl::may_use(asker.acl, acl::Use::read, {owner}))
      co_return denied(asker, acl::Use::read, "the snapshot SnapshotID" + of_volume + " names");
  }
  co_return out;
}

}  // namespace mooring::controlplane::volumes
