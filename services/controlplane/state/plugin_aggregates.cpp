#include "services/controlplane/state/plugin_aggregates.hpp"

#include <algorithm>

namespace mooring::controlplane {

using domain::Node;
using domain::Plugin;
using domain::PluginInstance;

namespace {

bool same(const PluginInstance* a, const PluginInstance* b) { return a == b || (a && b && *a == *b); }

void add_ids(const Node* node, std::set<std::string>& out) {
  if (!node) return;
  for (const auto& [id, inst] : node->plugins) out.insert(id);
  for (const auto& [id, inst] : node->split_controllers) out.insert(id);
}

}  // namespace

bool NodeSlots::operator==(const NodeSlots& o) const { return same(controller, o.controller) && same(node, o.node); }

NodeSlots slots_of(const Node* node, const std::string& plugin_id) {
  NodeSlots s;
  if (!node) return s;
  // The node instance first, then a split plugin's controller: the order the node's report
  // folds them in (nodes/node_report.cpp), each filed by its type.
  for (const auto* slot : {&node->plugins, &node->split_controllers}) {
    auto it = slot->find(plugin_id);
    if (it == slot->end()) continue;
    if (domain::has_controller(it->second.type)) s.controller = &it->second;
    if (domain::has_node(it->second.type)) s.node = &it->second;
  }
  return s;
}

bool PluginAggregates::Newer::operator()(const std::tuple<domain::Time, int, std::string>& a,
                                         const std::tuple<domain::Time, int, std::string>& b) const {
  if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
  return std::tie(std::get<1>(a), std::get<2>(a)) < std::tie(std::get<1>(b), std::get<2>(b));
}

const Plugin* PluginAggregates::find(const std::string& id) const {
  auto it = plugins_.find(id);
  return it == plugins_.end() ? nullptr : &it->second;
}

std::size_t PluginAggregates::entries(const std::string& id) const {
  const Plugin* p = find(id);
  return p ? p->controllers.size() + p->nodes.size() : 0;
}

std::map<std::string, int> PluginAggregates::changes(const Node* before, const Node* after) {
  std::set<std::string> ids;
  add_ids(before, ids);
  add_ids(after, ids);
  std::map<std::string, int> out;
  for (const auto& id : ids) {
    const NodeSlots was = slots_of(before, id), now = slots_of(after, id);
    if (!(was == now)) out[id] = now.count() - was.count();
  }
  return out;
}

void PluginAggregates::remove_entries(Plugin& p, Tally& t, const std::string& node_id) {
  int map = 0;
  for (auto* instances : {&p.controllers, &p.nodes}) {
    auto& healthy = map == 0 ? p.controllers_healthy : p.nodes_healthy;
    if (auto it = instances->find(node_id); it != instances->end()) {
      t.by_time.erase({it->second.update_time, map, node_id});
      t.requiring_controller -= it->second.requires_controller_plugin ? 1 : 0;
      healthy -= it->second.healthy ? 1 : 0;
      instances->erase(it);
    }
    ++map;
  }
}

void PluginAggregates::add_entry(Plugin& p, Tally& t, int map, const PluginInstance& inst) {
  auto& instances = map == 0 ? p.controllers : p.nodes;
  auto& healthy = map == 0 ? p.controllers_healthy : p.nodes_healthy;
  auto& stored = instances.insert_or_assign(inst.node_id, inst).first->second;
  t.by_time.insert({stored.update_time, map, stored.node_id});
  t.requiring_controller += stored.requires_controller_plugin ? 1 : 0;
  healthy += stored.healthy ? 1 : 0;
}

// What domain::recount derives, from the tally instead of a walk over every instance.
void PluginAggregates::settle(Plugin& p, const Tally& t) {
  p.controllers_expected = static_cast<int>(p.controllers.size());
  p.nodes_expected = static_cast<int>(p.nodes.size());
  if (!t.by_time.empty()) {
    const auto& [time, map, node_id] = *t.by_time.begin();
    const PluginInstance& newest = (map == 0 ? p.controllers : p.nodes).at(node_id);
    p.provider = newest.provider;
    p.version = newest.version;
  }
  p.controller_required = t.requiring_controller > 0;
}

void PluginAggregates::apply(const Node* before, const Node* after, std::uint64_t index) {
  const Node* node = after ? after : before;
  if (!node) return;
  for (const auto& [id, gained] : changes(before, after)) {
    (void)gained;
    auto [it, created] = plugins_.try_emplace(id);
    Plugin& p = it->second;
    if (created) {
      p.id = id;
      p.create_index = index;
    }
    Tally& t = tallies_[id];
    remove_entries(p, t, node->id);
    const NodeSlots now = slots_of(after, id);
    // The instance carries the node it runs on; an old row may lack it.
    auto entry = [&](int map, const PluginInstance* inst) {
      if (!inst) return;
      PluginInstance copy = *inst;
      copy.node_id = node->id;
      add_entry(p, t, map, copy);
    };
    entry(0, now.controller);
    entry(1, now.node);
    if (p.controllers.empty() && p.nodes.empty()) {
      plugins_.erase(it);
      tallies_.erase(id);
      continue;
    }
    p.modify_index = index;
    settle(p, t);
  }
}

void PluginAggregates::rebuild(const std::map<std::string, Node>& nodes, const std::map<std::string, Plugin>& rows) {
  plugins_.clear();
  tallies_.clear();
  for (const auto& [id, node] : nodes) apply(nullptr, &node, node.modify_index);
  for (auto& [id, p] : plugins_) {
    if (auto row = rows.find(id); row != rows.end()) {
      p.create_index = row->second.create_index;
      p.modify_index = row->second.modify_index;
      continue;
    }
    // No row (a state written before the row was kept in the same commit): the nodes' indexes.
    std::uint64_t first = UINT64_MAX, last = 0;
    for (const auto* instances : {&p.controllers, &p.nodes})
      for (const auto& [node_id, inst] : *instances) {
        first = std::min(first, nodes.at(node_id).create_index);
        last = std::max(last, nodes.at(node_id).modify_index);
      }
    p.create_index = first;
    p.modify_index = last;
  }
}

}  // namespace mooring::controlplane
