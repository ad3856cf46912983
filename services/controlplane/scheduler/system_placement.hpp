// Scheduler room: which nodes a system allocation (a group) runs on, and the copy it places on
// each. Pure: the API's submit and the system reconciler (system_reconciler.hpp) do the I/O.
//
// NodeSelector: every entry must match (an empty selector matches every node).
//   "name"  -> a glob (fnmatch(3), no flags: '*', '?', '[...]') on the node's name;
//   "id"    -> a glob on the node's id;
//   any other key -> the node attribute of that key (the agent's fingerprinted attributes, or
//              the `meta.*` ones it is configured with) equals the value exactly.
// A node is eligible when it is ready, takes placements (not drained or marked ineligible) and
// the selector matches; the copy is then placed on it
// with the ordinary placement checks (place() with the node chosen), so a node that cannot serve
// the group's volumes gets no copy, and says why.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

// The first bad entry of a selector ("field \"NodeSelector.<key>\": ..."), or nullopt.
std::optional<std::string> check_node_selector(const std::map<std::string, std::string>& selector);

bool selector_matches(const std::map<std::string, std::string>& selector, const domain::Node& node);

// Ready and matching the group's selector.
bool system_eligible(const domain::Allocation& group, const domain::Node& node);

// A live copy: placed, not terminal and still meant to run.
bool is_live_copy(const domain::Allocation& copy);

// The group's copy for `node_id`: the group's task and volumes under a fresh id `id`, with
// system_id = the group's id; pending, meant to run.
domain::Allocation make_system_copy(const domain::Allocation& group, const std::string& node_id, std::string id,
                                    domain::Time now);

}  // namespace mooring::controlplane
