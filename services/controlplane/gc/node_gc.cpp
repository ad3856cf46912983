#include "services/controlplane/gc/node_gc.hpp"

#include <vector>

#include "services/controlplane/gc/gc_passes.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/nodes/node_purge.hpp"
#include "services/controlplane/state/state_store.hpp"

namespace mooring::controlplane::gc {

namespace asio = boost::asio;

NodeGc::NodeGc(asio::any_io_executor executor, StateStore& store, NodeGcOptions options)
    : store_(store), options_(options), tasks_(std::move(executor), "node-gc") {}

NodeGc::~NodeGc() = default;

std::size_t NodeGc::collect(domain::Time now) {
  std::vector<std::string> due;
  for (const auto& [id, n] : store_.nodes())
    if (n.status == domain::NodeStatus::down && now - node_down_since(n) >= options_.threshold) due.push_back(id);
  std::size_t purged = 0;
  for (const auto& id : due) {
    const auto reason = "down since " + domain::format_time(node_down_since(*store_.node(id))) +
                        ", longer than the node GC threshold (" + domain::format_duration(options_.threshold) + ")";
    // Down for long, not revoked: the agent may come back with the certificate it holds.
    auto plan = plan_node_purge(store_, id, {.reason = reason}, now);
    if (!plan) {
      if (refused_.insert(id).second)
        log_.info("node past the GC threshold stays", {{"node_id", id}, {"why", plan.error()}});
      continue;
    }
    if (auto r = store_.commit(std::move(plan->batch)); !r) {
      log_.error("cannot purge a node; retrying on the next pass", {{"node_id", id}, {"error", r.error()}});
      continue;
    }
    refused_.erase(id);
    log_.info("node purged", {{"node_id", id}, {"reason", reason}, {"lost_allocations", plan->lost_allocations}});
    ++purged;
  }
  std::erase_if(refused_, [&](const std::string& id) { return !store_.node(id); });
  return purged;
}

void NodeGc::start() {
  start_passes(tasks_, "node-gc", pass_period(options_.period, options_.threshold, 8),
               [this] { collect(domain::now()); });
}

asio::awaitable<void> NodeGc::stop() {
  tasks_.cancel();
  co_await tasks_.join();
}

}  // namespace mooring::controlplane::gc
