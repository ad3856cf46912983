// Which control plane the agent talks to (issue 22): `--controlplane-addr a,b,c` lists them all;
// calls go to one at a time. A standby answers UNAVAILABLE naming the leader (trailing metadata
// `x-mooring-leader`): the agent switches to it and sends the call there once more at once (the
// standby touched nothing). A control plane that refuses at once (UNAVAILABLE, nobody named: down,
// or no leader elected yet) makes the same call try the next address, until each was asked once,
// so one call finds a leader wherever it was elected. One that does not answer within the call's
// deadline (paused, cut off) makes the next call try the next address.
// A call refused UNAUTHENTICATED (the certificate of its connection no longer acts for the node)
// makes the next call to that control plane dial anew, with the certificate the files hold then.
// Used from the agent's io thread only; the registration link and the calls share one.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "shared/rpc/channel.hpp"

namespace mooring::nodeagent {

// "a:1,b:2" → {"a:1","b:2"} (spaces and empty items dropped).
std::vector<std::string> split_controlplane_addrs(std::string_view list);

class ControlPlaneTarget {
 public:
  // The longest gRPC reconnect backoff of a channel to a control plane (rpc::ChannelOptions' is 5 s).
  static constexpr std::chrono::milliseconds kMaxReconnectBackoff{1000};

  ControlPlaneTarget(std::vector<std::string> addresses, rpc::ChannelOptions channel);
  ~ControlPlaneTarget();

  const std::string& current() const { return current_; }
  std::string describe() const;  // "a:1,b:2 (using b:2)"

  using Start =
      std::function<void(::mooring::v1::ControlPlane::Stub&, grpc::ClientContext*, std::function<void(grpc::Status)>)>;
  // One unary call to the current control plane (deadline `timeout` per attempt), following a
  // standby's redirect once and asking the next addresses while they refuse at once; moves on to
  // the next address for the next call when the current one does not answer in time.
  boost::asio::awaitable<grpc::Status> call(std::chrono::milliseconds timeout, Start start);

  // Every control plane is dialled anew by its next call: after the agent's certificate was
  // renewed, so each call presents the new one. Calls in flight finish on the old connections,
  // which their contexts keep.
  void reconnect();

 private:
  ::mooring::v1::ControlPlane::Stub& stub(const std::string& address);
  void use(const std::string& address, bool named);            // named: a standby named it the leader
  const std::string& after(const std::string& address) const;  // the next address, round the list

  std::vector<std::string> addresses_;
  rpc::ChannelOptions channel_;
  std::string current_;
  struct Peer;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace mooring::nodeagent
