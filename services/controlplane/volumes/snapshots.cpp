// Snapshots through a controller of the volume's plugin. Each snapshot is its own CSI call and is
// answered on its own (CreateSnapshot is idempotent by name, so a request sent again after a
// failure creates nothing twice); one whose outcome is unknown is undone in the background.
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

// Who may see it is the caller's business (acl::lists): this names the owner and its source.
Snapshot snapshot_of(const ::csi::v1::Snapshot& s, const std::string& plugin_id, const StateStore& store,
                     const std::string& name) {
  std::string ns, source;
  if (const auto* r = store.snapshot_record(plugin_id, s.snapshot_id())) {
    ns = r->ns;
    source = r->source_volume_id;
  } else if (const auto* v = registering_volume(store, plugin_id, s.source_volume_id())) {
    ns = v->ns;
    source = v->id;
  }
  return Snapshot{.id = s.snapshot_id(),
                  .ns = ns,
                  .external_source_volume_id = s.source_volume_id(),
                  .source_volume_id = source,
                  .size_bytes = s.size_bytes(),
                  .create_time = s.creation_time().seconds(),
                  .ready = s.ready_to_use(),
                  .plugin_id = plugin_id,
                  .name = name,
                  .group_snapshot_id = s.group_snapshot_id()};
}

SnapshotRecord record_of(const Snapshot& s) {
  return SnapshotRecord{.plugin_id = s.plugin_id,
                        .id = s.id,
                        .ns = s.ns,
                        .source_volume_id = s.source_volume_id,
                        .external_source_volume_id = s.external_source_volume_id,
                        .name = s.name,
                        .group_snapshot_id = s.group_snapshot_id,
                        .create_time = domain::now()};
}

namespace {

::csi::v1::CreateSnapshotRequest snapshot_request(const SnapshotRequest& w) {
  ::csi::v1::CreateSnapshotRequest csi;
  csi.set_source_volume_id(w.external_id);
  // Namespaced as a created volume's name is: two namespaces asking for "nightly" get two
  // snapshots, and neither is told of the other's (CreateSnapshot is idempotent by name).
  csi.set_name(domain::volume_key(w.ns, w.name));
  put_secrets(csi.mutable_secrets(), w.secrets);
  for (const auto& [k, val] : w.parameters) (*csi.mutable_parameters())[k] = val;
  return csi;
}

}  // namespace

Outcome<SnapshotRequest> VolumeLifecycle::plan_snapshot(SnapshotRequest w, const StringMap& header_secrets) const {
  const auto* v = store_.volume(w.ns, w.volume_id);
  if (!v) return missing_volume(domain::volume_key(w.ns, w.volume_id));
  const auto named = "snapshot " + in_quotes(w.name) + ": ";
  if (v->deleting)
    return conflict(named + "volume " + in_quotes(w.volume_id) + " " + std::string(domain::kBeingDeleted));
  if (w.plugin_id.empty()) w.plugin_id = v->plugin_id;
  if (w.plugin_id != v->plugin_id)
    return invalid(named + "volume " + in_quotes(w.volume_id) + " belongs to plugin " + in_quotes(v->plugin_id) +
                   ", not " + in_quotes(w.plugin_id));
  const auto* p = store_.plugin(w.plugin_id);
  if (p && !p->controllers.empty())
    if (auto no = unsupported(*p, &domain::ControllerInfo::supports_create_delete_snapshot,
                              named + "plugin " + in_quotes(w.plugin_id) + " does not support CREATE_DELETE_SNAPSHOT"))
      return *no;
  w.external_id = v->external_id;
  StringMap merged = v->secrets;
  for (auto& [k, val] : w.secrets) merged[k] = val;
  for (auto& [k, val] : header_secrets) merged[k] = val;
  w.secrets = std::move(merged);
  return w;
}

asio::awaitable<SnapshotsCreated> VolumeLifecycle::create_snapshots(std::vector<SnapshotRequest> planned) {
  SnapshotsCreated out;
  out.asked = planned.size();
  for (const auto& w : planned) {
    auto csi = snapshot_request(w);
    auto res = co_await controller_.create_snapshot(w.plugin_id, domain::volume_key(w.ns, w.volume_id), csi);
    if (!res.ok()) {
      if (res.outcome == csi::Outcome::uncertain)
        tasks_.spawn("negate snapshot " + w.name, negate_snapshot(w.plugin_id, csi));
      out.errors.push_back({w.volume_id, w.name, plugin_failure(res)});
      continue;
    }
    const auto& made = res.response.snapshot();
    auto shown = snapshot_of(made, w.plugin_id, store_, w.name);
    shown.ns = w.ns;
    shown.source_volume_id = w.volume_id;
    Batch batch;
    batch.put(record_of(shown));
    batch.add_event(
        {.topic = "Volume",
         .type = "SnapshotCreated",
         .ns = w.ns,
         .key = w.volume_id,
         .message = "created snapshot " + in_quotes(made.snapshot_id()) + " of volume " + in_quotes(w.volume_id),
         .details = {{"plugin_id", w.plugin_id}, {"snapshot_id", made.snapshot_id()}}});
    if (auto index = store_.commit(std::move(batch)); !index) {
      // Unrecorded, it would count as its source's only while that is registered: an error, so
      // the caller sends it again (the plugin answers the same snapshot by its name).
      out.errors.push_back(
          {w.volume_id, w.name, write_failed("record snapshot " + in_quotes(made.snapshot_id()), index.error())});
      continue;
    }
    out.created.push_back(std::move(shown));
  }
  out.index = store_.index();
  co_return out;
}

asio::awaitable<void> VolumeLifecycle::negate_snapshot(std::string plugin_id,
                                                       ::csi::v1::CreateSnapshotRequest request) {
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    auto made = co_await controller_.create_snapshot(plugin_id, {}, request);
    if (!made.ok())
      co_return made.outcome == csi::Outcome::final_error ? async::Attempt::final_error(made.error)
                                                          : async::Attempt::again(made.error);
    ::csi::v1::DeleteSnapshotRequest del;
    del.set_snapshot_id(made.response.snapshot().snapshot_id());
    *del.mutable_secrets() = request.secrets();
    auto gone = co_await controller_.delete_snapshot(plugin_id, del);
    co_return gone.done() ? async::Attempt::ok() : async::Attempt::again(gone.error);
  };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  if (!result.ok())
    log_.warn("cannot negate an abandoned snapshot; the plugin may hold an unregistered snapshot",
              {{"plugin_id", plugin_id}, {"name", request.name()}, {"error", result.last_error}});
}

asio::awaitable<Outcome<std::uint64_t>> VolumeLifecycle::delete_snapshot(std::string plugin_id, std::string snapshot_id,
                                                                         StringMap secrets, Asker asker) {
  if (!store_.plugin(plugin_id)) co_return missing("plugin", plugin_id);
  if (!asker.acl.is_management()) {
    auto owner = co_await snapshot_owner_at(plugin_id, snapshot_id, secrets);
    if (!owner) co_return owner.error();
    if (!acl::may_use(asker.acl, acl::Use::write, {*owner}))
      co_return denied(asker, acl::Use::write, "deleting this snapshot");
  }
  ::csi::v1::DeleteSnapshotRequest csi;
  csi.set_snapshot_id(snapshot_id);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await controller_.delete_snapshot(plugin_id, csi);
  if (!res.done()) co_return plugin_failure(res);
  const auto* record = store_.snapshot_record(plugin_id, snapshot_id);
  if (!record) co_return store_.index();
  Batch batch;
  batch.add_event(
      {.topic = "Volume",
       .type = "SnapshotDeleted",
       .ns = record->ns,
       .key = record->source_volume_id,
       .message = "deleted snapshot " + in_quotes(snapshot_id) + " of volume " + in_quotes(record->source_volume_id),
       .details = {{"plugin_id", plugin_id}, {"snapshot_id", snapshot_id}}});
  batch.erase_snapshot(plugin_id, snapshot_id);
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("forget deleted snapshot " + in_quotes(snapshot_id), index.error());
  co_return *index;
}

asio::awaitable<Outcome<Page<Snapshot>>> VolumeLifecycle::list_snapshots(std::string plugin_id, PageRequest page,
                                                                         StringMap secrets, Asker asker) {
  if (!store_.plugin(plugin_id)) co_return missing("plugin", plugin_id);
  ::csi::v1::ListSnapshotsRequest csi;
  csi.set_max_entries(page.max_entries);
  csi.set_starting_token(page.token);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await controller_.list_snapshots(plugin_id, csi);
  if (!res.ok()) co_return listing_failure(res, page.token, plugin_id);
  Page<Snapshot> out;
  for (const auto& e : res.response.entries()) {
    auto s = snapshot_of(e.snapshot(), plugin_id, store_);
    if (acl::lists(asker.acl, owner_of(s), asker.ns)) out.items.push_back(std::move(s));
  }
  out.next_token = res.response.next_token();
  co_return out;
}

}  // namespace mooring::controlplane::volumes
