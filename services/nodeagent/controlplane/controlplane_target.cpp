#include "services/nodeagent/controlplane/controlplane_target.hpp"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <algorithm>
#include <iterator>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "shared/log/log.hpp"
#include "shared/rpc/client_call.hpp"

namespace mooring::nodeagent {
namespace {

const log::Logger kLog{"controlplane-link"};

// The leader a standby named in its trailing metadata, "" if none.
std::string leader_named(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("x-mooring-leader");
  return it == trailers.end() ? std::string{} : std::string(it->second.data(), it->second.size());
}

}  // namespace

std::vector<std::string> split_controlplane_addrs(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string item(list.substr(0, comma));
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end()) out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

struct ControlPlaneTarget::Peer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<::mooring::v1::ControlPlane::Stub> stub;
};

ControlPlaneTarget::ControlPlaneTarget(std::vector<std::string> addresses, rpc::ChannelOptions channel)
    : addresses_(std::move(addresses)), channel_(std::move(channel)) {
  // A control plane that was down long (every member restarted, a partition healed) may be the
  // leader when it is back; gRPC's reconnect backoff, grown to 5 s meanwhile, would fail calls to
  // it at once for up to that long without dialling. Dialling a control plane costs little.
  channel_.max_reconnect_backoff = std::min(channel_.max_reconnect_backoff, kMaxReconnectBackoff);
  if (addresses_.empty()) addresses_.push_back("127.0.0.1:4701");
  current_ = addresses_.front();
}

ControlPlaneTarget::~ControlPlaneTarget() = default;

std::string ControlPlaneTarget::describe() const {
  std::string all;
  for (const auto& a : addresses_) all += (all.empty() ? "" : ",") + a;
  return addresses_.size() == 1 ? all : all + " (using " + current_ + ")";
}

::mooring::v1::ControlPlane::Stub& ControlPlaneTarget::stub(const std::string& address) {
  auto& peer = peers_[address];
  if (!peer) {
    peer = std::make_unique<Peer>();
    peer->channel = rpc::make_channel(address, channel_);
    peer->stub = ::mooring::v1::ControlPlane::NewStub(peer->channel);
  }
  return *peer->stub;
}

void ControlPlaneTarget::reconnect() { peers_.clear(); }

void ControlPlaneTarget::use(const std::string& address, bool named) {
  if (address == current_) return;
  // Moving on after a refusal happens every round while no member leads: not worth a line each.
  if (named) {
    kLog.info("switching control plane", {{"from", current_}, {"to", address}, {"why", "named the leader"}});
  } else {
    kLog.debug("switching control plane", {{"from", current_}, {"to", address}, {"why", "refused or no answer"}});
  }
  current_ = address;
}

const std::string& ControlPlaneTarget::after(const std::string& address) const {
  auto it = std::find(addresses_.begin(), addresses_.end(), address);
  return it == addresses_.end() || std::next(it) == addresses_.end() ? addresses_.front() : *std::next(it);
}

boost::asio::awaitable<grpc::Status> ControlPlaneTarget::call(std::chrono::milliseconds timeout, Start start) {
  grpc::Status st;
  std::vector<std::string> tried;
  bool redirected = false;
  while (true) {
    const std::string address = current_;
    auto& s = stub(address);
    std::string leader;
    st = co_await rpc::unary(rpc::CallOptions{timeout, false}, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      // Read the trailers on gRPC's thread while the context lives; `leader` is read back here
      // only after the completion was posted to us.
      start(s, ctx, [ctx, &leader, done = std::move(done)](grpc::Status status) {
        if (status.error_code() == grpc::StatusCode::UNAVAILABLE) leader = leader_named(*ctx);
        done(std::move(status));
      });
    });
    // The certificate this connection was opened with no longer acts (renewed or re-enrolled
    // since, the files replaced): the next call dials anew and presents what the files hold now.
    if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED) peers_.erase(address);
    // DEADLINE_EXCEEDED too: a paused or cut-off control plane accepts and never answers.
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE && st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
      co_return st;
    tried.push_back(address);
    if (!leader.empty() && leader != address && !redirected) {
      // A standby: it changed nothing, so the call goes to the leader it named right away. The
      // leader may be one we were not told about (a control plane added later).
      if (std::find(addresses_.begin(), addresses_.end(), leader) == addresses_.end()) addresses_.push_back(leader);
      use(leader, true);
      redirected = true;
      continue;
    }
    if (addresses_.size() > 1 && current_ == address) use(after(address), false);
    // Not answered in time: the call's time is spent, the next call tries the next control plane.
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) co_return st;
    // Refused at once (down, or no leader yet): the next control plane now, until every one was
    // asked, so a leader elected anywhere is found by this call rather than by the next ones.
    if (std::find(tried.begin(), tried.end(), current_) != tried.end()) co_return st;
  }
}

}  // namespace mooring::nodeagent
