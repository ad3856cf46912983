#include "services/controlplane/nodes/liveness.hpp"

#include <algorithm>

#include "services/controlplane/nodes/node_report.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/periodic.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

std::chrono::milliseconds default_check_period(std::chrono::milliseconds ttl) {
  return std::clamp(ttl / 20, std::chrono::milliseconds(20), std::chrono::milliseconds(500));
}

NodeLiveness::NodeLiveness(StateStore& store, LivenessOptions options)
    : store_(store), options_(options), started_(Clock::now()) {}

void NodeLiveness::grant_grace(Clock::time_point now) {
  started_ = now;
  last_seen_.clear();
}

void NodeLiveness::seen(const std::string& node_id, Clock::time_point at) {
  auto& t = last_seen_[node_id];
  t = std::max(t, at);
}

std::optional<domain::Time> NodeLiveness::last_heard(const std::string& node_id, Clock::time_point now) const {
  auto it = last_seen_.find(node_id);
  if (it == last_seen_.end()) return std::nullopt;
  const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second);
  return domain::now() - ago;
}

void NodeLiveness::arrived(const std::string& node_id, Clock::time_point at) {
  seen(node_id, at);
  ++unanswered_[node_id];
}

void NodeLiveness::answered(const std::string& node_id, Clock::time_point at) {
  auto it = unanswered_.find(node_id);
  if (it == unanswered_.end()) return;
  if (--it->second == 0) unanswered_.erase(it);
  seen(node_id, at);
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
  std::vector<std::string> expired;
  for (const auto& [id, node] : store_.nodes()) {
    if (node.status == domain::NodeStatus::down || unanswered_.contains(id)) continue;
    auto it = last_seen_.find(id);
    const auto last = it == last_seen_.end() ? started_ : it->second;
    if (now - last > options_.ttl) expired.push_back(id);
  }
  for (const auto& id : expired) {
    const auto* node = store_.node(id);
    auto it = last_seen_.find(id);
    const auto silent =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - (it == last_seen_.end() ? started_ : it->second));
    std::string reason =
        "no heartbeat for " + domain::format_duration(silent) + " (TTL " + domain::format_duration(options_.ttl) + ")";
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
