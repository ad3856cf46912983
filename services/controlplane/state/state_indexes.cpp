// The state store's in-memory indexes (allocations per node, claiming allocations, names, token
// hashes, volumes by backend volume): rebuilt on load, kept current by every commit, read by the GCs and the agent service.
#include "services/controlplane/state/state_store.hpp"

namespace mooring::controlplane {

const StateStore::NodeAllocations& StateStore::node_allocations(const std::string& node_id) const {
  static const NodeAllocations none;
  auto it = allocations_by_node_.find(node_id);
  return it == allocations_by_node_.end() ? none : it->second;
}

std::set<std::string> StateStore::allocation_ids_on(const std::string& node_id) const {
  std::set<std::string> out;
  for (const auto& [index, id] : node_allocations(node_id).by_modify) out.insert(id);
  return out;
}

const std::set<std::string>& StateStore::live_allocation_ids_on(const std::string& node_id) const {
  return node_allocations(node_id).live;
}

const std::set<std::string>& StateStore::claiming_terminal_allocation_ids_on(const std::string& node_id) const {
  return node_allocations(node_id).claiming_terminal;
}

std::uint64_t StateStore::last_allocation_change_on(const std::string& node_id) const {
  const auto& by_modify = node_allocations(node_id).by_modify;
  return by_modify.empty() ? 0 : by_modify.rbegin()->first;
}

std::vector<std::string> StateStore::allocation_ids_changed_on(const std::string& node_id, std::uint64_t after) const {
  std::vector<std::string> out;
  if (after == std::numeric_limits<std::uint64_t>::max()) return out;
  const auto& by_modify = node_allocations(node_id).by_modify;
  for (auto m = by_modify.lower_bound({after + 1, std::string()}); m != by_modify.end(); ++m) out.push_back(m->second);
  return out;
}

const std::set<std::string>& StateStore::allocation_ids_named(const std::string& ns, const std::string& name) const {
  static const std::set<std::string> none;
  auto it = allocations_by_name_.find({ns, name});
  return it == allocations_by_name_.end() ? none : it->second;
}

const std::set<std::string>& StateStore::allocation_ids_in_group(const std::string& group_id) const {
  static const std::set<std::string> none;
  auto it = allocations_by_group_.find(group_id);
  return it == allocations_by_group_.end() ? none : it->second;
}

std::pair<std::string, std::string> backend_id(const domain::Volume& v) {
  return {v.provider.empty() ? "plugin " + v.plugin_id : v.provider, v.external_id};
}

const std::set<std::string>& StateStore::volume_keys_with_backend(const domain::Volume& v) const {
  static const std::set<std::string> none;
  auto it = volumes_by_backend_.find(backend_id(v));
  return it == volumes_by_backend_.end() ? none : it->second;
}

void StateStore::index_backend(const std::string& key, const domain::Volume& v, bool add) {
  if (v.external_id.empty()) return;
  const auto backend = backend_id(v);
  if (add) {
    volumes_by_backend_[backend].insert(key);
  } else if (auto it = volumes_by_backend_.find(backend);
             it != volumes_by_backend_.end() && it->second.erase(key) && it->second.empty()) {
    volumes_by_backend_.erase(it);
  }
}

void StateStore::rebuild_indexes() {
  acl_token_by_hash_.clear();
  for (const auto& [accessor, t] : acl_tokens_) acl_token_by_hash_.emplace(t.secret_hash, accessor);
  requests_by_time_.clear();
  for (const auto& [key, r] : requests_) requests_by_time_.emplace(r.time, key);
  allocations_by_node_.clear();
  allocations_by_name_.clear();
  allocations_by_group_.clear();
  claims_by_allocation_.clear();
  volumes_by_backend_.clear();
  for (const auto& [key, v] : volumes_) {
    index_claims(v, true);
    index_backend(key, v, true);
  }
  for (const auto& [id, a] : allocations_) index_allocation(a);
}

void StateStore::index_allocation(const domain::Allocation& a) {
  auto& node = allocations_by_node_[a.node_id];
  node.by_modify.emplace(a.modify_index, a.id);
  if (!domain::is_terminal(a))
    node.live.insert(a.id);
  else if (claims_by_allocation_.contains(a.id))
    node.claiming_terminal.insert(a.id);
  allocations_by_name_[{a.ns, a.name}].insert(a.id);
  if (!a.system_id.empty()) allocations_by_group_[a.system_id].insert(a.id);
}

void StateStore::unindex_allocation(const domain::Allocation& a) {
  if (auto it = allocations_by_node_.find(a.node_id); it != allocations_by_node_.end()) {
    auto& node = it->second;
    node.live.erase(a.id);
    node.claiming_terminal.erase(a.id);
    node.by_modify.erase({a.modify_index, a.id});
    if (node.by_modify.empty()) allocations_by_node_.erase(it);
  }
  if (auto it = allocations_by_name_.find({a.ns, a.name});
      it != allocations_by_name_.end() && it->second.erase(a.id) && it->second.empty())
    allocations_by_name_.erase(it);
  if (auto it = allocations_by_group_.find(a.system_id);
      !a.system_id.empty() && it != allocations_by_group_.end() && it->second.erase(a.id) && it->second.empty())
    allocations_by_group_.erase(it);
}

void StateStore::index_claims(const domain::Volume& v, bool add) {
  for (const auto& [alloc_id, claim] : v.claims) {
    if (add) {
      if (++claims_by_allocation_[alloc_id] == 1) refresh_claiming(alloc_id);
    } else if (auto it = claims_by_allocation_.find(alloc_id); it != claims_by_allocation_.end() && --it->second == 0) {
      claims_by_allocation_.erase(it);
      refresh_claiming(alloc_id);
    }
  }
}

// A terminal allocation is in its node's claiming set exactly while some volume's claims name it.
void StateStore::refresh_claiming(const std::string& alloc_id) {
  const auto* a = allocation(alloc_id);
  if (!a || !domain::is_terminal(*a)) return;
  auto node = allocations_by_node_.find(a->node_id);
  if (node == allocations_by_node_.end()) return;
  if (claims_by_allocation_.contains(alloc_id))
    node->second.claiming_terminal.insert(alloc_id);
  else
    node->second.claiming_terminal.erase(alloc_id);
}

}  // namespace mooring::controlplane
