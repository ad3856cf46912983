// Registration of existing volumes and their deregistration (forced or with a purge that lets
// the claim GC release every claim first).
#include <algorithm>
#include <optional>

#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "services/controlplane/volumes/volume_view.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

// The claims of terminal allocations go with the volume only once nothing is left attached for
// them: dropping a claim mid-release would leave the volume mounted on a node or published to
// it with nothing to undo it. Forced, that is refused; purged, the release runs first.
std::vector<std::string> release_left(const StateStore& store, const domain::Volume& v) {
  return gc::release_steps_left(v, [&](const domain::Claim& c) {
    return gc::ReleaseView{store.plugin(v.plugin_id), store.node(c.node_id), store.allocation(c.allocation_id),
                           domain::now()};
  });
}

Failure release_unfinished(const domain::Volume& v, const std::vector<std::string>& left) {
  std::string steps;
  for (const auto& l : left) steps += (steps.empty() ? "" : "; ") + l;
  const std::string ns = v.ns == domain::kDefaultNamespace ? "" : "?namespace=" + v.ns;
  const std::string node_param = ns.empty() ? "?node=ID" : ns + "&node=ID";
  return conflict("volume \"" + v.id + "\"" + domain::in_namespace(v.ns) +
                  ": force deregistration would drop claims whose release is not finished: " + steps +
                  ". Wait for the release (GET /v1/volume/csi/" + v.id + ns +
                  " shows each claim's State and LastError), deregister with purge=true to run those steps first, "
                  "or detach a down node with DELETE /v1/volume/csi/" +
                  v.id + "/detach" + node_param);
}

// Purge: the claim GC releases every claim, node side then controller side, and removes the
// volume in the write that frees the last one. Meanwhile it takes no claim and no update.
Outcome<Deregistered> mark_deregistering(StateStore& store, const domain::Volume& v) {
  domain::Volume marked = v;
  marked.deregistering = true;
  for (auto& [alloc, c] : marked.claims)
    if (c.state == domain::ClaimState::taken)
      (void)advance_claim(marked, alloc, domain::ClaimState::unpublishing, domain::now());
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDeregistrationRequested",
                   .ns = v.ns,
                   .key = v.id,
                   .message = "volume \"" + v.id + "\" will be deregistered once its " +
                              std::to_string(marked.claims.size()) + " claim(s) are released",
                   .details = {{"plugin_id", v.plugin_id}}});
  batch.put(std::move(marked));
  auto index = store.commit(std::move(batch));
  if (!index) return write_failed("deregister volume \"" + v.id + "\"", index.error());
  return Deregistered{*index, true};
}

Outcome<Deregistered> erase(StateStore& store, const domain::Volume& v, bool force) {
  std::string message = "deregistered volume \"" + v.id + "\"";
  if (!v.claims.empty())
    message += " with " + std::to_string(v.claims.size()) + " claim(s) of terminal allocations (forced)";
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDeregistered",
                   .ns = v.ns,
                   .key = v.id,
                   .message = message,
                   .details = {{"plugin_id", v.plugin_id}, {"force", force ? "true" : "false"}}});
  const std::string id = v.id;  // `v` lives in the store, which the erase changes
  batch.erase_volume(domain::volume_key(v.ns, v.id));
  auto index = store.commit(std::move(batch));
  if (!index) return write_failed("deregister volume \"" + id + "\"", index.error());
  return Deregistered{*index, false};
}

}  // namespace

std::optional<Failure> registered_elsewhere(const StateStore& store, const domain::Volume& planned,
                                            const acl::Acl& reader, const std::vector<VolumePlan>& earlier) {
  const auto key = domain::volume_key(planned.ns, planned.id);
  const auto backend = backend_id(planned);
  std::optional<domain::Volume> other;
  for (const auto& k : store.volume_keys_with_backend(planned))
    if (k != key) other = *store.volume(k);
  for (const auto& p : earlier)  // the same request registers it twice
    if (backend_id(p.volume) == backend) other = p.volume;
  if (!other) return std::nullopt;
  // Another namespace's volume is named only to a caller who may read it (issue 40).
  if (other->ns != planned.ns && !reader.allows(acl::Capability::csi_read_volume, other->ns))
    return conflict("volume " + in_quotes(planned.id) + domain::in_namespace(planned.ns) +
                    ": its ExternalID is already registered as a volume this token may not read; a backend volume "
                    "is registered under one id only");
  return conflict(
      "volume " + in_quotes(planned.id) + domain::in_namespace(planned.ns) + ": external id " +
      in_quotes(planned.external_id) + " of provider " + in_quotes(backend.first) +
      " is already registered as volume " + in_quotes(other->id) + " in namespace " + in_quotes(other->ns) +
      (other->plugin_id == planned.plugin_id ? std::string{} : " (plugin " + in_quotes(other->plugin_id) + ")"));
}

Outcome<std::vector<VolumePlan>> VolumeLifecycle::plan_registrations(std::vector<domain::Volume> volumes,
                                                                     const acl::Acl& reader) const {
  std::vector<VolumePlan> plans;
  std::vector<std::string> keys;
  for (auto& req : volumes) {
    const auto key = domain::volume_key(req.ns, req.id);
    if (std::find(keys.begin(), keys.end(), key) != keys.end())
      return invalid("volume \"" + req.id + "\" appears twice in the request");
    const domain::Volume* existing = store_.volume(key);
    const domain::Plugin* plugin = store_.plugin(req.plugin_id);
    auto plan = plan_volume_register(existing, std::move(req), plugin);
    if (!plan) return from_refusal(plan.refusal());
    if (plan->created)
      if (auto no = mutable_unsupported(*plugin, plan->volume)) return *no;
    if (auto dup = registered_elsewhere(store_, plan->volume, reader, plans)) return *dup;
    keys.push_back(key);
    plans.push_back(std::move(*plan));
  }
  return plans;
}

asio::awaitable<Outcome<Written>> VolumeLifecycle::register_volumes(std::vector<domain::Volume> volumes, Asker asker) {
  // Bad input changes nothing and calls no plugin; then each plugin checks its volume.
  auto plans = plan_registrations(volumes, asker.acl);
  if (!plans) co_return plans.error();
  if (auto over = plans_over_quota(store_, *plans)) co_return *over;
  for (const auto& plan : *plans) {
    const domain::Volume* existing = store_.volume(domain::volume_key(plan.volume.ns, plan.volume.id));
    if (auto refused = co_await validate_capabilities(existing, plan.volume)) co_return *refused;
  }
  // The state may have moved while the plugins answered: plan again against what is there now.
  plans = plan_registrations(std::move(volumes), asker.acl);
  if (!plans) co_return plans.error();
  if (auto over = plans_over_quota(store_, *plans)) co_return *over;  // in the turn that commits
  Batch batch;
  std::vector<std::string> keys;
  for (auto& plan : *plans) {
    keys.push_back(domain::volume_key(plan.volume.ns, plan.volume.id));
    batch.add_event({.topic = "Volume",
                     .type = plan.created ? "VolumeRegistered" : "VolumeUpdated",
                     .ns = plan.volume.ns,
                     .key = plan.volume.id,
                     .message = std::string(plan.created ? "registered" : "updated") + " volume \"" + plan.volume.id +
                                "\" (plugin \"" + plan.volume.plugin_id + "\")",
                     .details = {{"plugin_id", plan.volume.plugin_id}}});
    batch.put(std::move(plan.volume));
  }
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("register volumes", index.error());
  Written out{*index, {}};
  for (const auto& key : keys) out.volumes.push_back(decorated(*store_.volume(key), store_));
  co_return out;
}

asio::awaitable<Outcome<Written>> VolumeLifecycle::register_or_expand(domain::Volume wanted,
                                                                      domain::Expected<StringMap> header_secrets,
                                                                      Asker asker) {
  const domain::Volume* current = store_.volume(wanted.ns, wanted.id);
  auto plan = plan_volume_register(current, wanted, store_.plugin(wanted.plugin_id));
  // Everything that is not an expansion (a new volume, every refusal) is a plain registration. A
  // named vector, not a temporary, as the coroutine's argument (GCC 12, see agent_router.cpp).
  if (!plan || !plan->expand) {
    std::vector<domain::Volume> one{std::move(wanted)};
    co_return co_await register_volumes(std::move(one), std::move(asker));
  }
  const domain::Plugin* plugin = store_.plugin(plan->volume.plugin_id);
  const auto& id = wanted.id;
  if (!plugin) co_return invalid("volume " + in_quotes(id) + ": no CSI plugin named " + in_quotes(wanted.plugin_id));
  if (auto no = unsupported(*plugin, &domain::ControllerInfo::supports_expand,
                            "volume " + in_quotes(id) + ": plugin " + in_quotes(wanted.plugin_id) +
                                " has no controller that supports EXPAND_VOLUME; cannot grow it from " +
                                std::to_string(current->capacity) + " to " +
                                std::to_string(plan->volume.requested_capacity_min) + " bytes"))
    co_return *no;
  if (!header_secrets) co_return invalid(header_secrets.error());
  // A growth asks more capacity of the namespace; the plugin's expansion cannot be taken back,
  // so this is checked before it only.
  if (auto over = over_quota(store_, {&plan->volume})) co_return *over;
  if (auto refused = co_await validate_capabilities(current, plan->volume)) co_return *refused;
  StringMap secrets = plan->volume.secrets;
  for (const auto& [k, v] : *header_secrets) secrets[k] = v;
  co_return co_await expand(std::move(plan->volume), secrets);
}

Outcome<Deregistered> VolumeLifecycle::deregister(const std::string& key, bool force, bool purge) {
  const domain::Volume* v = store_.volume(key);
  if (!v) return missing_volume(key);
  if (v->deregistering && purge) return Deregistered{v->modify_index, true};  // asked again: under way
  auto lookup = [&](const std::string& alloc) { return store_.allocation(alloc); };
  if (auto refusal = check_deregister(*v, force || purge, lookup)) return from_refusal(*refusal);
  const auto left = release_left(store_, *v);
  if (!left.empty() && !purge) return release_unfinished(*v, left);
  if (!left.empty()) return mark_deregistering(store_, *v);
  return erase(store_, *v, force);
}

}  // namespace mooring::controlplane::volumes
