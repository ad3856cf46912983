#include "services/controlplane/nodes/node_drain.hpp"

#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

namespace {

void node_event(Batch& batch, const std::string& node_id, std::string type, std::string message,
                std::map<std::string, std::string> details = {}) {
  batch.add_event({.topic = "Node",
                   .type = std::move(type),
                   .key = node_id,
                   .message = std::move(message),
                   .details = std::move(details)});
}

}  // namespace

domain::Expected<Batch> plan_eligibility(const StateStore& store, const std::string& node_id, bool eligible,
                                         domain::Time) {
  const domain::Node* current = store.node(node_id);
  if (!current) return domain::error("node not found: " + node_id);
  if (current->drain && eligible)
    return domain::error("node " + in_quotes(node_id) +
                         " is draining: its eligibility is the drain's; cancel the drain (node drain --disable) first");
  Batch batch;
  if (current->eligible == eligible) return batch;
  domain::Node node = *current;
  node.eligible = eligible;
  const std::string word = eligible ? "eligible" : "ineligible";
  node_event(batch, node_id, eligible ? "NodeEligible" : "NodeIneligible",
             "node " + in_quotes(node_id) + " marked " + word + " for placement", {{"eligibility", word}});
  batch.put(std::move(node));
  return batch;
}

domain::Expected<Batch> plan_drain(const StateStore& store, const std::string& node_id, const DrainRequest& request,
                                   domain::Time now) {
  const domain::Node* current = store.node(node_id);
  if (!current) return domain::error("node not found: " + node_id);
  domain::Node node = *current;
  Batch batch;
  if (!request.enable) {
    if (!node.drain && !request.mark_eligible) return domain::error("node " + in_quotes(node_id) + " is not draining");
    if (node.drain) {
      node.drain.reset();
      auto status = node.last_drain.value_or(domain::DrainStatus{});
      status.status = "canceled";
      status.updated = now;
      status.message = "canceled by an operator";
      node.last_drain = status;
      node_event(batch, node_id, "NodeDrainCanceled", "drain of node " + in_quotes(node_id) + " canceled");
    }
    if (request.mark_eligible) node.eligible = true;
    batch.put(std::move(node));
    return batch;
  }
  const bool restart = node.drain.has_value();
  domain::DrainStrategy strategy{.deadline = request.deadline,
                                 .started = restart ? node.drain->started : now,
                                 .force_deadline = now + request.deadline,
                                 .ignore_system_jobs = request.ignore_system_jobs};
  node.drain = strategy;
  node.eligible = false;
  node.last_drain =
      domain::DrainStatus{.status = "draining",
                          .started = strategy.started,
                          .updated = now,
                          .allocations_left = static_cast<int>(store.live_allocation_ids_on(node_id).size()),
                          .message = "drain started"};
  node_event(batch, node_id, restart ? "NodeDrainUpdated" : "NodeDrainStarted",
             "drain of node " + in_quotes(node_id) + (restart ? " updated" : " started") + ": deadline " +
                 domain::format_time(strategy.force_deadline),
             {{"deadline", domain::format_duration(request.deadline)},
              {"force_deadline", domain::format_time(strategy.force_deadline)}});
  batch.put(std::move(node));
  return batch;
}

}  // namespace mooring::controlplane
