// State room: each plugin's aggregate (its controller and node instances, healthy and expected
// counts, provider and version of the newest instance), an index over the node rows. A node's
// instances are stored once, in its own row (Node::plugins, Node::split_controllers); a plugin's
// row holds only its id and indexes. Writing every node's instance into the plugin's row on each
// registration or node down made a fleet's first registration write O(N^2) bytes (5000 nodes did
// not finish, bench/node_fleet.cpp). Here a node's change updates the aggregate in place, in
// O(log N), and the counts and the newest instance are kept incrementally.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"

namespace mooring::controlplane {

// A node's entries in one plugin's aggregate: its instance in `controllers` and in `nodes`
// (a monolith is both; a split plugin's controller and node instance one each), as
// domain::set_node_instances files them.
struct NodeSlots {
  const domain::PluginInstance* controller = nullptr;
  const domain::PluginInstance* node = nullptr;
  int count() const { return (controller ? 1 : 0) + (node ? 1 : 0); }
  bool operator==(const NodeSlots& o) const;  // same instances (by value)
};
NodeSlots slots_of(const domain::Node* node, const std::string& plugin_id);

class PluginAggregates {
 public:
  const std::map<std::string, domain::Plugin>& plugins() const { return plugins_; }
  const domain::Plugin* find(const std::string& id) const;

  // Every aggregate again from the nodes; each one's indexes from `rows` (the stored plugin rows)
  // when there is one, else the highest modify index of the nodes that hold it.
  void rebuild(const std::map<std::string, domain::Node>& nodes, const std::map<std::string, domain::Plugin>& rows);
  // One node's row goes from `before` to `after` (either null: created or removed) in the commit
  // `index`: each plugin whose entries of that node differ is updated in place, created at its
  // first instance and removed with its last.
  void apply(const domain::Node* before, const domain::Node* after, std::uint64_t index);
  // The plugins whose entries of the node differ between `before` and `after`, each with how many
  // entries the node gains (negative: loses).
  static std::map<std::string, int> changes(const domain::Node* before, const domain::Node* after);
  // Entries (controller and node instances) the plugin has now; 0 when it does not exist.
  std::size_t entries(const std::string& id) const;

 private:
  // (update time, map: 0 controllers 1 nodes, node id), newest first; on a tie the first in
  // domain::recount's order, so provider and version are what recount would pick.
  struct Newer {
    bool operator()(const std::tuple<domain::Time, int, std::string>& a,
                    const std::tuple<domain::Time, int, std::string>& b) const;
  };
  struct Tally {
    std::set<std::tuple<domain::Time, int, std::string>, Newer> by_time;
    int requiring_controller = 0;  // entries that advertise CONTROLLER_SERVICE
  };
  void remove_entries(domain::Plugin& p, Tally& t, const std::string& node_id);
  void add_entry(domain::Plugin& p, Tally& t, int map, const domain::PluginInstance& inst);
  static void settle(domain::Plugin& p, const Tally& t);

  std::map<std::string, domain::Plugin> plugins_;
  std::map<std::string, Tally> tallies_;
};

}  // namespace mooring::controlplane
