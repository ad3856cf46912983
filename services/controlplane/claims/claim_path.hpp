// Claims room: the claim path a node agent drives — record a claim's intent durably, then (new
// claims only) ControllerPublish it and store the outcome; and the node side of its release.
// Transport-free: the agent API translates its messages to these values and back.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/claims/claim_plan.hpp"
#include "services/controlplane/claims/controller_publisher.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/registry.hpp"

namespace mooring::controlplane {

class StateStore;
class Batch;

// The claim as the node mounts it.
struct GrantedClaim {
  domain::Volume volume;
  domain::Claim claim;  // carries the publish context
  bool read_only = false;
};

struct ClaimFailure {
  Refusal refusal;
  // Answer with this code instead of the refusal's kind: the controller's final error, passed
  // on, or ABORTED when the claim was released while ControllerPublish ran.
  std::optional<grpc::StatusCode> code;
};

using ClaimAnswer = std::variant<GrantedClaim, ClaimFailure>;

// How long a claim that only claims being released stand in the way of waits for them (the
// handoff to a replacement, claim_plan.hpp: waits_for_release): well within the agent's claim
// deadline (60 s), after which the agent asks again.
inline constexpr std::chrono::milliseconds kHandoffWait{std::chrono::seconds(20)};

class ClaimPath {
 public:
  // `executor` must be the store's. `publisher` may be null: claims that need a
  // ControllerPublish are then refused as unavailable and record nothing.
  ClaimPath(boost::asio::any_io_executor executor, StateStore& store, ControllerPublisher* publisher,
            std::chrono::milliseconds handoff_wait = kHandoffWait);

  // Waits for a ControllerPublish of the same volume in flight, and for releases that alone
  // stand in its way (up to the handoff wait), then decides afresh.
  boost::asio::awaitable<ClaimAnswer> claim(ClaimInput input);

  // The node unmounted the volume for the allocation: its claim moves to node-detached.
  // Idempotent; a claim of another node is refused.
  Verdict node_detached(const std::string& volume_key, const std::string& allocation_id, const std::string& node_id);

 private:
  struct Publishing;
  boost::asio::awaitable<ClaimAnswer> decide(ClaimInput input);  // claim() without the timing

  boost::asio::awaitable<void> wait_for_publish(const std::string& volume_id);
  // The plan once no publish of the volume is in flight and no release alone refuses it, or the
  // refusal when the handoff wait ends. Returns without suspending after its last check.
  boost::asio::awaitable<Ruled<ClaimPlan>> plan_when_free(const ClaimInput& input);
  // `late_intent`: the intent the skip-intent fault switch held back (null: none), committed
  // after the ControllerPublish.
  boost::asio::awaitable<ClaimAnswer> publish(const ClaimInput& input, ClaimPlan plan, Batch* late_intent);
  ClaimAnswer settle(const ClaimInput& input, const ClaimPlan& plan, PublishResult result);
  ClaimAnswer settle_failure(const ClaimInput& input, const ClaimPlan& plan, domain::Volume updated,
                             const PublishResult& result);
  // A node running a controller instance of the plugin (healthy or not) is not marked down.
  bool controller_node_up(const std::string& plugin_id) const;
  Verdict commit(Batch batch, const std::string& what);
  Refusal write_failed(const std::string& what, const std::string& error) const;

  StateStore& store_;
  ControllerPublisher* publisher_;
  std::chrono::milliseconds handoff_wait_;
  // Volumes with a ControllerPublish in flight: one CSI call per volume at a time.
  std::set<std::string> publishing_;
  async::WakeSignal publish_done_;
  log::Logger log_{"claims"};
  metrics::Histogram grant_seconds_;  // mooring_claim_grant_seconds (null with metrics off)
};

}  // namespace mooring::controlplane
