// Controller endpoints for volumes: create, delete, expand, operator detach, external listings.
// Validate everything first (bad input changes nothing and calls no plugin), then one controller
// call through the agent router (serialized per volume), then one commit. A create whose outcome
// is uncertain is negated in the background. Snapshots: snapshot_endpoints.cpp.
#include "services/controlplane/api/controller_endpoints.hpp"

#include <algorithm>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/api/api.hpp"
#include "services/controlplane/api/controller_support.hpp"
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/node_loss.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/retry.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"
#include "shared/wire/volume_capability.hpp"

namespace mooring::controlplane::api {

namespace asio = boost::asio;

domain::Expected<StringMap> parse_secrets_header(std::string_view text) {
  StringMap out;
  std::size_t position = 0;
  while (!text.empty()) {
    ++position;
    auto comma = text.find(',');
    auto entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (entry.empty()) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return domain::error("entry " + std::to_string(position) + " is not key=value");
    out[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return out;
}

ControllerEndpoints::ControllerEndpoints(asio::any_io_executor executor, StateStore& store,
                                         agentclient::AgentRouter& router, gc::ClaimGc* gc)
    : store_(store), router_(router), gc_(gc), tasks_(std::move(executor), "controller-api") {}

ControllerEndpoints::~ControllerEndpoints() = default;

asio::awaitable<void> ControllerEndpoints::stop() {
  tasks_.cancel();
  co_await tasks_.join();
}

void ControllerEndpoints::add_routes(Api& api) {
  api_ = &api;
  auto route = [&](const char* method, const char* path, asio::awaitable<http::Response> (ControllerEndpoints::*fn)(http::Request)) {
    api.add_async_route(method, path, [this, fn](const http::Request& r) { return (this->*fn)(r); });
  };
  route("PUT", "/v1/volume/csi/:id", &ControllerEndpoints::register_or_expand);
  route("POST", "/v1/volume/csi/:id", &ControllerEndpoints::register_or_expand);
  route("PUT", "/v1/volume/csi/:id/create", &ControllerEndpoints::create_volume);
  route("POST", "/v1/volume/csi/:id/create", &ControllerEndpoints::create_volume);
  route("DELETE", "/v1/volume/csi/:id/delete", &ControllerEndpoints::delete_volume);
  route("DELETE", "/v1/volume/csi/:id/detach", &ControllerEndpoints::detach_volume);
  route("GET", "/v1/volumes/snapshot", &ControllerEndpoints::list_snapshots);
  route("PUT", "/v1/volumes/snapshot", &ControllerEndpoints::create_snapshot);
  route("POST", "/v1/volumes/snapshot", &ControllerEndpoints::create_snapshot);
  route("DELETE", "/v1/volumes/snapshot", &ControllerEndpoints::delete_snapshot);
  route("GET", "/v1/volumes/external", &ControllerEndpoints::list_external_volumes);
}

// ---- expand ----

asio::awaitable<http::Response> ControllerEndpoints::register_or_expand(http::Request req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  json body;
  if (!parse_body(req, body, err)) co_return err;
  auto volumes = domain::volumes_request_from_api(body, true);
  const domain::Volume* current = store_.volume(id);
  // Everything that is not an expansion (including every malformed request) is the plain
  // registration's to answer, with its own errors.
  if (!volumes || volumes->size() != 1 || volumes->front().id != id || !current || !api_)
    co_return api_ ? api_->fallback_sync(req) : http::error_response(500, "registration is not wired");
  auto plan = plan_volume_register(current, volumes->front(), store_.plugin(volumes->front().plugin_id));
  if (!plan || !plan->expand) co_return api_->fallback_sync(req);

  const domain::Volume wanted = plan->volume;
  const domain::Plugin* plugin = store_.plugin(wanted.plugin_id);
  if (!plugin) co_return bad_request("volume " + in_quotes(id) + ": no CSI plugin named " + in_quotes(wanted.plugin_id));
  if (!controller_supports(*plugin, &domain::ControllerInfo::supports_expand))
    co_return bad_request("volume " + in_quotes(id) + ": plugin " + in_quotes(wanted.plugin_id) +
                          " has no controller that supports EXPAND_VOLUME; cannot grow it from " +
                          std::to_string(current->capacity) + " to " + std::to_string(wanted.requested_capacity_min) +
                          " bytes");
  StringMap secrets = wanted.secrets;
  if (!header_secrets(req, secrets, err)) co_return err;

  ::csi::v1::ControllerExpandVolumeRequest csi;
  csi.set_volume_id(wanted.external_id);
  csi.mutable_capacity_range()->set_required_bytes(wanted.requested_capacity_min);
  csi.mutable_capacity_range()->set_limit_bytes(wanted.requested_capacity_max);
  put_secrets(csi.mutable_secrets(), secrets);
  // The capability in use (or the first requested one) tells the plugin how the volume is used.
  auto access = wanted.access_mode;
  auto attachment = wanted.attachment_mode;
  if (access == domain::AccessMode::unknown && !wanted.requested_capabilities.empty()) {
    access = wanted.requested_capabilities.front().access_mode;
    attachment = wanted.requested_capabilities.front().attachment_mode;
  }
  if (access != domain::AccessMode::unknown) {
    if (auto c = domain::csi_volume_capability(access, attachment, wanted.mount_options))
      *csi.mutable_volume_capability() = *c;
  }
  auto res = co_await router_.controller_expand_volume(wanted.plugin_id, id, csi);
  if (!res.ok()) co_return plugin_failure(res);
  const std::int64_t capacity = res.response.capacity_bytes();
  const bool node_expansion = res.response.node_expansion_required();

  // Node expansion for every claim that has the volume published (seed: once per claim).
  std::vector<std::string> node_errors;
  if (node_expansion) {
    for (const auto& [alloc, claim] : wanted.claims) {
      if (claim.state != domain::ClaimState::taken) continue;
      v1::NodeExpandVolumeRequest ne;
      ne.set_plugin_id(wanted.plugin_id);
      ne.set_volume_id(id);
      ne.set_external_id(wanted.external_id);
      ne.set_alloc_id(alloc);
      *ne.mutable_capacity_range() = csi.capacity_range();
      for (const auto& [k, val] : secrets) (*ne.mutable_secrets())[k] = val;
      auto r = co_await router_.node_expand_volume(claim.node_id, ne);
      if (!r.ok() && r.status.error_code() != grpc::StatusCode::NOT_FOUND) node_errors.push_back(r.error);
    }
  }

  // Record what the plugin now says, on top of whatever else changed meanwhile.
  const domain::Volume* latest = store_.volume(id);
  if (!latest) co_return http::error_response(409, "volume " + in_quotes(id) + " was deregistered while it was expanded");
  auto again = plan_volume_register(latest, wanted, store_.plugin(wanted.plugin_id));
  if (!again) co_return refused(again.refusal());
  again->volume.capacity = std::max(capacity, latest->capacity);
  Batch batch;
  std::string message = "expanded volume " + in_quotes(id) + " to " + std::to_string(again->volume.capacity) + " bytes";
  if (!node_errors.empty()) message += "; node expansion failed: " + node_errors.front();
  batch.add_event({.topic = "Volume",
                   .type = node_errors.empty() ? "VolumeExpanded" : "VolumeNodeExpansionFailed",
                   .key = id,
                   .message = message,
                   .details = {{"plugin_id", wanted.plugin_id},
                               {"capacity", std::to_string(again->volume.capacity)},
                               {"node_expansion", node_expansion ? "true" : "false"}}});
  batch.put(again->volume);
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("record expansion of volume \"" + id + "\"", index.error());
  log_.info("volume expanded", {{"volume_id", id}, {"capacity", again->volume.capacity},
                                {"node_expansion", node_expansion}, {"node_errors", node_errors.size()}});
  if (!node_errors.empty())
    co_return http::error_response(502, "volume " + in_quotes(id) + " was expanded by the controller to " +
                                            std::to_string(again->volume.capacity) +
                                            " bytes, but node expansion failed: " + node_errors.front());
  json out = {{"Index", *index}, {"Volumes", json::array({domain::to_api_json(*store_.volume(id))})}};
  auto r = json_ok(out);
  r.index = *index;
  co_return r;
}

// ---- create ----

asio::awaitable<http::Response> ControllerEndpoints::create_volume(http::Request req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  json body;
  if (!parse_body(req, body, err)) co_return err;
  auto volumes = domain::volumes_request_from_api(body, false);
  if (!volumes) co_return bad_request(volumes.error());
  if (volumes->size() != 1)
    co_return bad_request("PUT /v1/volume/csi/" + id + "/create creates exactly one volume");
  domain::Volume v = std::move(volumes->front());
  if (v.id != id)
    co_return bad_request("volume \"" + v.id + "\": field \"ID\" does not match the path id \"" + id + "\"");
  if (!header_secrets(req, v.secrets, err)) co_return err;
  if (store_.volume(id))
    co_return http::error_response(409, "volume " + in_quotes(id) + " already exists; update it with PUT /v1/volume/csi/" + id);
  const domain::Plugin* plugin = store_.plugin(v.plugin_id);
  if (!plugin) co_return bad_request("volume " + in_quotes(id) + ": no CSI plugin named " + in_quotes(v.plugin_id));
  if (!controller_supports(*plugin, &domain::ControllerInfo::supports_create_delete))
    co_return bad_request("volume " + in_quotes(id) + ": plugin " + in_quotes(v.plugin_id) +
                          " has no controller that supports CREATE_DELETE_VOLUME; register an existing volume instead");
  if (!v.clone_id.empty() && !controller_supports(*plugin, &domain::ControllerInfo::supports_clone))
    co_return bad_request("volume " + in_quotes(id) + ": plugin " + in_quotes(v.plugin_id) + " cannot clone volumes (CloneID)");
  if (!v.snapshot_id.empty() && !controller_supports(*plugin, &domain::ControllerInfo::supports_create_delete_snapshot))
    co_return bad_request("volume " + in_quotes(id) + ": plugin " + in_quotes(v.plugin_id) +
                          " cannot create volumes from snapshots (SnapshotID)");
  if (auto plan = plan_volume_register(nullptr, v, plugin); !plan) co_return refused(plan.refusal());

  ::csi::v1::CreateVolumeRequest csi;
  // The Mooring id is the idempotency key: unique here, stable across retries.
  csi.set_name(id);
  csi.mutable_capacity_range()->set_required_bytes(v.requested_capacity_min);
  csi.mutable_capacity_range()->set_limit_bytes(v.requested_capacity_max);
  for (const auto& cap : v.requested_capabilities) {
    auto c = domain::csi_volume_capability(cap.access_mode, cap.attachment_mode, v.mount_options);
    if (!c) co_return bad_request("volume " + in_quotes(id) + ": " + c.error());
    *csi.add_volume_capabilities() = *c;
  }
  for (const auto& [k, val] : v.parameters) (*csi.mutable_parameters())[k] = val;
  put_secrets(csi.mutable_secrets(), v.secrets);
  if (!v.snapshot_id.empty()) csi.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(v.snapshot_id);
  if (!v.clone_id.empty()) csi.mutable_volume_content_source()->mutable_volume()->set_volume_id(v.clone_id);
  auto topo = [](const domain::Topology& t) {
    ::csi::v1::Topology out;
    for (const auto& [k, val] : t.segments) (*out.mutable_segments())[k] = val;
    return out;
  };
  for (const auto& t : v.requested_topologies.required) *csi.mutable_accessibility_requirements()->add_requisite() = topo(t);
  for (const auto& t : v.requested_topologies.preferred) *csi.mutable_accessibility_requirements()->add_preferred() = topo(t);

  auto res = co_await router_.create_volume(v.plugin_id, id, csi);
  if (!res.ok()) {
    if (res.outcome == csi::Outcome::uncertain) {
      log_.warn("create volume outcome unknown; negating it in the background",
                {{"volume_id", id}, {"plugin_id", v.plugin_id}, {"error", res.error}});
      tasks_.spawn("negate create " + id, negate_create(v.plugin_id, id, csi));
    }
    co_return plugin_failure(res);
  }
  const auto& created = res.response.volume();

  // The state may have moved while the plugin worked: plan again against what is there now.
  auto abandon = [&](http::Response answer) {
    if (registered_as(id, created.volume_id())) return answer;  // the same volume, registered by a concurrent create
    ::csi::v1::DeleteVolumeRequest del;
    del.set_volume_id(created.volume_id());
    put_secrets(del.mutable_secrets(), v.secrets);
    tasks_.spawn("negate create " + id, [this, plugin_id = v.plugin_id, id, del]() -> asio::awaitable<void> {
      std::function<asio::awaitable<async::Attempt>(unsigned)> attempt =
          [&](unsigned) -> asio::awaitable<async::Attempt> {
        auto r = co_await router_.delete_volume(plugin_id, id, del);
        co_return r.done() ? async::Attempt::ok() : async::Attempt::again(r.error);
      };
      co_await async::retry(std::move(attempt), negation_retry());
    });
    return answer;
  };
  if (store_.volume(id))
    co_return abandon(http::error_response(409, "volume " + in_quotes(id) + " was registered while it was being created"));
  auto plan = plan_volume_register(nullptr, v, store_.plugin(v.plugin_id));
  if (!plan) co_return abandon(refused(plan.refusal()));
  auto& stored = plan->volume;
  stored.external_id = created.volume_id();
  stored.capacity = created.capacity_bytes();
  for (const auto& [k, val] : created.volume_context()) stored.context[k] = val;
  if (created.accessible_topology_size() > 0) {
    stored.topologies.clear();
    for (const auto& t : created.accessible_topology())
      stored.topologies.push_back(domain::Topology{{t.segments().begin(), t.segments().end()}});
  }
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = "VolumeCreated",
                   .key = id,
                   .message = "created volume " + in_quotes(id) + " through plugin " + in_quotes(v.plugin_id) +
                              " (external id " + in_quotes(stored.external_id) + ")",
                   .details = {{"plugin_id", v.plugin_id}, {"external_id", stored.external_id},
                               {"controller_node", res.node_id}}});
  batch.put(stored);
  auto index = store_.commit(std::move(batch));
  if (!index) co_return abandon(write_failed("register created volume \"" + id + "\"", index.error()));
  log_.info("volume created", {{"volume_id", id}, {"plugin_id", v.plugin_id}, {"external_id", stored.external_id},
                               {"capacity", stored.capacity}});
  json out = {{"Index", *index}, {"Volumes", json::array({domain::to_api_json(*store_.volume(id))})}};
  auto r = json_ok(out);
  r.index = *index;
  co_return r;
}

bool ControllerEndpoints::registered_as(const std::string& id, const std::string& external_id) const {
  const auto* v = store_.volume(id);
  return v && v->external_id == external_id;
}

asio::awaitable<void> ControllerEndpoints::negate_create(std::string plugin_id, std::string volume_id,
                                                         ::csi::v1::CreateVolumeRequest request) {
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
        auto made = co_await router_.create_volume(plugin_id, volume_id, request);
        if (!made.ok())
          co_return made.outcome == csi::Outcome::final_error ? async::Attempt::final_error(made.error)
                                                              : async::Attempt::again(made.error);
        if (registered_as(volume_id, made.response.volume().volume_id())) co_return async::Attempt::ok();
        ::csi::v1::DeleteVolumeRequest del;
        del.set_volume_id(made.response.volume().volume_id());
        *del.mutable_secrets() = request.secrets();
        auto gone = co_await router_.delete_volume(plugin_id, volume_id, del);
        if (!gone.done()) co_return async::Attempt::again(gone.error);
        log_.info("abandoned create negated", {{"volume_id", volume_id}, {"external_id", del.volume_id()}});
        co_return async::Attempt::ok();
      };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  if (!result.ok())
    log_.warn("cannot negate an abandoned create; the plugin may hold an unregistered volume",
              {{"volume_id", volume_id}, {"plugin_id", plugin_id}, {"error", result.last_error}});
}

// ---- delete ----

asio::awaitable<http::Response> ControllerEndpoints::delete_volume(http::Request req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  StringMap extra;
  if (!header_secrets(req, extra, err)) co_return err;
  const domain::Volume* v = store_.volume(id);
  if (!v) co_return not_found("volume", id);
  if (!v->claims.empty()) {
    std::string holders;
    for (const auto& [alloc, c] : v->claims)
      holders += (holders.empty() ? "" : ", ") + in_quotes(alloc) + " (" + std::string(domain::to_string(c.state)) + ")";
    co_return http::error_response(409, "volume " + in_quotes(id) + " is in use by allocations " + holders +
                                            "; it cannot be deleted until every claim is released");
  }
  const domain::Plugin* plugin = store_.plugin(v->plugin_id);
  if (!plugin)
    co_return http::error_response(503, "cannot delete volume " + in_quotes(id) + ": its plugin " + in_quotes(v->plugin_id) +
                                            " is not registered (no controller to delete it with)");
  if (!plugin->controllers.empty() && !controller_supports(*plugin, &domain::ControllerInfo::supports_create_delete))
    co_return bad_request("volume " + in_quotes(id) + ": plugin " + in_quotes(v->plugin_id) +
                          " does not support CREATE_DELETE_VOLUME; deregister it with DELETE /v1/volume/csi/" + id);
  const std::string plugin_id = v->plugin_id;
  auto csi = delete_request(*v, extra);
  // Marked before anything is sent (the router waits for the mark to be durable): from here on
  // no claim is taken, so the storage is never deleted under an allocation that just claimed it.
  const bool earlier = v->deleting;  // an earlier delete's outcome is unknown: this one retries it
  if (!earlier) {
    if (auto marked = mark_deleting(id, true, {}); !marked)
      co_return write_failed("mark volume " + in_quotes(id) + " as being deleted", marked.error());
  }
  auto res = co_await router_.delete_volume(plugin_id, id, csi);
  if (res.done()) {
    auto index = deregister_deleted(id, plugin_id);
    if (!index) co_return write_failed("deregister deleted volume " + in_quotes(id), index.error());
    auto r = json_ok({{"Index", *index}});
    r.index = *index;
    co_return r;
  }
  // The plugin said no, or nothing reached a plugin and no earlier attempt may have: the volume
  // is as it was.
  const bool untouched = res.no_target && !earlier;
  if (not_deleted(res) || untouched) {
    (void)mark_deleting(id, false, res.error);
    co_return plugin_failure(res);
  }
  // The plugin may have deleted it: the mark stays and the delete is finished in the background.
  finish_delete_later(plugin_id, id, csi);
  co_return plugin_failure(res, res.error + "; volume " + in_quotes(id) +
                                    " stays marked as being deleted (no new claims) and the delete is retried in "
                                    "the background until the plugin answers");
}

::csi::v1::DeleteVolumeRequest ControllerEndpoints::delete_request(const domain::Volume& v, const StringMap& extra) {
  ::csi::v1::DeleteVolumeRequest csi;
  csi.set_volume_id(v.external_id);
  StringMap secrets = v.secrets;
  for (const auto& [k, val] : extra) secrets[k] = val;
  put_secrets(csi.mutable_secrets(), secrets);
  return csi;
}

domain::Expected<std::uint64_t> ControllerEndpoints::mark_deleting(const std::string& id, bool deleting,
                                                                   const std::string& refused_because) {
  const domain::Volume* v = store_.volume(id);
  if (!v) return domain::error("volume " + in_quotes(id) + " is no longer registered");
  if (v->deleting == deleting) return store_.index();
  domain::Volume copy = *v;
  copy.deleting = deleting;
  Batch batch;
  if (!deleting)
    batch.add_event({.topic = "Volume",
                     .type = "VolumeDeleteRefused",
                     .key = id,
                     .message = "volume " + in_quotes(id) + " was not deleted; it takes claims again",
                     .details = {{"plugin_id", v->plugin_id}, {"error", refused_because}}});
  batch.put(std::move(copy));
  return store_.commit(std::move(batch));
}

domain::Expected<std::uint64_t> ControllerEndpoints::deregister_deleted(const std::string& id,
                                                                        const std::string& plugin_id) {
  const domain::Volume* v = store_.volume(id);
  if (!v) return store_.index();  // a concurrent delete (or a deregistration) got there first
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDeleted",
                   .key = id,
                   .message = "deleted volume " + in_quotes(id) + " through plugin " + in_quotes(plugin_id) + " and deregistered it",
                   .details = {{"plugin_id", plugin_id}, {"external_id", v->external_id}}});
  batch.erase_volume(id);
  auto index = store_.commit(std::move(batch));
  if (index) log_.info("volume deleted", {{"volume_id", id}, {"plugin_id", plugin_id}});
  return index;
}

void ControllerEndpoints::finish_delete_later(const std::string& plugin_id, const std::string& id,
                                              ::csi::v1::DeleteVolumeRequest request) {
  if (!finishing_.insert(id).second) return;  // one background delete per volume
  log_.warn("volume delete outcome unknown; retrying it in the background", {{"volume_id", id}, {"plugin_id", plugin_id}});
  bool spawned = tasks_.spawn("finish delete " + id, [this, plugin_id, id, request]() -> asio::awaitable<void> {
    std::function<asio::awaitable<async::Attempt>(unsigned)> attempt =
        [&](unsigned) -> asio::awaitable<async::Attempt> {
      const domain::Volume* v = store_.volume(id);
      if (!v || !v->deleting) co_return async::Attempt::ok();  // deleted or deregistered meanwhile
      auto r = co_await router_.delete_volume(plugin_id, id, request);
      if (r.done()) {
        auto index = deregister_deleted(id, plugin_id);
        co_return index ? async::Attempt::ok() : async::Attempt::again(index.error());
      }
      if (not_deleted(r)) {
        auto index = mark_deleting(id, false, r.error);
        co_return index ? async::Attempt::final_error(r.error) : async::Attempt::again(index.error());
      }
      co_return async::Attempt::again(r.error);
    };
    auto result = co_await async::retry(std::move(attempt), negation_retry());
    finishing_.erase(id);
    if (result.end == async::RetryEnd::stopped)
      log_.warn("the plugin refused the delete; the volume takes claims again",
                {{"volume_id", id}, {"plugin_id", plugin_id}, {"error", result.last_error}});
    else if (result.end == async::RetryEnd::exhausted)
      log_.error("background volume delete gave up; the volume stays marked as being deleted until a delete succeeds",
                 {{"volume_id", id}, {"plugin_id", plugin_id}, {"error", result.last_error}});
  });
  if (!spawned) finishing_.erase(id);
}

void ControllerEndpoints::start() {
  for (const auto& [id, v] : store_.volumes())
    if (v.deleting) finish_delete_later(v.plugin_id, id, delete_request(v, {}));
}

// ---- operator detach ----

asio::awaitable<http::Response> ControllerEndpoints::detach_volume(http::Request req) {
  std::string id, node_id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  if (!required_param(req, "node", node_id, err)) co_return err;
  if (auto ok = domain::validate_node_id(node_id); !ok) co_return bad_request("query parameter \"node\": " + ok.error());
  const domain::Volume* v = store_.volume(id);
  if (!v) co_return not_found("volume", id);
  std::vector<std::string> allocs;
  for (const auto& [alloc, c] : v->claims)
    if (c.node_id == node_id) allocs.push_back(alloc);
  if (allocs.empty())
    co_return http::error_response(404, "volume " + in_quotes(id) + " has no claim on node " + in_quotes(node_id));

  const domain::Node* node = store_.node(node_id);
  const bool node_lost = !node || node->status == domain::NodeStatus::down;
  auto now = domain::now();
  Batch batch;
  if (!node_lost) {
    // A live node still runs what it runs: unmounting under a running allocation would break it.
    std::string running;
    for (const auto& alloc : allocs) {
      const auto* a = store_.allocation(alloc);
      if (v->claims.at(alloc).state == domain::ClaimState::taken && a && !domain::is_terminal(*a) &&
          a->desired_status == domain::DesiredStatus::run)
        running += (running.empty() ? "" : ", ") + in_quotes(alloc);
    }
    if (!running.empty())
      co_return http::error_response(409, "volume " + in_quotes(id) + ": allocations " + running + " still run on node " +
                                              in_quotes(node_id) + "; stop them before detaching");
  } else {
    // The node is gone or down: its allocations will not run again, and the operator takes
    // responsibility for the node side (the node step is skipped).
    for (const auto& alloc : allocs)
      if (const auto* a = store_.allocation(alloc); a && !domain::is_terminal(*a))
        gc::mark_allocation_lost(store_, *a,
                                 "operator detached volume " + in_quotes(id) + " from " +
                                     (node ? "down" : "unknown") + " node " + in_quotes(node_id),
                                 batch, now);
  }
  domain::Volume copy = *v;
  auto target = node_lost ? domain::ClaimState::node_detached : domain::ClaimState::unpublishing;
  for (const auto& alloc : allocs) {
    auto& c = copy.claims.at(alloc);
    if (domain::is_before(c.state, target)) (void)advance_claim(copy, alloc, target, now);
  }
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDetachRequested",
                   .key = id,
                   .message = "operator detach of volume " + in_quotes(id) + " from node " + in_quotes(node_id) +
                              (node_lost ? " (node unavailable: node step skipped)" : ""),
                   .details = {{"node_id", node_id}, {"claims", std::to_string(allocs.size())}}});
  batch.put(copy);  // after mark_allocation_lost's copy of this volume, so this one wins
  auto index = store_.commit(std::move(batch));
  if (!index) co_return write_failed("detach volume \"" + id + "\"", index.error());
  if (gc_) gc_->retry_now(id);
  json claims = json::array();
  for (const auto& alloc : allocs) claims.push_back(domain::to_api_json(store_.volume(id)->claims.at(alloc)));
  auto r = json_ok({{"Index", *index}, {"Claims", claims}});
  r.index = *index;
  co_return r;
}

// ---- external volumes ----

asio::awaitable<http::Response> ControllerEndpoints::list_external_volumes(http::Request req) {
  std::string plugin_id, token;
  std::int32_t max_entries = 0;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!page_params(req, max_entries, token, err)) co_return err;
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return not_found("plugin", plugin_id);
  if (!p->controllers.empty() && !controller_supports(*p, &domain::ControllerInfo::supports_list_volumes))
    co_return bad_request("plugin " + in_quotes(plugin_id) + " does not support LIST_VOLUMES");
  ::csi::v1::ListVolumesRequest csi;
  csi.set_max_entries(max_entries);
  csi.set_starting_token(token);
  auto res = co_await router_.list_volumes(plugin_id, csi);
  if (!res.ok()) co_return listing_failure(res, token, plugin_id);
  json out = json::array();
  for (const auto& e : res.response.entries()) {
    const auto& v = e.volume();
    json nodes = json::array();
    for (const auto& n : e.status().published_node_ids()) nodes.push_back(n);
    json j = {{"ExternalID", v.volume_id()},
              {"CapacityBytes", v.capacity_bytes()},
              {"VolumeContext", json(StringMap(v.volume_context().begin(), v.volume_context().end()))},
              {"SnapshotID", v.content_source().snapshot().snapshot_id()},
              {"CloneID", v.content_source().volume().volume_id()},
              {"PublishedExternalNodeIDs", nodes},
              {"IsAbnormal", e.status().volume_condition().abnormal()},
              {"Status", e.status().volume_condition().message()}};
    out.push_back(std::move(j));
  }
  co_return json_ok({{"Volumes", out}, {"NextToken", res.response.next_token()}});
}

}  // namespace mooring::controlplane::api
