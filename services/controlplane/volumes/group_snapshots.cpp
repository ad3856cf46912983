// Group snapshots (CSI GroupController): several volumes of one namespace and one plugin
// snapshotted together through a controller that holds every member volume's lock. CSI has no
// group listing: the plugin's snapshots carry their group's id, so the groups are read from
// ListSnapshots, and a delete names the members the plugin lists. A create whose outcome is
// unknown is undone in the background, as a single snapshot's is.
#include <algorithm>
#include <map>
#include <set>

#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

// A listing longer than this many pages is a plugin that never ends its pages.
constexpr int kMaxPages = 1000;

GroupSnapshot group_of(const ::csi::v1::VolumeGroupSnapshot& g, const std::string& plugin_id, const StateStore& store,
                       const std::string& name = {}) {
  GroupSnapshot out{.id = g.group_snapshot_id(),
                    .name = name,
                    .plugin_id = plugin_id,
                    .create_time = g.creation_time().seconds(),
                    .ready = g.ready_to_use()};
  for (const auto& s : g.snapshots()) out.snapshots.push_back(snapshot_of(s, plugin_id, store));
  return out;
}

std::vector<acl::Owner> owners(const GroupSnapshot& g) {
  std::vector<acl::Owner> out;
  for (const auto& s : g.snapshots) out.push_back(owner_of(s));
  return out;
}

// The members Mooring recorded in the group (also those its plugin no longer lists).
std::vector<const SnapshotRecord*> recorded_members(const StateStore& store, const std::string& plugin_id,
                                                    const std::string& group_id) {
  std::vector<const SnapshotRecord*> out;
  for (const auto& [key, r] : store.snapshot_records())
    if (r.plugin_id == plugin_id && r.group_snapshot_id == group_id) out.push_back(&r);
  return out;
}

// Why `named` is not exactly the group's members (those the plugin lists; one Mooring recorded
// that the plugin no longer lists may be named too), or nullopt. Checked after the asker's
// right to every member, so the members named here are the asker's to know.
std::optional<std::string> not_the_members(const std::string& group_id, const std::vector<std::string>& named,
                                           const std::vector<std::string>& listed,
                                           const std::vector<const SnapshotRecord*>& recorded) {
  std::set<std::string> members(listed.begin(), listed.end());
  for (const auto* r : recorded) members.insert(r->id);
  const std::set<std::string> given(named.begin(), named.end());
  std::string strangers, left_out;
  for (const auto& id : given)
    if (!members.count(id)) strangers += (strangers.empty() ? "" : ", ") + in_quotes(id);
  for (const auto& id : listed)
    if (!given.count(id)) left_out += (left_out.empty() ? "" : ", ") + in_quotes(id);
  const auto group = "group snapshot " + in_quotes(group_id) + ": query parameter \"snapshot_ids\" ";
  if (!strangers.empty()) return group + "names " + strangers + ", not members of the group";
  if (!left_out.empty()) return group + "leaves out its members " + left_out;
  return std::nullopt;
}

}  // namespace

Outcome<GroupSnapshotRequest> VolumeLifecycle::plan_group_snapshot(GroupSnapshotRequest w,
                                                                   const StringMap& header_secrets) const {
  const auto named = "group snapshot " + in_quotes(w.name) + ": ";
  if (w.volume_ids.empty()) return invalid(named + "field \"SourceVolumeIDs\" must name at least one volume");
  std::set<std::string> seen;
  StringMap merged;
  for (const auto& id : w.volume_ids) {
    if (!seen.insert(id).second) return invalid(named + "volume " + in_quotes(id) + " is named twice");
    const auto* v = store_.volume(w.ns, id);
    if (!v) return invalid(named + "volume " + in_quotes(id) + " not found" + domain::in_namespace(w.ns));
    if (v->deleting) return conflict(named + "volume " + in_quotes(id) + " " + std::string(domain::kBeingDeleted));
    if (w.plugin_id.empty()) w.plugin_id = v->plugin_id;
    if (v->plugin_id != w.plugin_id)
      return invalid(named + "volume " + in_quotes(id) + " belongs to plugin " + in_quotes(v->plugin_id) + ", not " +
                     in_quotes(w.plugin_id) + "; a group snapshot takes the volumes of one plugin");
    w.external_ids.push_back(v->external_id);
    w.volume_keys.push_back(domain::volume_key(w.ns, id));
    for (const auto& [k, val] : v->secrets) merged[k] = val;
  }
  const auto* p = store_.plugin(w.plugin_id);
  if (!p) return invalid(named + "no CSI plugin named " + in_quotes(w.plugin_id));
  if (auto no = unsupported(*p, &domain::ControllerInfo::supports_group_snapshot,
                            named + "plugin " + in_quotes(w.plugin_id) +
                                " has no controller that supports group snapshots (GROUP_CONTROLLER_SERVICE with "
                                "CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)"))
    return *no;
  for (const auto& [k, val] : w.secrets) merged[k] = val;
  for (const auto& [k, val] : header_secrets) merged[k] = val;
  w.secrets = std::move(merged);
  return w;
}

asio::awaitable<Outcome<GroupSnapshot>> VolumeLifecycle::create_group_snapshot(GroupSnapshotRequest w) {
  ::csi::v1::CreateVolumeGroupSnapshotRequest csi;
  csi.set_name(domain::volume_key(w.ns, w.name));  // namespaced, as a single snapshot's name
  for (const auto& id : w.external_ids) csi.add_source_volume_ids(id);
  put_secrets(csi.mutable_secrets(), w.secrets);
  for (const auto& [k, val] : w.parameters) (*csi.mutable_parameters())[k] = val;
  auto res = co_await controller_.create_volume_group_snapshot(w.plugin_id, w.volume_keys, csi);
  if (!res.ok()) {
    if (res.outcome == csi::Outcome::uncertain)
      tasks_.spawn("negate group snapshot " + w.name, negate_group_snapshot(w.plugin_id, csi));
    co_return plugin_failure(res);
  }
  // Every member is the request's namespace's (its volumes all are): recorded so, with an event
  // on each member volume, in one write.
  auto group = group_of(res.response.group_snapshot(), w.plugin_id, store_, w.name);
  Batch batch;
  for (auto& s : group.snapshots) {
    s.ns = w.ns;
    if (s.group_snapshot_id.empty()) s.group_snapshot_id = group.id;  // a plugin need not repeat it on members
    batch.put(record_of(s));  // no name of its own: SnapshotID names a member by its id
    if (s.source_volume_id.empty()) continue;
    batch.add_event({.topic = "Volume",
                     .type = "GroupSnapshotCreated",
                     .ns = w.ns,
                     .key = s.source_volume_id,
                     .message = "created snapshot " + in_quotes(s.id) + " of volume " + in_quotes(s.source_volume_id) +
                                " in group snapshot " + in_quotes(group.id),
                     .details = {{"plugin_id", w.plugin_id}, {"snapshot_id", s.id}, {"group_snapshot_id", group.id}}});
  }
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("record group snapshot " + in_quotes(group.id), index.error());
  group.index = *index;
  co_return group;
}

asio::awaitable<void> VolumeLifecycle::negate_group_snapshot(std::string plugin_id,
                                                             ::csi::v1::CreateVolumeGroupSnapshotRequest request) {
  // The same request again (idempotent on the name) tells which group and members exist; that
  // group is then deleted with its members' ids, as the spec asks.
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    std::vector<std::string> unlocked;  // like a single snapshot's negation: no volume is held
    auto made = co_await controller_.create_volume_group_snapshot(plugin_id, unlocked, request);
    if (!made.ok())
      co_return made.outcome == csi::Outcome::final_error ? async::Attempt::final_error(made.error)
                                                          : async::Attempt::again(made.error);
    ::csi::v1::DeleteVolumeGroupSnapshotRequest del;
    del.set_group_snapshot_id(made.response.group_snapshot().group_snapshot_id());
    for (const auto& s : made.response.group_snapshot().snapshots()) del.add_snapshot_ids(s.snapshot_id());
    *del.mutable_secrets() = request.secrets();
    auto gone = co_await controller_.delete_volume_group_snapshot(plugin_id, del);
    co_return gone.done() ? async::Attempt::ok() : async::Attempt::again(gone.error);
  };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  if (!result.ok())
    log_.warn("cannot negate an abandoned group snapshot; the plugin may hold unregistered snapshots",
              {{"plugin_id", plugin_id}, {"name", request.name()}, {"error", result.last_error}});
}

asio::awaitable<Outcome<std::vector<::csi::v1::Snapshot>>> VolumeLifecycle::all_snapshots(const std::string& plugin_id,
                                                                                          const StringMap& secrets) {
  std::vector<::csi::v1::Snapshot> out;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    ::csi::v1::ListSnapshotsRequest csi;
    csi.set_starting_token(token);
    put_secrets(csi.mutable_secrets(), secrets);
    auto res = co_await controller_.list_snapshots(plugin_id, csi);
    if (!res.ok()) co_return plugin_failure(res);
    for (auto& e : *res.response.mutable_entries()) out.push_back(std::move(*e.mutable_snapshot()));
    token = res.response.next_token();
    if (token.empty()) co_return out;
  }
  co_return Failure{Failure::Kind::plugin_error, "ListSnapshots of plugin " + in_quotes(plugin_id) +
                                                     " did not end after " + std::to_string(kMaxPages) + " pages"};
}

asio::awaitable<Outcome<std::uint64_t>> VolumeLifecycle::delete_group_snapshot(std::string plugin_id,
                                                                               std::string group_id,
                                                                               std::vector<std::string> snapshot_ids,
                                                                               StringMap secrets, Asker asker) {
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return missing("plugin", plugin_id);
  // Whose each member is. A plugin that lists its snapshots tells the members (and their
  // sources): owners taken from ids the caller names would let a token name its own snapshot
  // with another namespace's group and reach the plugin, which need not check. Only a plugin
  // that cannot list has its members named by the caller and looked up one by one.
  auto cannot_list = unsupported(
      *p, &domain::ControllerInfo::supports_list_snapshots,
      "plugin " + in_quotes(plugin_id) + " cannot list its snapshots: name the group's members in \"snapshot_ids\"");
  if (cannot_list && (cannot_list->kind == Failure::Kind::unavailable || snapshot_ids.empty())) co_return *cannot_list;
  std::vector<acl::Owner> member_owners;
  std::vector<std::string> listed;
  if (!cannot_list) {
    auto all = co_await all_snapshots(plugin_id, secrets);
    if (!all) co_return all.error();
    for (const auto& s : *all)
      if (s.group_snapshot_id() == group_id) {
        listed.push_back(s.snapshot_id());
        member_owners.push_back(snapshot_owner(store_, plugin_id, s.snapshot_id(), s.source_volume_id()));
      }
  } else if (!asker.acl.is_management()) {
    for (const auto& id : snapshot_ids) {
      auto owner = co_await snapshot_owner_at(plugin_id, id, secrets);
      if (!owner) co_return owner.error();
      member_owners.push_back(*owner);
    }
  }
  const auto recorded = recorded_members(store_, plugin_id, group_id);
  for (const auto* r : recorded) member_owners.push_back(r->ns);
  if (!acl::may_use(asker.acl, acl::Use::write, member_owners))
    co_return denied(asker, acl::Use::write, "deleting this group snapshot");
  if (!cannot_list) {
    if (snapshot_ids.empty()) snapshot_ids = listed;
    if (auto wrong = not_the_members(group_id, snapshot_ids, listed, recorded)) co_return invalid(std::move(*wrong));
  }
  ::csi::v1::DeleteVolumeGroupSnapshotRequest csi;
  csi.set_group_snapshot_id(group_id);
  for (const auto& id : snapshot_ids) csi.add_snapshot_ids(id);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await controller_.delete_volume_group_snapshot(plugin_id, csi);
  if (!res.done()) co_return plugin_failure(res);
  Batch batch;
  for (const auto* r : recorded_members(store_, plugin_id, group_id)) batch.erase_snapshot(plugin_id, r->id);
  for (const auto& id : snapshot_ids)
    if (store_.snapshot_record(plugin_id, id)) batch.erase_snapshot(plugin_id, id);
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("forget deleted group snapshot " + in_quotes(group_id), index.error());
  co_return *index;
}

asio::awaitable<Outcome<std::vector<GroupSnapshot>>> VolumeLifecycle::list_group_snapshots(std::string plugin_id,
                                                                                           StringMap secrets,
                                                                                           Asker asker) {
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return missing("plugin", plugin_id);
  // The groups are read from ListSnapshots: a plugin without it has none to show (400), and
  // one whose capabilities are not known yet is asked again shortly (503), never called blind.
  if (auto cannot = unsupported(
          *p, &domain::ControllerInfo::supports_list_snapshots,
          "plugin " + in_quotes(plugin_id) + " cannot list its snapshots, so its group snapshots cannot be listed"))
    co_return *cannot;
  auto all = co_await all_snapshots(plugin_id, secrets);
  if (!all) co_return all.error();
  std::map<std::string, GroupSnapshot> groups;  // by id: listed in id order
  for (const auto& s : *all) {
    if (s.group_snapshot_id().empty()) continue;
    auto& g = groups[s.group_snapshot_id()];
    if (g.id.empty())
      g = {.id = s.group_snapshot_id(),
           .plugin_id = plugin_id,
           .create_time = s.creation_time().seconds(),
           .ready = true};
    g.create_time = std::min(g.create_time, s.creation_time().seconds());
    g.ready = g.ready && s.ready_to_use();
    g.snapshots.push_back(snapshot_of(s, plugin_id, store_));
  }
  std::vector<GroupSnapshot> out;
  for (auto& [id, g] : groups)
    if (acl::lists_all(asker.acl, owners(g), asker.ns)) out.push_back(std::move(g));
  co_return out;
}

asio::awaitable<Outcome<GroupSnapshot>> VolumeLifecycle::get_group_snapshot(std::string plugin_id, std::string group_id,
                                                                            StringMap secrets, Asker asker) {
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return missing("plugin", plugin_id);
  // The members come from ListSnapshots, or, for a plugin without it, from the group Mooring
  // recorded when it made it (a group made elsewhere is then not known: 404).
  auto cannot_list = unsupported(*p, &domain::ControllerInfo::supports_list_snapshots, "");
  if (cannot_list && cannot_list->kind == Failure::Kind::unavailable) co_return *cannot_list;
  GroupSnapshot listed;
  if (!cannot_list) {
    auto all = co_await all_snapshots(plugin_id, secrets);
    if (!all) co_return all.error();
    for (const auto& s : *all)
      if (s.group_snapshot_id() == group_id) listed.snapshots.push_back(snapshot_of(s, plugin_id, store_));
  } else {
    for (const auto* r : recorded_members(store_, plugin_id, group_id))
      listed.snapshots.push_back({.id = r->id,
                                  .ns = r->ns,
                                  .external_source_volume_id = r->external_source_volume_id,
                                  .source_volume_id = r->source_volume_id,
                                  .plugin_id = plugin_id,
                                  .group_snapshot_id = group_id});
  }
  // Another namespace's group is not found, as one that does not exist.
  if (listed.snapshots.empty() || !acl::lists_all(asker.acl, owners(listed), asker.ns))
    co_return missing("group snapshot", group_id);
  ::csi::v1::GetVolumeGroupSnapshotRequest csi;
  csi.set_group_snapshot_id(group_id);
  for (const auto& s : listed.snapshots) csi.add_snapshot_ids(s.id);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await controller_.get_volume_group_snapshot(plugin_id, csi);
  if (!res.ok()) {
    if (res.status.error_code() == grpc::StatusCode::NOT_FOUND) co_return missing("group snapshot", group_id);
    co_return plugin_failure(res);
  }
  auto group = group_of(res.response.group_snapshot(), plugin_id, store_);
  group.index = store_.index();
  co_return group;
}

}  // namespace mooring::controlplane::volumes
