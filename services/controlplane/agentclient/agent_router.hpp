// Agent client room (agentclient/): how the control plane reaches node agents (seed 000's "shim"). Node RPCs go to
// the claim's node; controller RPCs go to a node running a healthy controller instance of the
// plugin (sorted by node id), and move on to the next one on retryable errors (UNAVAILABLE
// "plugin not running here", timeouts) and on NOT_FOUND, which stands only when every healthy
// instance says it (controllers with per-node state know only their own volumes). One channel per node address, replaced when the node's
// registered address changes. A call that fails UNAVAILABLE to a node whose agent was replaced
// (it registered again: restarted, maybe at another address) is resent to the new agent with the
// same request, so the same operation id, instead of moving on or failing. Controller calls that
// name a volume are serialized per volume.
// gRPC stays in the .cpp; callers see protobuf messages and grpc::Status values.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "mooring/v1/nodeagent.pb.h"
#include "services/controlplane/agentclient/agent_result.hpp"
#include "shared/async/keyed_locks.hpp"
#include "shared/domain/leader_epoch.hpp"
#include "shared/rpc/channel.hpp"

namespace mooring::controlplane {
class StateStore;
class NodeRegistrations;
}  // namespace mooring::controlplane

namespace mooring::controlplane::agentclient {

struct AgentRouterOptions {
  rpc::ChannelOptions channel;
  // Added to the CSI table's per-attempt timeout: the agent forwards with the table's timeout,
  // so our deadline must outlive it to hear the plugin's answer rather than our own timeout.
  std::chrono::milliseconds forward_margin{std::chrono::seconds(5)};
  // Tests: one timeout for every call instead of the table's.
  std::optional<std::chrono::milliseconds> timeout_override;
  // High availability: awaited before every call goes out (after the durability wait). A leader
  // whose lease etcd has not confirmed in time holds the call until it does (ha/lease_hold.hpp); a
  // reason: it did not, and the call is answered as not sent with it (as set_paused).
  std::function<boost::asio::awaitable<std::optional<std::string>>()> hold;
  // High availability: this leader's epoch (domain/leader_epoch.hpp), read as each attempt goes
  // out and sent with it as metadata; an agent that heard a newer one refuses the call (ABORTED).
  // Unset or nullopt: none sent (a single control plane).
  std::function<std::optional<domain::LeaderEpoch>()> leader_epoch;
  // Every node's registrations, counted by the agent service: a registration since an attempt
  // failed UNAVAILABLE means a new agent answers for the node (also one back at the same address),
  // and the call is resent to it. Null: only a changed address shows a new agent.
  const NodeRegistrations* registrations = nullptr;
  // An attempt that could not connect to the node's agent (no answer from it: restarting, or gone)
  // waits this long for the node to register again before its UNAVAILABLE stands, unless the node
  // is marked down first. Never after an answer from the agent itself; only for the calls that
  // run in the background (ControllerPublish/Unpublish with an operation id, when no other
  // controller is left to ask; NodeDetachVolume), not for those an operator waits on. 0: no wait
  // (main passes the heartbeat TTL, within which a silent node is marked down).
  std::chrono::milliseconds reregistration_wait{0};
};

class AgentRouter {
 public:
  AgentRouter(boost::asio::any_io_executor executor, const StateStore& store, AgentRouterOptions options = {});
  ~AgentRouter();
  AgentRouter(const AgentRouter&) = delete;
  AgentRouter& operator=(const AgentRouter&) = delete;

  // ---- node RPCs: to the named node (the claim's node) ----
  // Classified as NodeUnpublishVolume (NOT_FOUND = already unmounted = done).
  boost::asio::awaitable<AgentResult<v1::NodeDetachVolumeResponse>> node_detach_volume(
      std::string node_id, v1::NodeDetachVolumeRequest request);
  boost::asio::awaitable<AgentResult<v1::NodeExpandVolumeResponse>> node_expand_volume(
      std::string node_id, v1::NodeExpandVolumeRequest request);
  // Classified as NodeGetVolumeStats (a query: nothing to negate).
  boost::asio::awaitable<AgentResult<v1::NodeVolumeStatsResponse>> node_volume_stats(
      std::string node_id, v1::NodeVolumeStatsRequest request);

  // ---- controller RPCs: to a healthy controller of `plugin_id` ----
  // `volume_key` (the Mooring volume id) serializes calls per volume; "" does not serialize.
  boost::asio::awaitable<AgentResult<::csi::v1::CreateVolumeResponse>> create_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::CreateVolumeRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::DeleteVolumeResponse>> delete_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::DeleteVolumeRequest request);
  // `operation_id` (claims/operation_id.hpp): the agent runs one id once and answers a repeat
  // from its result; "" sends the call without deduplication.
  boost::asio::awaitable<AgentResult<::csi::v1::ControllerPublishVolumeResponse>> controller_publish_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerPublishVolumeRequest request,
      std::string operation_id = {});
  boost::asio::awaitable<AgentResult<::csi::v1::ControllerUnpublishVolumeResponse>> controller_unpublish_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerUnpublishVolumeRequest request,
      std::string operation_id = {});
  // Serialized with the volume's other calls (a publish or unpublish in flight is not overtaken).
  boost::asio::awaitable<AgentResult<::csi::v1::ControllerGetVolumeResponse>> controller_get_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerGetVolumeRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::ControllerExpandVolumeResponse>> controller_expand_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerExpandVolumeRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::ControllerModifyVolumeResponse>> controller_modify_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerModifyVolumeRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::GetSnapshotResponse>> get_snapshot(
      std::string plugin_id, ::csi::v1::GetSnapshotRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::ValidateVolumeCapabilitiesResponse>> validate_volume_capabilities(
      std::string plugin_id, std::string volume_key, ::csi::v1::ValidateVolumeCapabilitiesRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::CreateSnapshotResponse>> create_snapshot(
      std::string plugin_id, std::string volume_key, ::csi::v1::CreateSnapshotRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::DeleteSnapshotResponse>> delete_snapshot(
      std::string plugin_id, ::csi::v1::DeleteSnapshotRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::ListSnapshotsResponse>> list_snapshots(
      std::string plugin_id, ::csi::v1::ListSnapshotsRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::ListVolumesResponse>> list_volumes(
      std::string plugin_id, ::csi::v1::ListVolumesRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::GetCapacityResponse>> get_capacity(
      std::string plugin_id, ::csi::v1::GetCapacityRequest request);
  // GroupController. A group create holds the lock of every member volume (`volume_keys`), taken
  // in key order so two groups that share volumes cannot deadlock.
  boost::asio::awaitable<AgentResult<::csi::v1::CreateVolumeGroupSnapshotResponse>> create_volume_group_snapshot(
      std::string plugin_id, std::vector<std::string> volume_keys, ::csi::v1::CreateVolumeGroupSnapshotRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::DeleteVolumeGroupSnapshotResponse>> delete_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::DeleteVolumeGroupSnapshotRequest request);
  boost::asio::awaitable<AgentResult<::csi::v1::GetVolumeGroupSnapshotResponse>> get_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::GetVolumeGroupSnapshotRequest request);

  // Nodes with a healthy controller instance of the plugin on a ready node with an address,
  // in the order they are tried (node id order).
  std::vector<std::string> controller_candidates(const std::string& plugin_id) const;
  // Why there is no candidate, naming the plugin ("no CSI plugin named ...", "... has no healthy
  // controller ..."); "" when there is one.
  std::string no_controller_reason(const std::string& plugin_id) const;

  // High availability: while set, every call is answered at once as not sent (UNAVAILABLE, this
  // reason) and nothing goes out: a leader cut off from etcd's quorum could not record the result.
  void set_paused(std::optional<std::string> why) { paused_ = std::move(why); }

  // The per-volume serialization (shared with callers that need a longer critical section).
  async::KeyedLocks& locks() { return locks_; }
  // Channels currently cached (one per node); the address a node's channel dials.
  std::size_t channel_count() const;
  std::optional<std::string> channel_address(const std::string& node_id) const;

  struct Impl;

 private:
  // Why no call may go out now (paused, or the HA hold ran out), after the hold; nullopt: go.
  boost::asio::awaitable<std::optional<std::string>> held() const;
  const StateStore& store_;
  AgentRouterOptions options_;
  async::KeyedLocks locks_;
  std::optional<std::string> paused_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::agentclient
