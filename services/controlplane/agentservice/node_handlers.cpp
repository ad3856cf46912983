// RegisterNode and Heartbeat: the node record, the plugin aggregates its fingerprints feed, and
// liveness. A heartbeat that changes nothing writes nothing.
#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/claims/volume_health.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "services/controlplane/nodes/node_report.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::controlplane::agentservice {

namespace {

// Fingerprints from the wire, each validated (an unknown plugin type is the agent's bug).
grpc::Status read_fingerprints(const google::protobuf::RepeatedPtrField<v1::PluginFingerprint>& fps,
                               const std::string& node_id, std::vector<domain::PluginInstance>& out) {
  for (const auto& fp : fps) {
    if (auto st = check_id(domain::IdKind::plugin, fp.plugin_id()); !st.ok()) return st;
    auto inst = domain::from_proto(fp, node_id);
    if (!inst) return invalid_argument("node \"" + node_id + "\": " + inst.error());
    out.push_back(std::move(*inst));
  }
  return grpc::Status::OK;
}

// What the answer tells the agent: its TTL, the pace asked of a large fleet, and the leader epoch
// its calls to the agent carry (left out while this leader does not know it).
template <class Response>
void set_answer(const Context& ctx, Response& resp, const HeartbeatPace& pace) {
  resp.set_heartbeat_ttl_ms(pace.ttl.count());
  resp.set_heartbeat_min_interval_ms(pace.min_interval.count());
  const std::optional<domain::LeaderEpoch> epoch =
      ctx.options.leader_epoch ? ctx.options.leader_epoch() : std::optional(domain::LeaderEpoch{});
  if (!epoch) return;
  resp.mutable_leader_epoch()->set_cluster_id(epoch->cluster);
  resp.mutable_leader_epoch()->set_revision(epoch->revision);
}

}  // namespace

grpc::Status register_node(Context& ctx, const v1::RegisterNodeRequest& req, v1::RegisterNodeResponse& resp,
                           const Caller& caller) {
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  if (req.address().empty())
    return invalid_argument("node \"" + req.node_id() + "\": field \"address\": required (the control plane dials it)");
  std::vector<domain::PluginInstance> plugins;
  if (auto st = read_fingerprints(req.plugins(), req.node_id(), plugins); !st.ok()) return st;
  NodeRegistration reg{.node_id = req.node_id(),
                       .name = req.name(),
                       .address = req.address(),
                       .attributes = {req.attributes().begin(), req.attributes().end()},
                       .agent_version = req.agent_version()};
  // What the node record keeps of the caller's certificate: its not-after and its key's hash.
  reg.certificate_expires = caller.presented.expires;
  reg.certificate_key_sha256 = caller.presented.key_sha256;
  auto change = plan_registration(ctx.store.node(req.node_id()), reg, std::move(plugins), domain::now());
  Batch batch;
  change.stage(batch);
  stage_adopted_renewal(ctx, caller, batch);
  if (auto r = ctx.store.commit(std::move(batch)); !r)
    return write_failed(ctx, "register node \"" + req.node_id() + "\"", r.error());
  const auto pace = ctx.liveness.seen(req.node_id());  // the TTL this node is now judged by
  if (ctx.options.registrations) ctx.options.registrations->registered(req.node_id());
  ctx.log.info("node registered",
               {{"node_id", req.node_id()}, {"address", req.address()}, {"plugins", req.plugins_size()}});
  set_answer(ctx, resp, pace);
  return grpc::Status::OK;
}

grpc::Status heartbeat(Context& ctx, const v1::HeartbeatRequest& req, v1::HeartbeatResponse& resp,
                       const Caller& caller) {
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  const domain::Node* node = ctx.store.node(req.node_id());
  if (!node) {
    set_answer(ctx, resp, ctx.liveness.pace());
    resp.set_known(false);
    return grpc::Status::OK;
  }
  resp.set_known(true);
  std::vector<domain::PluginInstance> plugins;
  if (auto st = read_fingerprints(req.plugins(), req.node_id(), plugins); !st.ok()) return st;
  std::vector<domain::NodeEvent> events;
  for (const auto& e : req.events()) events.push_back(domain::from_proto(e));
  // Seen before the commit: a heartbeat that arrives is proof of life even if the disk is full;
  // and not silent until the agent has our answer (the service calls answered()).
  set_answer(ctx, resp, ctx.liveness.arrived(req.node_id()));  // the TTL this node is now judged by
  auto change = plan_heartbeat(*node, std::move(plugins), std::move(events), domain::now());
  // A renewed certificate shows up with the first call made over it (a new connection).
  const auto& cert = caller.presented;
  if (caller.checked &&
      (cert.expires != change.node.certificate_expires || cert.key_sha256 != change.node.certificate_key_sha256)) {
    change.node.certificate_expires = cert.expires;
    change.node.certificate_key_sha256 = cert.key_sha256;
    change.node_changed = true;
  }
  std::vector<domain::VolumeStatsReport> reports;
  for (const auto& s : req.volume_stats()) reports.push_back(domain::from_proto(s));
  auto health =
      plan_volume_stats(req.node_id(), reports, [&](const std::string& key) { return ctx.store.volume(key); });
  Batch batch;
  stage_adopted_renewal(ctx, caller, batch);
  if (change.empty() && health.empty() && batch.empty()) return grpc::Status::OK;
  change.stage(batch);
  for (auto& v : health.volumes) batch.put(std::move(v));
  for (auto& e : health.events) batch.add_event(std::move(e));
  // On failure the agent keeps its events and stats and sends them again with the next heartbeat.
  if (auto r = ctx.store.commit(std::move(batch)); !r)
    return write_failed(ctx, "heartbeat of node \"" + req.node_id() + "\"", r.error());
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
