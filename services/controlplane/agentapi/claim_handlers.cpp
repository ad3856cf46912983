// ClaimVolume and UnpublishVolume. A new claim is validated by the claim rules, recorded durably
// (the intent, as Swarm does) and only then controller-published; the publish context is stored
// on the claim. A publish that failed for certain frees the claim; one that may have happened
// leaves the claim for release, so ControllerUnpublish always follows an uncertain publish.
#include "services/controlplane/agentapi/controller_publisher.hpp"
#include "services/controlplane/agentapi/handlers.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/domain/proto_convert.hpp"

namespace mooring::controlplane::agentapi {

namespace asio = boost::asio;

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

bool publish_pending(const domain::Claim& c) { return c.state == domain::ClaimState::taken && c.last_error == kPublishPending; }

domain::Event claim_event(std::string type, const std::string& volume_id, const std::string& alloc_id,
                          const std::string& node_id, std::string message) {
  return {.topic = "Claim",
          .type = std::move(type),
          .key = volume_id,
          .message = std::move(message),
          .details = {{"alloc_id", alloc_id}, {"node_id", node_id}}};
}

// Marks the volume busy with a ControllerPublish for as long as it lives, and wakes claims
// waiting for it when it ends (also when the call is cancelled).
struct PublishingGuard {
  Context& ctx;
  std::string volume_id;
  ~PublishingGuard() {
    ctx.publishing.erase(volume_id);
    ctx.publish_done.notify();
  }
};

}  // namespace

asio::awaitable<grpc::Status> claim_volume(Context& ctx, const v1::ClaimVolumeRequest& req,
                                           v1::ClaimVolumeResponse& resp) {
  if (auto st = check_id(domain::IdKind::volume, req.volume_id()); !st.ok()) co_return st;
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) co_return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) co_return st;
  const std::string vid = req.volume_id(), alloc_id = req.alloc_id(), node_id = req.node_id();
  const std::string what = "claim of volume " + quoted(vid) + " by allocation " + quoted(alloc_id);
  const auto mode = domain::from_proto(req.mode());
  if (!mode) co_return invalid_argument(what + ": field \"mode\": must be read or write");
  const auto access = domain::from_proto(req.access_mode());
  if (!access) co_return invalid_argument(what + ": field \"access_mode\": unknown value " + std::to_string(req.access_mode()));
  const auto attachment = domain::from_proto(req.attachment_mode());
  if (!attachment)
    co_return invalid_argument(what + ": field \"attachment_mode\": unknown value " + std::to_string(req.attachment_mode()));

  // One ControllerPublish per volume at a time: wait for one in flight, then decide afresh.
  for (;;) {
    const auto gen = ctx.publish_done.generation();
    if (!ctx.publishing.contains(vid)) break;
    co_await ctx.publish_done.wait(gen);
  }

  // ---- checks and the intent: no suspension from here to the commit ----
  const domain::Node* node = ctx.store.node(node_id);
  if (!node) co_return not_found("node not found: " + node_id);
  const domain::Volume* stored = ctx.store.volume(vid);
  if (!stored) co_return not_found("volume not found: " + vid);
  const domain::Allocation* alloc = ctx.store.allocation(alloc_id);
  if (!alloc) co_return not_found("allocation not found: " + alloc_id);
  if (alloc->node_id != node_id)
    co_return invalid_argument(what + ": the allocation is placed on node " + quoted(alloc->node_id) + ", not on node " +
                               quoted(node_id));
  const domain::VolumeRequest* request = nullptr;
  for (const auto& [name, vr] : alloc->volumes)
    if (domain::claimed_volume_id(vr, alloc->index) == vid) request = &vr;
  if (!request) co_return invalid_argument(what + ": the allocation does not request this volume");
  const bool read_only = *mode == domain::ClaimMode::read || request->read_only;

  const domain::Plugin* plugin = ctx.store.plugin(stored->plugin_id);
  const domain::PluginInstance* instance = nullptr;
  if (auto it = node->plugins.find(stored->plugin_id); it != node->plugins.end() && domain::has_node(it->second.type))
    instance = &it->second;

  bool was_pending = false;
  if (auto own = stored->claims.find(alloc_id); own != stored->claims.end()) was_pending = publish_pending(own->second);

  domain::Volume volume = *stored;
  const auto now = domain::now();
  ClaimRequest cr{.allocation_id = alloc_id,
                  .node_id = node_id,
                  .external_node_id = instance && instance->node_info ? instance->node_info->id : std::string{},
                  .mode = *mode,
                  .access_mode = *access,
                  .attachment_mode = *attachment};
  auto outcome = take_claim(volume, cr, now);
  if (!outcome) co_return to_status(outcome.refusal());

  if (*outcome == ClaimOutcome::unchanged && !was_pending) {
    // Idempotent re-claim: the stored publish context, no controller call.
    *resp.mutable_volume() = domain::mount_info(volume, volume.claims.at(alloc_id), read_only);
    co_return grpc::Status::OK;
  }
  if (*outcome == ClaimOutcome::created) {
    if (domain::is_terminal(*alloc) || alloc->desired_status == domain::DesiredStatus::stop)
      co_return invalid_argument(what + ": the allocation is " +
                                 std::string(domain::is_terminal(*alloc) ? domain::to_string(alloc->client_status)
                                                                         : std::string_view("stopping")) +
                                 " and takes no new claims");
    if (auto refused = check_schedulable(*stored, plugin)) co_return to_status(*refused);
    if (!instance)
      co_return unavailable(what + ": node " + quoted(node_id) + " has not reported a node instance of plugin " +
                            quoted(stored->plugin_id) + " yet");
    if (!instance->healthy)
      co_return unavailable(what + ": plugin " + quoted(stored->plugin_id) + " is unhealthy on node " +
                            quoted(node_id) + (instance->health_description.empty() ? "" : ": " + instance->health_description));
    if (!instance->node_info || instance->node_info->id.empty())
      co_return unavailable(what + ": plugin " + quoted(stored->plugin_id) + " on node " + quoted(node_id) +
                            " has not reported its CSI node id");
  }

  // Whether the controller attaches the volume: a new claim on a plugin whose facts are not known
  // yet (its controller's agent restarted and has not fingerprinted it again) waits rather than
  // guessing "no" and leaving the release nothing to undo.
  std::optional<bool> needs_publish = plugin ? domain::needs_controller_publish(*plugin) : std::optional<bool>(false);
  if (*outcome == ClaimOutcome::created && !needs_publish)
    co_return unavailable(what + ": plugin " + quoted(stored->plugin_id) +
                          " advertises a controller service, but no controller instance has reported its "
                          "capabilities yet; retry the claim");
  const bool publish = needs_publish.value_or(false) && (*outcome == ClaimOutcome::created || was_pending);
  if (publish && !ctx.publisher && *outcome == ClaimOutcome::created)
    co_return unavailable(what + ": plugin " + quoted(stored->plugin_id) +
                          " needs ControllerPublishVolume and no controller route is configured");
  auto& claim = volume.claims.at(alloc_id);
  if (publish) {
    claim.last_error = kPublishPending;  // take_claim clears it; the intent carries it
    claim.controller_publish = domain::ControllerPublish::sent;
  } else if (*outcome == ClaimOutcome::created) {
    claim.controller_publish = domain::ControllerPublish::not_needed;
  }
  {
    Batch batch;
    if (*outcome == ClaimOutcome::created)
      batch.add_event(claim_event("ClaimTaken", vid, alloc_id, node_id,
                                  "volume " + quoted(vid) + " claimed for " + std::string(domain::to_string(*mode)) +
                                      " by allocation " + quoted(alloc_id) + " on node " + quoted(node_id)));
    if (volume != *stored) batch.put(volume);
    if (auto r = ctx.store.commit(std::move(batch)); !r) co_return write_failed(ctx, what, r.error());
  }
  if (!publish) {
    *resp.mutable_volume() = domain::mount_info(volume, volume.claims.at(alloc_id), read_only);
    co_return grpc::Status::OK;
  }

  // ---- ControllerPublish: the intent is durable; the store may change while we wait ----
  ctx.publishing.insert(vid);
  PublishingGuard guard{ctx, vid};
  const domain::Claim claim_copy = volume.claims.at(alloc_id);
  // Group commit: the intent is in memory; it must be on disk before the controller hears of it.
  if (auto st = co_await ctx.store.durable(ctx.store.index()); !st) co_return write_failed(ctx, what, st.error());
  PublishResult result;
  if (ctx.publisher) {
    result = co_await ctx.publisher->publish(volume, claim_copy, claim_copy.external_node_id);
  } else {
    result.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "no controller route is configured");
  }

  const domain::Volume* after = ctx.store.volume(vid);
  const domain::Claim* current = nullptr;
  if (after) {
    auto it = after->claims.find(alloc_id);
    if (it != after->claims.end()) current = &it->second;
  }
  if (!current || current->state != domain::ClaimState::taken) {
    // Released while the controller worked (allocation stopped, operator detach): the release
    // path owns it now and ends with ControllerUnpublish.
    ctx.log.warn("claim released while ControllerPublishVolume ran",
                 {{"volume_id", vid}, {"alloc_id", alloc_id}, {"publish_ok", result.status.ok()}});
    co_return grpc::Status(grpc::StatusCode::ABORTED,
                           what + ": the claim was released while ControllerPublishVolume ran");
  }
  domain::Volume updated = *after;
  auto& c = updated.claims.at(alloc_id);
  const auto done = domain::now();
  if (result.status.ok()) {
    c.publish_context = std::move(result.publish_context);
    c.last_error.clear();
    c.update_time = done;
    Batch batch;
    batch.put(updated);
    batch.add_event(claim_event("ClaimPublished", vid, alloc_id, node_id,
                                "volume " + quoted(vid) + " controller-published to node " + quoted(node_id) +
                                    " (CSI node " + quoted(c.external_node_id) + ")"));
    if (auto r = ctx.store.commit(std::move(batch)); !r) co_return write_failed(ctx, what, r.error());
    *resp.mutable_volume() = domain::mount_info(updated, updated.claims.at(alloc_id), read_only);
    co_return grpc::Status::OK;
  }

  const auto code = result.status.error_code();
  const auto outcome_class = csi::classify(csi::Rpc::ControllerPublishVolume, code);
  const std::string failure = "ControllerPublishVolume failed: " + csi::status_text(result.status);
  // Certainly not published: nothing was sent, or a final error on the first attempt (a retry
  // of a pending publish may follow an earlier attempt that did publish).
  const bool certain = !result.sent || (outcome_class == csi::Outcome::final_error && !was_pending);
  Batch batch;
  if (certain) {
    free_claim(updated, alloc_id);
    batch.add_event(claim_event("ClaimDropped", vid, alloc_id, node_id,
                                "volume " + quoted(vid) + ": claim of allocation " + quoted(alloc_id) +
                                    " dropped: " + failure));
  } else {
    (void)advance_claim(updated, alloc_id, domain::ClaimState::unpublishing, done);
    (void)record_release_failure(updated, alloc_id, failure, domain::Time{}, done);
    batch.add_event(claim_event("ClaimReleaseRequested", vid, alloc_id, node_id,
                                "volume " + quoted(vid) + ": " + failure +
                                    "; the publish may have happened, so the claim is released with "
                                    "ControllerUnpublishVolume"));
  }
  batch.put(updated);
  if (auto r = ctx.store.commit(std::move(batch)); !r) co_return write_failed(ctx, what, r.error());
  ctx.log.warn("controller publish failed",
               {{"volume_id", vid}, {"alloc_id", alloc_id}, {"node_id", node_id}, {"code", std::string(csi::code_name(code))},
                {"outcome", csi::to_string(outcome_class)}, {"claim", certain ? "dropped" : "released"}});
  if (certain && result.sent && outcome_class == csi::Outcome::final_error)
    co_return grpc::Status(code, "volume " + quoted(vid) + ": " + failure);
  co_return unavailable("volume " + quoted(vid) + ": " + failure + (certain ? "" : "; the claim is being released") +
                        "; retry the claim");
}

grpc::Status unpublish_volume(Context& ctx, const v1::UnpublishVolumeRequest& req, v1::UnpublishVolumeResponse&) {
  if (auto st = check_id(domain::IdKind::volume, req.volume_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  const std::string vid = req.volume_id(), alloc_id = req.alloc_id(), node_id = req.node_id();
  const auto* stored = ctx.store.volume(vid);
  if (!stored) return grpc::Status::OK;  // nothing left to release
  auto it = stored->claims.find(alloc_id);
  if (it == stored->claims.end()) return grpc::Status::OK;  // already freed
  if (it->second.node_id != node_id)
    return invalid_argument("volume " + quoted(vid) + ": the claim of allocation " + quoted(alloc_id) +
                            " belongs to node " + quoted(it->second.node_id) + ", not to node " + quoted(node_id));
  if (static_cast<int>(it->second.state) >= static_cast<int>(domain::ClaimState::node_detached)) return grpc::Status::OK;
  domain::Volume volume = *stored;
  if (auto refused = advance_claim(volume, alloc_id, domain::ClaimState::node_detached, domain::now()))
    return to_status(*refused);
  Batch batch;
  batch.put(std::move(volume));
  batch.add_event(claim_event("ClaimNodeDetached", vid, alloc_id, node_id,
                              "volume " + quoted(vid) + ": node " + quoted(node_id) + " unmounted it for allocation " +
                                  quoted(alloc_id)));
  if (auto r = ctx.store.commit(std::move(batch)); !r)
    return write_failed(ctx, "unpublish of volume " + quoted(vid), r.error());
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentapi
