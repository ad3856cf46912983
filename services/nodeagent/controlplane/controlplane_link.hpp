// The node's link to the control plane: RegisterNode, then a Heartbeat every few seconds with the
// full fingerprint set and the node events not yet acknowledged; re-registers when the answer
// says known=false. The control plane may be down for long: calls are retried with a short capped
// backoff (below) and nothing here ever blocks plugin supervision (it only reads NodeStatus).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "shared/async/backoff.hpp"
#include "shared/domain/leader_epoch.hpp"
#include "shared/rpc/channel.hpp"

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

class NodeStatus;
class ControlPlaneTarget;

struct LinkOptions {
  std::string node_id;
  std::string node_name;
  std::string advertise_addr;                  // the agent's gRPC address the control plane dials
  std::string controlplane_addr;               // host:port or unix:path; a comma-separated list of control planes
  std::shared_ptr<ControlPlaneTarget> target;  // shared with the calls; made from the above when null
  rpc::ChannelOptions channel;                 // mutual TLS (channel.security) when set
  std::string agent_version = "0.1.0";
  // Reported with the registration: the node's task user rules (domain/task_user.hpp), which
  // placement checks and `mooring node status` shows.
  std::map<std::string, std::string> attributes;
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds call_timeout{std::chrono::seconds(5)};
  // Changes (health, events) are sent early, but never more often than this.
  std::chrono::milliseconds min_heartbeat_gap{std::chrono::milliseconds(200)};
  // Between failed rounds (each asks every control plane once: controlplane_target.hpp). Capped
  // at 1 s so that after a long spell without a leader the new one is reached within about a
  // second of its election: the link's first answer wakes every other caller that waits on the
  // control plane (the agent's controlplane_back). A round costs each control plane one call
  // refused at once.
  async::Backoff backoff{std::chrono::milliseconds(250), std::chrono::seconds(1), 2.0, 0.2};
  // Called after every registration or heartbeat: answered = the control plane accepted it (the
  // agent's "last contact" clock for the client-side disconnect rule, and its "back" wake).
  std::function<void(bool answered)> on_contact;
  // A registration or heartbeat the control plane answered (it heard this node): when it was
  // sent, and the heartbeat TTL the answer named. The disconnect deadlines count from the send.
  std::function<void(std::chrono::steady_clock::time_point sent, std::chrono::milliseconds ttl)> on_heard;
  // The leader epoch an answer named (domain/leader_epoch.hpp); answers that name none (a leader
  // that does not know its own yet) are not passed on.
  std::function<void(const domain::LeaderEpoch&)> on_leader_epoch;
};

class ControlPlaneLink {
 public:
  ControlPlaneLink(boost::asio::any_io_executor ex, LinkOptions options, NodeStatus& status);
  ~ControlPlaneLink();

  // Registers and heartbeats until the awaiting coroutine is cancelled.
  boost::asio::awaitable<void> run();

  // Sends one heartbeat now (registering first if needed); true when the control plane accepted
  // it. Used for the final report at shutdown, after run() was cancelled.
  boost::asio::awaitable<bool> send_now(std::chrono::milliseconds timeout);

  // Asks run() to heartbeat early (something changed).
  void wake();

  // The address the control plane dials back, once known (an OS-chosen port is known only after
  // the agent's gRPC server bound it). Takes effect at the next registration.
  void set_advertise_addr(std::string address);

  bool registered() const { return registered_; }
  unsigned heartbeats_sent() const { return heartbeats_ok_; }

 private:
  struct Transport;
  boost::asio::awaitable<bool> register_node(std::chrono::milliseconds timeout);
  boost::asio::awaitable<bool> heartbeat(std::chrono::milliseconds timeout);

  boost::asio::any_io_executor ex_;
  LinkOptions options_;
  NodeStatus& status_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<async::WakeSignal> wake_;
  bool registered_ = false;
  unsigned heartbeats_ok_ = 0;
  std::chrono::milliseconds ttl_{0};
  std::chrono::milliseconds min_interval_{0};  // the control plane's pace for a large fleet (0: none)
  std::string last_error_;
};

}  // namespace mooring::nodeagent
