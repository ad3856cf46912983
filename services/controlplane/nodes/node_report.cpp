#include "services/controlplane/nodes/node_report.hpp"

#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

using domain::Event;
using domain::Node;
using domain::NodeEvent;
using domain::PluginInstance;

namespace {

void add_node_event(Node& node, NodeEvent e) {
  node.events.push_back(std::move(e));
  if (node.events.size() > kMaxNodeEvents)
    node.events.erase(node.events.begin(),
                      node.events.begin() + static_cast<long>(node.events.size() - kMaxNodeEvents));
}

Event plugin_event(const std::string& type, const PluginInstance& i, std::string message) {
  return Event{.topic = "Plugin",
               .type = type,
               .key = i.plugin_id,
               .message = std::move(message),
               .details = {{"node_id", i.node_id}, {"plugin_id", i.plugin_id}}};
}

// Folds one reported instance into the node's stored one in `slot` (plugins, or split_controllers
// for a split plugin's controller): the events of a change, and what to store.
void fold_instance(NodeChange& ch, std::map<std::string, PluginInstance>& slot, PluginInstance& inst, bool split,
                   domain::Time now) {
  auto& node = ch.node;
  inst.node_id = node.id;
  if (!domain::is_set(inst.update_time)) inst.update_time = now;
  auto old = slot.find(inst.plugin_id);
  // A split plugin's two instances say which one they are.
  const std::string where = "plugin " + in_quotes(inst.plugin_id) + " on node " + in_quotes(node.id) +
                            (split ? " (" + std::string(domain::to_string(inst.type)) + " instance)" : "");
  if (old == slot.end()) {
    ch.events.push_back(plugin_event("PluginRegistered", inst,
                                     where + " registered (" + std::string(domain::to_string(inst.type)) +
                                         (inst.healthy ? ", healthy)" : ", unhealthy)")));
  } else {
    if (!domain::fingerprinted(inst) && domain::fingerprinted(old->second) && old->second.type == inst.type) {
      // A restarted agent reports its plugin before it has fingerprinted it again: only the
      // health is news. The capabilities stay what the plugin last said, so the claim path and
      // the release rules never read "not fingerprinted yet" as "needs no controller".
      PluginInstance kept = old->second;
      kept.healthy = inst.healthy;
      kept.health_description = inst.health_description;
      kept.update_time = inst.update_time;
      inst = std::move(kept);
    }
    // A fingerprint that differs only in its time is no change: keep the stored instance.
    PluginInstance probe = inst;
    probe.update_time = old->second.update_time;
    if (probe == old->second) {
      inst = old->second;
    } else if (old->second.healthy != inst.healthy) {
      std::string desc = inst.health_description.empty() ? "" : ": " + inst.health_description;
      ch.events.push_back(inst.healthy ? plugin_event("PluginHealthy", inst, where + " became healthy" + desc)
                                       : plugin_event("PluginUnhealthy", inst, where + " became unhealthy" + desc));
    }
  }
  if (old == slot.end() || old->second != inst) {
    slot[inst.plugin_id] = inst;
    ch.node_changed = true;
  }
}

// Folds everything the node reports for one plugin id (one instance, or a split plugin's
// controller and node instance) into the node.
void fold_plugin(NodeChange& ch, std::vector<PluginInstance> instances, domain::Time now) {
  auto& node = ch.node;
  const std::string id = instances.front().plugin_id;
  const bool split = instances.size() == 2;
  for (auto& inst : instances) {
    const bool split_controller = split && inst.type == domain::PluginType::controller;
    fold_instance(ch, split_controller ? node.split_controllers : node.plugins, inst, split, now);
  }
  if (!split && node.split_controllers.erase(id) > 0) {
    // The controller that ran beside the node instance is no longer reported on its own.
    ch.events.push_back(plugin_event(
        "PluginDeregistered", instances.front(),
        "the controller instance of plugin " + in_quotes(id) + " is no longer reported by node " + in_quotes(node.id)));
    ch.node_changed = true;
  }
}

void remove_instance(NodeChange& ch, const std::string& plugin_id) {
  auto& node = ch.node;
  auto it = node.plugins.find(plugin_id);
  if (it == node.plugins.end()) return;
  ch.events.push_back(
      plugin_event("PluginDeregistered", it->second,
                   "plugin " + in_quotes(plugin_id) + " is no longer reported by node " + in_quotes(node.id)));
  node.plugins.erase(it);
  node.split_controllers.erase(plugin_id);
  ch.node_changed = true;
}

// The full set replaces what the node reported before. An id names one instance, or a split
// plugin's controller and node instance; anything else reported for an id (an older agent's
// duplicate) is the last one (as before).
void fold_fingerprints(NodeChange& ch, std::vector<PluginInstance> plugins, domain::Time now) {
  std::map<std::string, std::vector<PluginInstance>> full;
  for (auto& p : plugins) full[p.plugin_id].push_back(std::move(p));
  for (auto& [id, instances] : full) {
    const bool pair = instances.size() == 2 && instances[0].type != instances[1].type &&
                      instances[0].type != domain::PluginType::monolith &&
                      instances[1].type != domain::PluginType::monolith;
    if (!pair && instances.size() > 1) instances.erase(instances.begin(), instances.end() - 1);
    // The node instance first: it is the one the node's `plugins` keeps.
    if (pair && instances[0].type == domain::PluginType::controller) std::swap(instances[0], instances[1]);
  }
  std::vector<std::string> gone;
  for (const auto& [id, inst] : ch.node.plugins)
    if (!full.contains(id)) gone.push_back(id);
  for (const auto& id : gone) remove_instance(ch, id);
  for (auto& [id, instances] : full) fold_plugin(ch, std::move(instances), now);
}

// Every healthy instance on the node becomes unhealthy with `why` (at `at`, or keeping its time),
// folded into the node as a full report would be.
void mark_unhealthy(NodeChange& ch, const std::string& why, std::optional<domain::Time> at, domain::Time now) {
  std::vector<PluginInstance> instances;
  for (const auto* slot : {&ch.node.plugins, &ch.node.split_controllers}) {
    for (const auto& [id, inst] : *slot) {
      PluginInstance i = inst;
      if (i.healthy) {
        i.healthy = false;
        i.health_description = why;
        if (at) i.update_time = *at;
      }
      instances.push_back(std::move(i));
    }
  }
  fold_fingerprints(ch, std::move(instances), now);
}

}  // namespace

void NodeChange::stage(Batch& batch) const {
  if (node_changed) batch.put(node);
  for (const auto& e : events) batch.add_event(e);
}

NodeChange plan_registration(const Node* current, const NodeRegistration& reg, std::vector<PluginInstance> plugins,
                             domain::Time now) {
  NodeChange ch;
  if (current) ch.node = *current;
  auto& node = ch.node;
  node.id = reg.node_id;
  node.name = reg.name.empty() ? reg.node_id : reg.name;
  node.address = reg.address;
  node.attributes = reg.attributes;
  if (!reg.agent_version.empty()) node.attributes["mooring.agent_version"] = reg.agent_version;
  node.certificate_expires = reg.certificate_expires;
  node.certificate_key_sha256 = reg.certificate_key_sha256;
  node.status = domain::NodeStatus::ready;
  node.last_heartbeat = now;
  ch.node_changed = true;
  const std::string what = current ? "node registered again" : "node registered";
  add_node_event(node, NodeEvent{now, "cluster", what, {{"address", reg.address}}});
  ch.events.push_back(Event{.topic = "Node",
                            .type = "NodeRegistered",
                            .key = node.id,
                            .message = what + ": " + in_quotes(node.id) + " (" + node.name + ") at " + reg.address,
                            .details = {{"address", reg.address}, {"name", node.name}}});
  fold_fingerprints(ch, std::move(plugins), now);
  return ch;
}

NodeChange plan_heartbeat(const Node& current, std::vector<PluginInstance> plugins, std::vector<NodeEvent> events,
                          domain::Time now) {
  NodeChange ch;
  ch.node = current;
  auto& node = ch.node;
  if (node.status != domain::NodeStatus::ready) {
    const bool was_down = node.status == domain::NodeStatus::down;
    node.status = domain::NodeStatus::ready;
    ch.node_changed = true;
    const std::string what = was_down ? "node is ready again: heartbeat received" : "node is ready";
    add_node_event(node, NodeEvent{now, "cluster", what, {}});
    ch.events.push_back(
        Event{.topic = "Node", .type = "NodeReady", .key = node.id, .message = what + " from " + in_quotes(node.id)});
  }
  fold_fingerprints(ch, std::move(plugins), now);
  for (auto& e : events) {
    if (!domain::is_set(e.time)) e.time = now;
    auto details = e.details;
    details["subsystem"] = e.subsystem;
    ch.events.push_back(Event{.time = e.time,
                              .topic = "Node",
                              .type = "NodeEvent",
                              .key = node.id,
                              .message = "node " + in_quotes(node.id) + ": " + e.message,
                              .details = std::move(details)});
    add_node_event(node, std::move(e));
    ch.node_changed = true;
  }
  if (ch.node_changed) node.last_heartbeat = now;
  return ch;
}

NodeChange plan_node_down(const Node& current, const std::string& reason, domain::Time now) {
  NodeChange ch;
  ch.node = current;
  auto& node = ch.node;
  node.status = domain::NodeStatus::down;
  ch.node_changed = true;
  add_node_event(node, NodeEvent{now, "cluster", "node down: " + reason, {}});
  ch.events.push_back(Event{.topic = "Node",
                            .type = "NodeDown",
                            .key = node.id,
                            .message = "node " + in_quotes(node.id) + " is down: " + reason});
  mark_unhealthy(ch, "node down: " + reason, now, now);
  return ch;
}

NodeChange plan_unknown_until_heard(const Node& current) {
  NodeChange ch;
  ch.node = current;
  bool healthy = false;
  for (const auto* slot : {&current.plugins, &current.split_controllers})
    for (const auto& [id, inst] : *slot) healthy = healthy || inst.healthy;
  if (!healthy) return ch;
  mark_unhealthy(ch, std::string(domain::kHealthUnknown), std::nullopt, domain::now());
  return ch;
}

}  // namespace mooring::controlplane
