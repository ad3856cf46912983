// Create through a controller. The volume's key (its id, "ns:id" outside the default namespace)
// is the CSI name, so a create sent again finds the same volume and two namespaces never share one. A create whose outcome is unknown, or whose volume cannot be registered after all,
// is undone in the background. An answer naming storage another volume already holds is refused,
// as register refuses it, and never undone: that would delete the other volume's storage.
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/wire/volume_capability.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

::csi::v1::Topology csi_topology(const domain::Topology& t) {
  ::csi::v1::Topology out;
  for (const auto& [k, val] : t.segments) (*out.mutable_segments())[k] = val;
  return out;
}

Outcome<::csi::v1::CreateVolumeRequest> create_request(const domain::Volume& v, const ContentSource& source) {
  ::csi::v1::CreateVolumeRequest csi;
  // The volume's key is the idempotency key: unique here, stable across retries.
  csi.set_name(domain::volume_key(v.ns, v.id));
  csi.mutable_capacity_range()->set_required_bytes(v.requested_capacity_min);
  csi.mutable_capacity_range()->set_limit_bytes(v.requested_capacity_max);
  for (const auto& cap : v.requested_capabilities) {
    auto c = domain::csi_volume_capability(cap.access_mode, cap.attachment_mode, v.mount_options);
    if (!c) return invalid("volume " + in_quotes(v.id) + ": " + c.error());
    *csi.add_volume_capabilities() = *c;
  }
  for (const auto& [k, val] : v.parameters) (*csi.mutable_parameters())[k] = val;
  for (const auto& [k, val] : v.mutable_parameters) (*csi.mutable_mutable_parameters())[k] = val;
  put_secrets(csi.mutable_secrets(), v.secrets);
  if (!source.snapshot_id.empty())
    csi.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(source.snapshot_id);
  if (!source.clone_external_id.empty())
    csi.mutable_volume_content_source()->mutable_volume()->set_volume_id(source.clone_external_id);
  auto* reach = csi.mutable_accessibility_requirements();
  for (const auto& t : v.requested_topologies.required) *reach->add_requisite() = csi_topology(t);
  for (const auto& t : v.requested_topologies.preferred) *reach->add_preferred() = csi_topology(t);
  return csi;
}

}  // namespace

std::optional<Failure> VolumeLifecycle::check_create(const domain::Volume& v) const {
  const auto& id = v.id;
  if (store_.volume(v.ns, id))
    return conflict("volume " + in_quotes(id) + domain::in_namespace(v.ns) +
                    " already exists; update it with PUT /v1/volume/csi/" + id);
  const domain::Plugin* plugin = store_.plugin(v.plugin_id);
  const auto named = "volume " + in_quotes(id) + ": ";
  if (!plugin) return invalid(named + "no CSI plugin named " + in_quotes(v.plugin_id));
  const auto of_plugin = named + "plugin " + in_quotes(v.plugin_id);
  if (auto no = unsupported(
          *plugin, &domain::ControllerInfo::supports_create_delete,
          of_plugin + " has no controller that supports CREATE_DELETE_VOLUME; register an existing volume instead"))
    return no;
  if (!v.clone_id.empty())
    if (auto no = unsupported(*plugin, &domain::ControllerInfo::supports_clone,
                              of_plugin + " cannot clone volumes (CloneID)"))
      return no;
  if (!v.snapshot_id.empty())
    if (auto no = unsupported(*plugin, &domain::ControllerInfo::supports_create_delete_snapshot,
                              of_plugin + " cannot create volumes from snapshots (SnapshotID)"))
      return no;
  if (auto plan = plan_volume_register(nullptr, v, plugin); !plan) return from_refusal(plan.refusal());
  if (auto over = over_quota(store_, {&v})) return over;  // early; checked again at the commit
  return mutable_unsupported(*plugin, v);
}

asio::awaitable<Outcome<Written>> VolumeLifecycle::create(domain::Volume v, Asker asker) {
  if (auto refused = check_create(v)) co_return *refused;
  auto source = co_await content_source(v, asker);
  if (!source) co_return source.error();
  auto csi = create_request(v, *source);
  if (!csi) co_return csi.error();
  const auto key = domain::volume_key(v.ns, v.id);
  auto res = co_await controller_.create_volume(v.plugin_id, key, *csi);
  if (res.ok()) co_return register_created(v, res.response.volume(), res.node_id, asker.acl);
  if (res.outcome == csi::Outcome::uncertain) {
    log_.warn("create volume outcome unknown; negating it in the background",
              {{"volume_id", v.id}, {"plugin_id", v.plugin_id}, {"error", res.error}});
    tasks_.spawn("negate create " + key, negate_create(v.plugin_id, key, *csi));
  }
  co_return plugin_failure(res);
}

// The state may have moved while the plugin worked: plan again against what is there now.
Outcome<Written> VolumeLifecycle::register_created(const domain::Volume& v, const ::csi::v1::Volume& created,
                                                   const std::string& controller_node, const acl::Acl& reader) {
  const auto& id = v.id;
  const auto key = domain::volume_key(v.ns, v.id);
  if (store_.volume(key)) {
    abandon_created(v, created.volume_id());
    return conflict("volume " + in_quotes(id) + " was registered while it was being created");
  }
  auto plan = plan_volume_register(nullptr, v, store_.plugin(v.plugin_id));
  if (!plan) {
    abandon_created(v, created.volume_id());
    return from_refusal(plan.refusal());
  }
  auto& stored = plan->volume;
  stored.external_id = created.volume_id();
  if (auto dup = registered_elsewhere(store_, stored, reader)) {
    // The plugin answered with storage another volume holds (a plugin that ignores the name, or
    // two plugin ids on one backend): registering it would give it two claimers, and undoing the
    // create would delete the other volume's storage. Refused; nothing is deleted.
    log_.warn("CreateVolume answered with a volume registered under another id; not registered, not deleted",
              {{"volume_id", id}, {"plugin_id", v.plugin_id}, {"external_id", stored.external_id}});
    return conflict("CreateVolume answered with an existing volume: " + dup->message);
  }
  if (auto over = over_quota(store_, {&stored})) {  // a racing create took the last slot meanwhile
    abandon_created(v, created.volume_id());
    return *over;
  }
  stored.capacity = created.capacity_bytes();
  for (const auto& [k, val] : created.volume_context()) stored.context[k] = val;
  if (created.accessible_topology_size() > 0) {
    stored.topologies.clear();
    for (const auto& t : created.accessible_topology())
      stored.topologies.push_back(domain::Topology{{t.segments().begin(), t.segments().end()}});
  }
  Batch batch;
  batch.add_event(
      {.topic = "Volume",
       .type = "VolumeCreated",
       .ns = v.ns,
       .key = id,
       .message = "created volume " + in_quotes(id) + " through plugin " + in_quotes(v.plugin_id) + " (external id " +
                  in_quotes(stored.external_id) + ")",
       .details = {
           {"plugin_id", v.plugin_id}, {"external_id", stored.external_id}, {"controller_node", controller_node}}});
  batch.put(stored);
  auto index = store_.commit(std::move(batch));
  if (!index) {
    abandon_created(v, created.volume_id());
    return write_failed("register created volume \"" + id + "\"", index.error());
  }
  log_.info("volume created", {{"volume_id", id},
                               {"plugin_id", v.plugin_id},
                               {"external_id", stored.external_id},
                               {"capacity", stored.capacity}});
  return Written{*index, {*store_.volume(key)}};
}

bool VolumeLifecycle::registered_as(const std::string& key, const std::string& external_id) const {
  const auto* v = store_.volume(key);
  return v && v->external_id == external_id;
}

bool VolumeLifecycle::held_by_a_volume(const std::string& plugin_id, const std::string& external_id) const {
  return registering_volume(store_, plugin_id, external_id) != nullptr;
}

void VolumeLifecycle::abandon_created(const domain::Volume& v, const std::string& external_id) {
  const auto key = domain::volume_key(v.ns, v.id);
  if (registered_as(key, external_id)) return;             // the same volume, registered by a concurrent create
  if (held_by_a_volume(v.plugin_id, external_id)) return;  // another volume's storage: never deleted
  ::csi::v1::DeleteVolumeRequest del;
  del.set_volume_id(external_id);
  put_secrets(del.mutable_secrets(), v.secrets);
  tasks_.spawn("negate create " + key, [this, plugin_id = v.plugin_id, id = key, del]() -> asio::awaitable<void> {
    std::function<asio::awaitable<async::Attempt>(unsigned)> attempt =
        [&](unsigned) -> asio::awaitable<async::Attempt> {
      auto r = co_await controller_.delete_volume(plugin_id, id, del);
      co_return r.done() ? async::Attempt::ok() : async::Attempt::again(r.error);
    };
    co_await async::retry(std::move(attempt), negation_retry());
  });
}

asio::awaitable<void> VolumeLifecycle::negate_create(std::string plugin_id, std::string volume_key,
                                                     ::csi::v1::CreateVolumeRequest request) {
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    auto made = co_await controller_.create_volume(plugin_id, volume_key, request);
    if (!made.ok())
      co_return made.outcome == csi::Outcome::final_error ? async::Attempt::final_error(made.error)
                                                          : async::Attempt::again(made.error);
    if (registered_as(volume_key, made.response.volume().volume_id())) co_return async::Attempt::ok();
    if (held_by_a_volume(plugin_id, made.response.volume().volume_id())) {
      log_.warn("abandoned create answered with a volume registered under another id; not deleted",
                {{"volume_id", volume_key}, {"external_id", made.response.volume().volume_id()}});
      co_return async::Attempt::ok();
    }
    ::csi::v1::DeleteVolumeRequest del;
    del.set_volume_id(made.response.volume().volume_id());
    *del.mutable_secrets() = request.secrets();
    auto gone = co_await controller_.delete_volume(plugin_id, volume_key, del);
    if (!gone.done()) co_return async::Attempt::again(gone.error);
    log_.info("abandoned create negated", {{"volume_id", volume_key}, {"external_id", del.volume_id()}});
    co_return async::Attempt::ok();
  };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  if (!result.ok())
    log_.warn("cannot negate an abandoned create; the plugin may hold an unregistered volume",
              {{"volume_id", volume_key}, {"plugin_id", plugin_id}, {"error", result.last_error}});
}

}  // namespace mooring::controlplane::volumes
