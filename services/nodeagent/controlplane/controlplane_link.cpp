#include "services/nodeagent/controlplane/controlplane_link.hpp"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <algorithm>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"
#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "services/nodeagent/controlplane/controlplane_target.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using Clock = std::chrono::steady_clock;

const log::Logger kLog{"controlplane-link"};

template <class Response>
void tell_leader_epoch(const LinkOptions& options, const Response& resp) {
  if (!options.on_leader_epoch || !resp.has_leader_epoch()) return;
  options.on_leader_epoch(
      domain::LeaderEpoch{.cluster = resp.leader_epoch().cluster_id(), .revision = resp.leader_epoch().revision()});
}

}  // namespace

struct ControlPlaneLink::Transport {
  std::shared_ptr<ControlPlaneTarget> target;
};

ControlPlaneLink::ControlPlaneLink(asio::any_io_executor ex, LinkOptions options, NodeStatus& status)
    : ex_(ex),
      options_(std::move(options)),
      status_(status),
      transport_(std::make_unique<Transport>(
          options_.target ? options_.target : make_controlplane_target(options_.controlplane_addr, options_.channel))),
      wake_(std::make_unique<async::WakeSignal>(ex)) {}

ControlPlaneLink::~ControlPlaneLink() = default;

void ControlPlaneLink::wake() { wake_->notify(); }

void ControlPlaneLink::set_advertise_addr(std::string address) {
  if (address == options_.advertise_addr) return;
  options_.advertise_addr = std::move(address);
  registered_ = false;  // register again so the control plane learns the address
  wake_->notify();
}

asio::awaitable<bool> ControlPlaneLink::register_node(std::chrono::milliseconds timeout) {
  v1::RegisterNodeRequest req;
  v1::RegisterNodeResponse resp;
  req.set_node_id(options_.node_id);
  req.set_name(options_.node_name);
  req.set_address(options_.advertise_addr);
  req.set_agent_version(options_.agent_version);
  req.mutable_attributes()->insert(options_.attributes.begin(), options_.attributes.end());
  for (auto& fp : status_.fingerprints()) *req.add_plugins() = std::move(fp);
  const auto sent = Clock::now();
  const auto st = co_await transport_->target->call(
      timeout, [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
        stub.async()->RegisterNode(ctx, &req, &resp, std::move(done));
      });
  if (!st.ok()) {
    last_error_ = "RegisterNode: " + st.error_message();
    if (options_.on_contact) options_.on_contact(false);
    co_return false;
  }
  // The address may have changed while the call was in flight (the gRPC server bound an
  // OS-chosen port): then this registration is stale and the next loop turn registers again.
  registered_ = req.address() == options_.advertise_addr;
  ttl_ = std::chrono::milliseconds(resp.heartbeat_ttl_ms());
  min_interval_ = std::chrono::milliseconds(resp.heartbeat_min_interval_ms());
  tell_leader_epoch(options_, resp);
  if (options_.on_contact) options_.on_contact(true);
  if (options_.on_heard) options_.on_heard(sent, ttl_);
  kLog.info("registered with the control plane",
            {{"node_id", options_.node_id}, {"controlplane", transport_->target->describe()}});
  co_return true;
}

asio::awaitable<bool> ControlPlaneLink::heartbeat(std::chrono::milliseconds timeout) {
  v1::HeartbeatRequest req;
  v1::HeartbeatResponse resp;
  req.set_node_id(options_.node_id);
  for (auto& fp : status_.fingerprints()) *req.add_plugins() = std::move(fp);
  const auto batch = status_.pending_events();
  for (const auto& e : batch.events) *req.add_events() = e;
  const auto stats = status_.pending_volume_stats();
  for (const auto& s : stats.stats) *req.add_volume_stats() = s;
  const auto sent = Clock::now();
  const auto st = co_await transport_->target->call(
      timeout, [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
        stub.async()->Heartbeat(ctx, &req, &resp, std::move(done));
      });
  if (!st.ok()) {
    // The events stay pending and go out with the next heartbeat.
    last_error_ = "Heartbeat: " + st.error_message();
    if (options_.on_contact) options_.on_contact(false);
    co_return false;
  }
  if (!resp.known()) {
    kLog.warn("control plane does not know this node; registering again", {{"node_id", options_.node_id}});
    registered_ = false;
    co_return false;
  }
  status_.ack(batch.last_seq);
  status_.ack_volume_stats(stats.last_seq);
  ttl_ = std::chrono::milliseconds(resp.heartbeat_ttl_ms());
  min_interval_ = std::chrono::milliseconds(resp.heartbeat_min_interval_ms());
  tell_leader_epoch(options_, resp);
  if (options_.on_contact) options_.on_contact(true);
  if (options_.on_heard) options_.on_heard(sent, ttl_);
  ++heartbeats_ok_;
  co_return true;
}

asio::awaitable<void> ControlPlaneLink::run() {
  unsigned failures = 0;
  auto last_sent = Clock::time_point::min();
  while (true) {
    const auto gen = wake_->generation();
    bool ok = registered_ || co_await register_node(options_.call_timeout);
    if (ok) {
      ok = co_await heartbeat(options_.call_timeout);
      if (!ok && !registered_) continue;  // known=false: register again at once
      last_sent = Clock::now();
    }
    if (!ok) {
      const auto delay = options_.backoff.delay(failures++);
      if (failures == 1 || failures % 10 == 0) {
        kLog.warn("control plane unreachable; retrying", {{"controlplane", transport_->target->describe()},
                                                          {"error", last_error_},
                                                          {"delay", delay},
                                                          {"failures", failures},
                                                          {"pending_events", status_.pending_count()}});
      }
      if (co_await async::sleep_for(delay) == async::SleepEnd::cancelled) co_return;
      continue;
    }
    if (failures > 0) kLog.info("control plane reachable again", {{"controlplane", transport_->target->describe()}});
    failures = 0;
    // Heartbeat well inside the TTL the control plane asked for.
    auto interval = options_.heartbeat_interval;
    if (ttl_.count() > 0) interval = std::min(interval, ttl_ / 3);
    interval = std::max(interval, min_interval_);  // a large fleet is paced (its TTL grew with it)
    if (co_await async::sleep_for(interval, wake_.get(), gen) == async::SleepEnd::cancelled) co_return;
    const auto since = Clock::now() - last_sent;
    if (since < options_.min_heartbeat_gap &&
        co_await async::sleep_for(options_.min_heartbeat_gap - since) == async::SleepEnd::cancelled)
      co_return;
  }
}

asio::awaitable<bool> ControlPlaneLink::send_now(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds(1));
  };
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second round after known=false
    if (!registered_ && !co_await register_node(left())) break;
    if (co_await heartbeat(left())) co_return true;
    if (registered_) break;
  }
  kLog.warn("final heartbeat not delivered", {{"error", last_error_}});
  co_return false;
}

}  // namespace mooring::nodeagent
