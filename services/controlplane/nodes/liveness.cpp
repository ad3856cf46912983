#include "services/controlplane/nodes/liveness.hpp"

#include <algorithm>

#include "services/controlplane/nodes/node_report.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/periodic.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

HeartbeatPace heartbeat_pace(std::size_t nodes, const LivenessOptions& options) {
  const HeartbeatPace configured{options.ttl, std::chrono::milliseconds(0)};
  const auto budget = options.max_heartbeats_per_second;
  if (budget == 0) return configured;
  const std::chrono::milliseconds needed((nodes * 1000 + budget - 1) / budget);
  if (needed <= options.ttl / 3) return configured;
  return {3 * needed, needed};
}

std::chrono::milliseconds default_check_period(std::chrono::milliseconds ttl) {
  return std::clamp(ttl / 20, std::chrono::milliseconds(20), std::chrono::milliseconds(500));
}

NodeLiveness::NodeLiveness(StateStore& store, LivenessOptions options)
    : store_(store), options_(options), started_(Clock::now()) {}

void NodeLiveness::grant_grace(Clock::time_point now) {
  started_ = now;
  last_seen_.clear();
}

HeartbeatPace NodeLiveness::pace() const { return heartbeat_pace(store_.nodes().size(), options_); }

void NodeLiveness::touch(const std::string& node_id, Clock::time_point at,
                         std::optional<std::chrono::milliseconds> ttl) {
  auto& heard = last_seen_[node_id];
  heard.at = std::max(heard.at, at);
  if (ttl) heard.ttl = *ttl;
  if (heard.ttl.count() == 0) heard.ttl = pace().ttl;
}

HeartbeatPace NodeLiveness::seen(const std::string& node_id, Clock::time_point at) {
  const auto now = pace();
  touch(node_id, at, now.ttl);
  return now;
}

std::optional<domain::Time> NodeLiveness::last_heard(const std::string& node_id, Clock::time_point now) const {
  auto it = last_seen_.find(node_id);
  if (it == last_seen_.end()) return std::nullopt;
  const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.at);
  return domain::now() - ago;
}

HeartbeatPace NodeLiveness::arrived(const std::string& node_id, Clock::time_point at) {
  ++unanswered_[node_id];
  return seen(node_id, at);
}

// The answer carries the TTL recorded at the heartbeat's arrival, so it stays.
void NodeLiveness::answered(const std::string& node_id, Clock::time_point at) {
  auto it = unanswered_.find(node_id);
  if (it == unanswered_.end()) return;
  if (--it->second == 0) unanswered_.erase(it);
  touch(node_id, at, std::nullopt);
}

void NodeLiveness::unknown_until_heard() {
  unknown_marked_ = true;
  if (store_.read_only()) {
    unknown_marked_ = false;
    return;
  }
  std::vector<std::string> unheard;
  for (const auto& [id, node] : store_.nodes())
    if (!last_seen_.contains(id)) unheard.push_back(id);
  for (const auto& id : unheard) {
    auto change = plan_unknown_until_heard(*store_.node(id));
    if (change.empty()) continue;
    Batch batch;
    change.stage(batch);
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot mark the plugins of a node not heard from yet as unknown; retrying",
                 {{"node_id", id}, {"error", r.error()}});
      unknown_marked_ = false;
    }
  }
  if (!unheard.empty())
    log_.info("plugin health unknown until each node's agent is heard from", {{"nodes", unheard.size()}});
}

std::vector<std::string> NodeLiveness::check(Clock::time_point now) {
  std::vector<std::string> down;
  if (store_.read_only()) return down;  // nothing can be marked; grant_grace() follows
  if (!unknown_marked_) unknown_until_heard();
  if (options_.hearing && !options_.hearing()) {
    deaf_ = true;
    return down;
  }
  if (deaf_) {  // heartbeats held meanwhile are answered now: give them their TTL
    deaf_ = false;
    grant_grace(now);
    return down;
  }
  // Nodes not heard from since the start get the fleet's TTL of now as their grace.
  const Heard unheard{started_, pace().ttl};
  std::vector<std::pair<std::string, Heard>> expired;
  for (const auto& [id, node] : store_.nodes()) {
    if (node.status == domain::NodeStatus::down || unanswered_.contains(id)) continue;
    auto it = last_seen_.find(id);
    const auto& heard = it == last_seen_.end() ? unheard : it->second;
    if (now - heard.at > heard.ttl) expired.emplace_back(id, heard);
  }
  for (const auto& [id, heard] : expired) {
    const auto* node = store_.node(id);
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - heard.at);
    std::string reason =
        "no heartbeat for " + domain::format_duration(silent) + " (TTL " + domain::format_duration(heard.ttl) + ")";
    auto change = plan_node_down(*node, reason, domain::now());
    Batch batch;
    change.stage(batch);
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot mark node down; retrying", {{"node_id", id}, {"error", r.error()}});
      continue;
    }
    log_.warn("node down", {{"node_id", id}, {"reason", reason}});
    down.push_back(id);
  }
  return down;
}

asio::awaitable<void> NodeLiveness::run() {
  started_ = Clock::now();  // the start of leading (see the header)
  unknown_until_heard();
  // Named locals, not temporaries, as coroutine arguments: GCC 12 mishandles the lifetime of
  // aggregate temporaries passed by value to a coroutine.
  async::PeriodicOptions options;
  options.name = "node-liveness";
  options.period = options_.check_period;
  if (options.period.count() <= 0) options.period = default_check_period(options_.ttl);
  options.jitter = 0.1;
  options.run_immediately = false;
  std::function<asio::awaitable<void>()> fn = [this]() -> asio::awaitable<void> {
    check();
    co_return;
  };
  co_await async::periodic(std::move(fn), std::move(options));
}

}  // namespace mooring::controlplane
