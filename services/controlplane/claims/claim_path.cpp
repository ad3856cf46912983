#include "services/controlplane/claims/claim_path.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <grpcpp/support/status.h>

#include "services/controlplane/claims/fault_switch.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"
#include "shared/metrics/families.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

namespace asio = boost::asio;

namespace {

// Keyed by the volume's id in its namespace, as every volume event is.
domain::Event claim_event(std::string type, const std::string& volume_key, const std::string& alloc_id,
                          const std::string& node_id, std::string message) {
  auto ref = domain::split_volume_key(volume_key);
  return {.topic = "Claim",
          .type = std::move(type),
          .ns = ref ? ref->ns : std::string(domain::kDefaultNamespace),
          .key = ref ? ref->id : volume_key,
          .message = std::move(message),
          .details = {{"alloc_id", alloc_id}, {"node_id", node_id}}};
}

ClaimFailure failed(Refusal refusal) { return {.refusal = std::move(refusal), .code = std::nullopt}; }

}  // namespace

// Marks the volume busy with a ControllerPublish for as long as it lives, and wakes claims
// waiting for it when it ends (also when the call is cancelled).
struct ClaimPath::Publishing {
  ClaimPath& path;
  std::string volume_id;
  Publishing(ClaimPath& p, std::string id) : path(p), volume_id(std::move(id)) { path.publishing_.insert(volume_id); }
  ~Publishing() {
    path.publishing_.erase(volume_id);
    path.publish_done_.notify();
  }
  Publishing(const Publishing&) = delete;
  Publishing& operator=(const Publishing&) = delete;
};

ClaimPath::ClaimPath(asio::any_io_executor executor, StateStore& store, ControllerPublisher* publisher,
                     std::chrono::milliseconds handoff_wait)
    : store_(store), publisher_(publisher), handoff_wait_(handoff_wait), publish_done_(std::move(executor)) {
  if (auto* f = metrics::families()) grant_seconds_ = f->claim_grant_seconds;
}

asio::awaitable<void> ClaimPath::wait_for_publish(const std::string& volume_id) {
  for (;;) {
    const auto gen = publish_done_.generation();
    if (!publishing_.contains(volume_id)) co_return;
    co_await publish_done_.wait(gen);
  }
}

asio::awaitable<ClaimAnswer> ClaimPath::claim(ClaimInput input) {
  // Granted claims only: from the agent's claim (waits for another publish of the volume
  // included) to the answer that carries the publish context.
  const auto started = std::chrono::steady_clock::now();
  ClaimAnswer answer = co_await decide(std::move(input));
  if (std::holds_alternative<GrantedClaim>(answer)) grant_seconds_.observe(std::chrono::steady_clock::now() - started);
  co_return answer;
}

asio::awaitable<Ruled<ClaimPlan>> ClaimPath::plan_when_free(const ClaimInput& input) {
  const auto until = std::chrono::steady_clock::now() + handoff_wait_;
  const auto leaving = [this](const std::string& id) { return is_leaving(store_.allocation(id)); };
  for (;;) {
    co_await wait_for_publish(input.volume_key);
    const std::uint64_t seen = store_.table_index(Table::volumes);
    const domain::Volume* stored = store_.volume(input.volume_key);
    const auto now = domain::now();
    auto plan = plan_claim(input, store_.node(input.node_id), stored, store_.allocation(input.allocation_id),
                           stored ? store_.plugin(stored->plugin_id) : nullptr, publisher_ != nullptr, now);
    const auto left = until - std::chrono::steady_clock::now();
    // A claim of an allocation that is itself leaving is refused at once: no release makes it
    // grantable.
    if (plan || plan.refusal().kind != Refusal::Kind::conflict || left <= left.zero() || store_.released() ||
        leaving(input.allocation_id) || !waits_for_release(input, *stored, leaving, now))
      co_return plan;
    // The release's commits (node-detached, freed) wake it; so does any other volume write.
    co_await store_.wait_for_change(Table::volumes, seen, left);
  }
}

asio::awaitable<ClaimAnswer> ClaimPath::decide(ClaimInput input) {
  // No suspension from the last check to the commit of the intent.
  auto plan = co_await plan_when_free(input);
  if (!plan) co_return failed(plan.refusal());
  const domain::Volume* stored = store_.volume(input.volume_key);
  Batch late_intent;
  bool held_back = false;
  if (plan->record) {
    Batch batch;
    if (plan->outcome == ClaimOutcome::created)
      batch.add_event(claim_event("ClaimTaken", input.volume_key, input.allocation_id, input.node_id,
                                  "volume " + in_quotes(input.volume_key) + " claimed for " +
                                      std::string(domain::to_string(input.mode)) + " by allocation " +
                                      in_quotes(input.allocation_id) + " on node " + in_quotes(input.node_id)));
    if (plan->volume != *stored) batch.put(plan->volume);
    held_back = plan->publish && fault_switch(FaultSwitch::skip_intent);
    if (held_back)
      late_intent = std::move(batch);
    else if (auto refused = commit(std::move(batch), claim_subject(input)))
      co_return failed(*refused);
  }
  if (!plan->publish) {
    const auto& claim = plan->volume.claims.at(input.allocation_id);
    co_return GrantedClaim{.volume = plan->volume, .claim = claim, .read_only = plan->read_only};
  }
  co_return co_await publish(input, std::move(*plan), held_back ? &late_intent : nullptr);
}

// The intent is committed; the store may change while the controller works.
asio::awaitable<ClaimAnswer> ClaimPath::publish(const ClaimInput& input, ClaimPlan plan, Batch* late_intent) {
  const Publishing busy(*this, input.volume_key);
  const domain::Claim claim = plan.volume.claims.at(input.allocation_id);
  // Group commit: the intent is in memory; it must be on disk before the controller hears of it.
  if (auto st = co_await store_.durable(store_.index()); !st)
    co_return failed(write_failed(claim_subject(input), st.error()));
  PublishResult result;
  // Once sent, the ControllerPublish runs to its answer even when the agent that asked stops
  // waiting (its claim RPC cancelled): cancelled here, the call would give up the volume's lock in
  // the router while the plugin may still publish, and the release's ControllerUnpublish would
  // overtake it and leave the volume published with no claim (chaos checker, release-order).
  if (publisher_)
    result = co_await asio::co_spawn(co_await asio::this_coro::executor,
                                     publisher_->publish(plan.volume, claim, claim.external_node_id),
                                     asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
  else
    result.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "no controller route is configured");
  if (late_intent)
    if (auto refused = commit(std::move(*late_intent), claim_subject(input))) co_return failed(*refused);
  co_return settle(input, plan, std::move(result));
}

ClaimAnswer ClaimPath::settle(const ClaimInput& input, const ClaimPlan& plan, PublishResult result) {
  const std::string what = claim_subject(input);
  const domain::Volume* after = store_.volume(input.volume_key);
  const domain::Claim* current = nullptr;
  if (after)
    if (auto it = after->claims.find(input.allocation_id); it != after->claims.end()) current = &it->second;
  if (!current || current->state != domain::ClaimState::taken) {
    // Released while the controller worked (allocation stopped, operator detach): the release
    // path owns it now and ends with ControllerUnpublish.
    log_.warn("claim released while ControllerPublishVolume ran",
              {{"volume_id", input.volume_key}, {"alloc_id", input.allocation_id}, {"publish_ok", result.status.ok()}});
    return ClaimFailure{.refusal = conflict(what + ": the claim was released while ControllerPublishVolume ran"),
                        .code = grpc::StatusCode::ABORTED};
  }
  domain::Volume updated = *after;
  if (!result.status.ok()) return settle_failure(input, plan, std::move(updated), result);

  record_publish(updated, input.allocation_id, std::move(result.publish_context), domain::now());
  const auto& claim = updated.claims.at(input.allocation_id);
  Batch batch;
  batch.put(updated);
  batch.add_event(claim_event("ClaimPublished", input.volume_key, input.allocation_id, input.node_id,
                              "volume " + in_quotes(input.volume_key) + " controller-published to node " +
                                  in_quotes(input.node_id) + " (CSI node " + in_quotes(claim.external_node_id) + ")"));
  if (auto refused = commit(std::move(batch), what)) return failed(*refused);
  return GrantedClaim{.volume = updated, .claim = claim, .read_only = plan.read_only};
}

ClaimAnswer ClaimPath::settle_failure(const ClaimInput& input, const ClaimPlan& plan, domain::Volume updated,
                                      const PublishResult& result) {
  const grpc::Status& status = result.status;
  const auto code = status.error_code();
  const bool unheard = (!result.sent || result.unreached) && controller_node_up(updated.plugin_id);
  // An earlier controller's uncertain answer counts as an earlier attempt: it may still publish
  // after a later controller's refusal (a claim dropped then leaves the volume published).
  const bool maybe_published = plan.retry_of_pending || result.uncertain_earlier;
  const auto failure = classify_publish_failure(code, result.sent, maybe_published, unheard);
  const std::string text = "ControllerPublishVolume failed: " + csi::status_text(status);
  const std::string subject = "volume " + in_quotes(input.volume_key);
  if (failure.kept) {
    log_.info(
        "controller publish not sent; the claim keeps waiting for it",
        {{"volume_id", input.volume_key}, {"alloc_id", input.allocation_id}, {"error", csi::status_text(status)}});
    return failed(unavailable(subject + ": " + text + "; the claim still waits for its publish; retry the claim"));
  }
  record_publish_failure(updated, input.allocation_id, failure, text, domain::now());
  Batch batch;
  if (failure.certain)
    batch.add_event(
        claim_event("ClaimDropped", input.volume_key, input.allocation_id, input.node_id,
                    subject + ": claim of allocation " + in_quotes(input.allocation_id) + " dropped: " + text));
  else
    batch.add_event(claim_event("ClaimReleaseRequested", input.volume_key, input.allocation_id, input.node_id,
                                subject + ": " + text +
                                    "; the publish may have happened, so the claim is released with "
                                    "ControllerUnpublishVolume"));
  batch.put(updated);
  if (auto refused = commit(std::move(batch), claim_subject(input))) return failed(*refused);
  log_.warn("controller publish failed", {{"volume_id", input.volume_key},
                                          {"alloc_id", input.allocation_id},
                                          {"node_id", input.node_id},
                                          {"code", std::string(csi::code_name(code))},
                                          {"outcome", csi::to_string(failure.outcome)},
                                          {"claim", failure.certain ? "dropped" : "released"}});
  if (failure.rejected) return ClaimFailure{.refusal = invalid(subject + ": " + text), .code = code};
  auto retry = unavailable(subject + ": " + text + (failure.certain ? "" : "; the claim is being released") +
                           "; retry the claim");
  // The node's limit (CSI: max volumes attached): its agent reads its plugins' limits again.
  if (code == grpc::StatusCode::RESOURCE_EXHAUSTED) return ClaimFailure{.refusal = std::move(retry), .code = code};
  return failed(std::move(retry));
}

bool ClaimPath::controller_node_up(const std::string& plugin_id) const {
  const domain::Plugin* plugin = store_.plugin(plugin_id);
  if (!plugin) return false;
  for (const auto& [node_id, instance] : plugin->controllers) {
    const domain::Node* node = store_.node(node_id);
    if (node && node->status != domain::NodeStatus::down) return true;
  }
  return false;
}

Verdict ClaimPath::node_detached(const std::string& volume_key, const std::string& allocation_id,
                                 const std::string& node_id) {
  const auto* stored = store_.volume(volume_key);
  if (!stored) return std::nullopt;  // nothing left to release
  auto it = stored->claims.find(allocation_id);
  if (it == stored->claims.end()) return std::nullopt;  // already freed
  if (it->second.node_id != node_id)
    return invalid("volume " + in_quotes(volume_key) + ": the claim of allocation " + in_quotes(allocation_id) +
                   " belongs to node " + in_quotes(it->second.node_id) + ", not to node " + in_quotes(node_id));
  if (!domain::is_before(it->second.state, domain::ClaimState::node_detached)) return std::nullopt;
  domain::Volume volume = *stored;
  if (auto refused = advance_claim(volume, allocation_id, domain::ClaimState::node_detached, domain::now()))
    return refused;
  Batch batch;
  batch.put(std::move(volume));
  batch.add_event(claim_event("ClaimNodeDetached", volume_key, allocation_id, node_id,
                              "volume " + in_quotes(volume_key) + ": node " + in_quotes(node_id) +
                                  " unmounted it for allocation " + in_quotes(allocation_id)));
  return commit(std::move(batch), "unpublish of volume " + in_quotes(volume_key));
}

Verdict ClaimPath::commit(Batch batch, const std::string& what) {
  if (auto r = store_.commit(std::move(batch)); !r) return write_failed(what, r.error());
  return std::nullopt;
}

// The state could not be made durable: retryable for the agent.
Refusal ClaimPath::write_failed(const std::string& what, const std::string& error) const {
  log_.error("state write failed", {{"what", what}, {"error", error}});
  return unavailable(what + ": the state could not be written: " + error);
}

}  // namespace mooring::controlplane
