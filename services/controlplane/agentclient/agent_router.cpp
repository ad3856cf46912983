#include "services/controlplane/agentclient/agent_router.hpp"

#include <algorithm>
#include <map>

#include <grpcpp/grpcpp.h>

#include "services/controlplane/agentclient/agent_call_table.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/client_call.hpp"
#include "shared/rpc/csi_rpc_metrics.hpp"

namespace mooring::controlplane::agentclient {

using domain::in_quotes;

namespace asio = boost::asio;

namespace {

const log::Logger& logger() {
  static const log::Logger instance{"agentclient"};
  return instance;
}

// An attempt that could not connect to the node's agent: said as such, not as gRPC's transport
// text ("failed to connect to all addresses ... Connection refused"); the caller answers 503.
std::string not_connected(const std::string& node_id) {
  return "the agent of node " + in_quotes(node_id) + " is not connected (restarting, or unreachable); retry shortly";
}

}  // namespace

struct AgentRouter::Impl {
  struct Cached {
    std::string address;
    std::uint64_t registration = 0;  // the node's registration count it was made for
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<Stub> stub;
  };

  // How one attempt ended. `connected`: the channel to the agent was up after it (the agent
  // answered, or the connection broke mid-call); false: it could not connect, nobody heard it.
  struct Attempt {
    grpc::Status status;
    bool connected = false;
    bool ok() const { return status.ok(); }
  };

  // Where an attempt went: the node's agent address and its registration count then.
  struct Sent {
    std::string address;
    std::uint64_t registration = 0;
  };

  // A node whose agent keeps being replaced under a call gets it at most this many more times.
  static constexpr int kMaxResends = 3;

  explicit Impl(AgentRouter& r) : router(r) {}

  // The channel and stub for the node's current address; a changed address gets a fresh channel
  // (the old one is dropped once calls in flight on it finish, since they hold a copy).
  Cached channel(const domain::Node& node) {
    auto& c = channels[node.id];
    const std::uint64_t registered = registration(node.id);
    // A new registration at the same address is a new agent too: a fresh channel dials it at once,
    // where the old one may still be waiting out its reconnect backoff from the agent's absence.
    if (!c.stub || c.address != node.address || c.registration != registered) {
      if (c.stub)
        logger().info("node agent registered again; new channel",
                      {{"node_id", node.id}, {"old", c.address}, {"new", node.address}});
      c.address = node.address;
      c.registration = registered;
      // With mutual TLS the agent must prove it is this node: its certificate must carry the
      // node id, whatever answers at the registered address.
      auto options = router.options_.channel;
      options.peer = tls::Identity{tls::Role::agent, node.id};
      c.channel = rpc::make_channel(node.address, options);
      c.stub = std::shared_ptr<Stub>(v1::NodeAgent::NewStub(c.channel).release());
    }
    return c;
  }

  std::uint64_t registration(const std::string& node_id) const {
    return router.options_.registrations ? router.options_.registrations->count(node_id) : 0;
  }

  std::chrono::milliseconds timeout(csi::Rpc rpc, std::chrono::milliseconds extra = {}) const {
    if (router.options_.timeout_override) return *router.options_.timeout_override;
    return csi::policy(rpc).timeout + extra + router.options_.forward_margin;
  }

  // Nothing was asked: no node to ask, or the state the caller decided from was lost. Callers
  // treat this as certainly not done (nothing to undo).
  template <class Resp>
  static void not_sent(AgentResult<Resp>& out, csi::Rpc rpc, const std::string& what, std::string reason) {
    out.no_target = true;
    out.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, std::move(reason));
    out.outcome = csi::classify(rpc, out.status.error_code());
    out.error = what + ": " + out.status.error_message();
  }

  // One attempt against one node. The node is only read before the first suspension.
  template <class Req, class Resp, class Start>
  asio::awaitable<Attempt> call(const domain::Node& node, std::chrono::milliseconds timeout, const Req& request,
                                Resp& response, Start start) {
    // Named locals, not temporaries, as coroutine arguments: GCC 12 mishandles the lifetime of
    // class temporaries passed by value to a coroutine (a captured shared_ptr was released twice).
    Cached c = channel(node);
    Stub* raw = c.stub.get();
    rpc::CallOptions options;
    options.timeout = timeout;
    options.wait_for_ready = false;
    if (router.options_.leader_epoch)
      if (const auto epoch = router.options_.leader_epoch())
        options.metadata.emplace_back(domain::kLeaderEpochHeader, epoch->to_text());
    rpc::StartUnary begin = [raw, &request, &response, start](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      start(*raw, ctx, &request, &response, std::move(done));
    };
    Attempt out;
    out.status = co_await rpc::unary(std::move(options), std::move(begin));
    out.connected = c.channel->GetState(false) == GRPC_CHANNEL_READY;
    co_return out;
  }

  // Why nothing may go out yet: the state read up to `seen` is not on disk (group commit; nor will
  // it be, when a flush failed) or the HA hold refuses. Asked before every attempt, resends too.
  asio::awaitable<std::optional<std::string>> refused_to_send(std::uint64_t seen) const {
    if (auto st = co_await router.store_.durable(seen); !st) co_return "control plane: " + st.error();
    if (auto why = co_await router.held()) co_return "control plane: " + *why;
    co_return std::nullopt;
  }

  // A call to one node that follows the node's agent when it is replaced: an attempt that fails
  // UNAVAILABLE goes again, with the same request (the same operation id: one logical call), to
  // the agent that registered for the node since — at once if it has, or, when the attempt could
  // not connect, once it does within `wait`. The answer of the last attempt stands when the node
  // is gone or marked down (really lost: the callers' rules for that apply), when the agent
  // itself answered and has not been replaced, or when nobody registers in time. `plugin_id`
  // (controller calls): resent only while the node runs a healthy controller of that plugin.
  template <class Req, class Resp, class Start>
  asio::awaitable<Attempt> send(const domain::Node& first, const std::string& plugin_id, std::chrono::milliseconds wait,
                                std::chrono::milliseconds timeout, const Req& request, Resp& response, Start start) {
    const std::string node_id = first.id;
    const domain::Node* node = &first;
    for (int resends = 0;; ++resends) {
      const Sent sent{node->address, registration(node_id)};
      const Attempt attempt = co_await call(*node, timeout, request, response, start);
      if (attempt.status.error_code() != grpc::StatusCode::UNAVAILABLE || resends == kMaxResends) co_return attempt;
      node =
          co_await registered_again(node_id, plugin_id, sent, attempt.connected ? std::chrono::milliseconds{0} : wait);
      if (!node) co_return attempt;
      logger().info("node agent registered again; sending the call to it",
                    {{"node_id", node_id},
                     {"old", sent.address},
                     {"new", node->address},
                     {"error", csi::status_text(attempt.status)}});
    }
  }

  // The node once a new agent registered for it after `sent` (another address, or another
  // registration at the same one) and can take the call; null when the node is gone or marked
  // down, or `wait` passes first. The call then goes out on the state read here: that is made
  // durable first, and the HA hold asked, as before the first attempt.
  asio::awaitable<const domain::Node*> registered_again(const std::string& node_id, const std::string& plugin_id,
                                                        const Sent& sent, std::chrono::milliseconds wait) {
    const StateStore& store = router.store_;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    auto ready_again = [&](const domain::Node& n) {
      const bool replaced = n.address != sent.address || registration(node_id) != sent.registration;
      const bool serves =
          n.status == domain::NodeStatus::ready && !n.address.empty() &&
          (plugin_id.empty() || std::ranges::count(router.controller_candidates(plugin_id), node_id) > 0);
      return replaced && serves;
    };
    for (;;) {
      const std::uint64_t seen = store.table_index(Table::nodes);
      const domain::Node* node = store.node(node_id);
      if (!node || node->status == domain::NodeStatus::down || store.released()) co_return nullptr;
      if (ready_again(*node)) {
        if (co_await refused_to_send(store.index())) co_return nullptr;
        node = store.node(node_id);  // read again after the suspensions
        if (node && ready_again(*node)) co_return node;
        continue;
      }
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= left.zero()) co_return nullptr;
      co_await store.wait_for_change(Table::nodes, seen, left);
    }
  }

  template <class Req>
  asio::awaitable<AnswerTo<Req>> to_node(std::string what, std::string node_id, Req request,
                                         std::chrono::milliseconds timeout) {
    constexpr csi::Rpc classify_as = AgentCall<Req>::classified;
    // The coroutine starts synchronously in the caller's co_await: `seen` covers what it read.
    // That must be on disk before anything goes out (group commit), and the node is looked up
    // only after the wait (a failed flush reloads the store).
    const std::uint64_t seen = router.store_.index();
    AnswerTo<Req> out;
    out.node_id = node_id;
    const std::string where = what + " on node " + in_quotes(node_id);
    if (auto why = co_await refused_to_send(seen)) {
      not_sent(out, classify_as, where, *why);
      co_return out;
    }
    const domain::Node* node = router.store_.node(node_id);
    if (!node || node->address.empty()) {
      not_sent(out, classify_as, where,
               node ? "node " + in_quotes(node_id) + " has no agent address"
                    : "node " + in_quotes(node_id) + " is not registered");
      co_return out;
    }
    const auto started = std::chrono::steady_clock::now();
    std::string unnamed;  // a node call: no controller to check for a resend
    // Only the release's node step (the claim GC, in the background) waits for an agent that
    // cannot be reached; an expand or a stats query has an operator waiting for its answer.
    const auto wait = classify_as == csi::Rpc::NodeUnpublishVolume ? router.options_.reregistration_wait
                                                                   : std::chrono::milliseconds{0};
    const Attempt attempt = co_await send(*node, unnamed, wait, timeout, request, out.response, &AgentCall<Req>::start);
    out.status = attempt.status;
    out.unreached = !attempt.ok() && !attempt.connected;
    if constexpr (requires { request.plugin_id(); })  // stats requests name no plugin
      observe(request.plugin_id(), classify_as, out.status, started);
    out.outcome = csi::classify(classify_as, out.status.error_code());
    if (!out.ok()) out.error = where + ": " + (out.unreached ? not_connected(node_id) : csi::status_text(out.status));
    co_return out;
  }

  // A controller RPC: wrapped with the plugin id and sent to each healthy controller in turn
  // until one gives an answer that is not worth trying elsewhere.
  template <class Wrapped, class CsiReq>
  asio::awaitable<AnswerTo<Wrapped>> forward(std::string plugin_id, std::string key, CsiReq request,
                                             std::string operation_id) {
    using Resp = typename AgentCall<Wrapped>::Answer;
    constexpr csi::Rpc rpc = AgentCall<Wrapped>::classified;
    const std::uint64_t seen = router.store_.index();
    async::KeyedLocks::Guard guard;
    if (!key.empty()) guard = co_await router.locks_.lock(key);
    const std::string what = std::string(csi::to_string(rpc)) + " for plugin " + in_quotes(plugin_id) +
                             (key.empty() ? std::string{} : " (volume " + in_quotes(key) + ")");
    AgentResult<Resp> out;
    if (auto why = co_await refused_to_send(seen)) {  // as in to_node
      not_sent(out, rpc, what, *why);
      co_return out;
    }
    auto candidates = router.controller_candidates(plugin_id);
    if (candidates.empty()) {
      not_sent(out, rpc, what, router.no_controller_reason(plugin_id));
      co_return out;
    }
    Wrapped wrapped;
    wrapped.set_plugin_id(plugin_id);
    *wrapped.mutable_request() = std::move(request);
    if constexpr (requires { wrapped.set_operation_id(operation_id); }) wrapped.set_operation_id(operation_id);
    std::string tried;
    bool asked = false;
    bool connected = false;  // some agent asked was connected to after its attempt
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const std::string& node_id = candidates[i];
      const domain::Node* node = router.store_.node(node_id);  // may have gone during an earlier attempt
      if (!node || node->address.empty()) continue;
      Resp response;
      const auto started = std::chrono::steady_clock::now();
      // An agent that cannot be reached is waited for (it may be restarting) only by a call with
      // an operation id (publish, unpublish: the claim path and the GC; the others have an
      // operator waiting), and only when no other controller is left to ask: each agent keeps its
      // own record of operation ids.
      const auto wait = !operation_id.empty() && i + 1 == candidates.size() ? router.options_.reregistration_wait
                                                                            : std::chrono::milliseconds{0};
      const Attempt attempt =
          co_await send(*node, plugin_id, wait, timeout(rpc), wrapped, response, &AgentCall<Wrapped>::start);
      out.status = attempt.status;
      connected = connected || attempt.connected;
      observe(plugin_id, rpc, out.status, started);
      out.outcome = csi::classify(rpc, out.status.error_code());
      out.node_id = node_id;
      asked = true;
      tried += (tried.empty() ? "" : "; ") + std::string("via node ") + in_quotes(node_id) + ": " +
               (out.ok() ? std::string("OK")
                : !attempt.connected && out.status.error_code() == grpc::StatusCode::UNAVAILABLE
                    ? not_connected(node_id)
                    : csi::status_text(out.status));
      // NOT_FOUND from one instance is an answer about that instance only: controllers with
      // per-node state (one backend per node) each know their own volumes. The others are asked
      // too, and NOT_FOUND stands ("already deleted" / "not published" = done for a delete or an
      // unpublish; a refusal for a publish) only when every healthy instance says so.
      if (out.status.error_code() == grpc::StatusCode::NOT_FOUND && i + 1 < candidates.size()) continue;
      if (out.ok() || out.done()) {
        out.response = std::move(response);
        out.error.clear();
        co_return out;
      }
      if (!csi::should_retry(out.outcome)) break;
      if (out.outcome == csi::Outcome::uncertain) out.uncertain_earlier = true;
      logger().debug("controller call failed; trying the next controller", {{"rpc", csi::to_string(rpc)},
                                                                            {"plugin_id", plugin_id},
                                                                            {"node_id", node_id},
                                                                            {"error", csi::status_text(out.status)}});
    }
    if (!asked) {
      not_sent(out, rpc, what, router.no_controller_reason(plugin_id));
      co_return out;
    }
    out.error = what + ": " + tried;
    out.unreached = !connected;
    co_return out;
  }

  // mooring_csi_rpc_seconds, as the control plane sees a CSI call: one attempt through one agent.
  void observe(const std::string& plugin_id, csi::Rpc rpc, const grpc::Status& status,
               std::chrono::steady_clock::time_point started) {
    if (csi_metrics.enabled())
      csi_metrics.observe(plugin_id, rpc, status.error_code(),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  AgentRouter& router;
  std::map<std::string, Cached> channels;
  rpc::CsiRpcMetrics csi_metrics;
};

AgentRouter::AgentRouter(asio::any_io_executor executor, const StateStore& store, AgentRouterOptions options)
    : store_(store), options_(std::move(options)), locks_(executor), impl_(std::make_unique<Impl>(*this)) {}

AgentRouter::~AgentRouter() = default;

std::size_t AgentRouter::channel_count() const { return impl_->channels.size(); }

asio::awaitable<std::optional<std::string>> AgentRouter::held() const {
  if (options_.hold) {
    if (auto why = co_await options_.hold()) co_return why;
  }
  co_return paused_;
}

std::optional<std::string> AgentRouter::channel_address(const std::string& node_id) const {
  auto it = impl_->channels.find(node_id);
  if (it == impl_->channels.end()) return std::nullopt;
  return it->second.address;
}

// ---- node RPCs ----

asio::awaitable<AgentResult<v1::NodeDetachVolumeResponse>> AgentRouter::node_detach_volume(
    std::string node_id, v1::NodeDetachVolumeRequest request) {
  // The agent unpublishes and, when the last user is gone, unstages: both attempts fit.
  auto timeout = impl_->timeout(csi::Rpc::NodeUnpublishVolume, csi::policy(csi::Rpc::NodeUnstageVolume).timeout);
  std::string what = "NodeDetachVolume of volume " + in_quotes(request.volume_id());
  return impl_->to_node(std::move(what), std::move(node_id), std::move(request), timeout);
}

asio::awaitable<AgentResult<v1::NodeExpandVolumeResponse>> AgentRouter::node_expand_volume(
    std::string node_id, v1::NodeExpandVolumeRequest request) {
  std::string what = "NodeExpandVolume of volume " + in_quotes(request.volume_id());
  return impl_->to_node(std::move(what), std::move(node_id), std::move(request),
                        impl_->timeout(csi::Rpc::NodeExpandVolume));
}

asio::awaitable<AgentResult<v1::NodeVolumeStatsResponse>> AgentRouter::node_volume_stats(
    std::string node_id, v1::NodeVolumeStatsRequest request) {
  std::string what = "NodeVolumeStats of volume " + in_quotes(request.volume_id());
  return impl_->to_node(std::move(what), std::move(node_id), std::move(request),
                        impl_->timeout(csi::Rpc::NodeGetVolumeStats));
}

// ---- controller RPCs: each the table's row for its wrapped request ----

asio::awaitable<AgentResult<::csi::v1::CreateVolumeResponse>> AgentRouter::create_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::CreateVolumeRequest request) {
  return impl_->forward<v1::CreateVolumeRequest>(std::move(plugin_id), std::move(volume_key), std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::DeleteVolumeResponse>> AgentRouter::delete_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::DeleteVolumeRequest request) {
  return impl_->forward<v1::DeleteVolumeRequest>(std::move(plugin_id), std::move(volume_key), std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::ControllerPublishVolumeResponse>> AgentRouter::controller_publish_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerPublishVolumeRequest request,
    std::string operation_id) {
  return impl_->forward<v1::ControllerPublishVolumeRequest>(std::move(plugin_id), std::move(volume_key),
                                                            std::move(request), std::move(operation_id));
}

asio::awaitable<AgentResult<::csi::v1::ControllerUnpublishVolumeResponse>> AgentRouter::controller_unpublish_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerUnpublishVolumeRequest request,
    std::string operation_id) {
  return impl_->forward<v1::ControllerUnpublishVolumeRequest>(std::move(plugin_id), std::move(volume_key),
                                                              std::move(request), std::move(operation_id));
}

asio::awaitable<AgentResult<::csi::v1::ControllerGetVolumeResponse>> AgentRouter::controller_get_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerGetVolumeRequest request) {
  return impl_->forward<v1::ControllerGetVolumeRequest>(std::move(plugin_id), std::move(volume_key), std::move(request),
                                                        {});
}

asio::awaitable<AgentResult<::csi::v1::ControllerExpandVolumeResponse>> AgentRouter::controller_expand_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerExpandVolumeRequest request) {
  return impl_->forward<v1::ControllerExpandVolumeRequest>(std::move(plugin_id), std::move(volume_key),
                                                           std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::ControllerModifyVolumeResponse>> AgentRouter::controller_modify_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerModifyVolumeRequest request) {
  return impl_->forward<v1::ControllerModifyVolumeRequest>(std::move(plugin_id), std::move(volume_key),
                                                           std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::GetSnapshotResponse>> AgentRouter::get_snapshot(
    std::string plugin_id, ::csi::v1::GetSnapshotRequest request) {
  // A query names no volume: nothing to serialize behind.
  return impl_->forward<v1::GetSnapshotRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::ValidateVolumeCapabilitiesResponse>> AgentRouter::validate_volume_capabilities(
    std::string plugin_id, std::string volume_key, ::csi::v1::ValidateVolumeCapabilitiesRequest request) {
  return impl_->forward<v1::ValidateVolumeCapabilitiesRequest>(std::move(plugin_id), std::move(volume_key),
                                                               std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::CreateSnapshotResponse>> AgentRouter::create_snapshot(
    std::string plugin_id, std::string volume_key, ::csi::v1::CreateSnapshotRequest request) {
  return impl_->forward<v1::CreateSnapshotRequest>(std::move(plugin_id), std::move(volume_key), std::move(request), {});
}

// Queries and snapshot deletes name no volume: not serialized ("" as the key).
asio::awaitable<AgentResult<::csi::v1::DeleteSnapshotResponse>> AgentRouter::delete_snapshot(
    std::string plugin_id, ::csi::v1::DeleteSnapshotRequest request) {
  return impl_->forward<v1::DeleteSnapshotRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::ListSnapshotsResponse>> AgentRouter::list_snapshots(
    std::string plugin_id, ::csi::v1::ListSnapshotsRequest request) {
  return impl_->forward<v1::ListSnapshotsRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::ListVolumesResponse>> AgentRouter::list_volumes(
    std::string plugin_id, ::csi::v1::ListVolumesRequest request) {
  return impl_->forward<v1::ListVolumesRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::GetCapacityResponse>> AgentRouter::get_capacity(
    std::string plugin_id, ::csi::v1::GetCapacityRequest request) {
  return impl_->forward<v1::GetCapacityRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::CreateVolumeGroupSnapshotResponse>> AgentRouter::create_volume_group_snapshot(
    std::string plugin_id, std::vector<std::string> volume_keys, ::csi::v1::CreateVolumeGroupSnapshotRequest request) {
  std::sort(volume_keys.begin(), volume_keys.end());
  volume_keys.erase(std::unique(volume_keys.begin(), volume_keys.end()), volume_keys.end());
  std::vector<async::KeyedLocks::Guard> held;
  for (auto& key : volume_keys)
    if (!key.empty()) held.push_back(co_await locks_.lock(key));
  // Named locals: GCC 12 mishandles class temporaries passed by value to a coroutine here.
  std::string unserialized;  // every member's lock is held above
  std::string no_operation;
  co_return co_await impl_->forward<v1::CreateVolumeGroupSnapshotRequest>(std::move(plugin_id), std::move(unserialized),
                                                                          std::move(request), std::move(no_operation));
}

// A group's snapshots name no volume the caller could hold.
asio::awaitable<AgentResult<::csi::v1::DeleteVolumeGroupSnapshotResponse>> AgentRouter::delete_volume_group_snapshot(
    std::string plugin_id, ::csi::v1::DeleteVolumeGroupSnapshotRequest request) {
  return impl_->forward<v1::DeleteVolumeGroupSnapshotRequest>(std::move(plugin_id), {}, std::move(request), {});
}

asio::awaitable<AgentResult<::csi::v1::GetVolumeGroupSnapshotResponse>> AgentRouter::get_volume_group_snapshot(
    std::string plugin_id, ::csi::v1::GetVolumeGroupSnapshotRequest request) {
  return impl_->forward<v1::GetVolumeGroupSnapshotRequest>(std::move(plugin_id), {}, std::move(request), {});
}

}  // namespace mooring::controlplane::agentclient
