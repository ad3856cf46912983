#include "services/controlplane/scheduler/placement.hpp"

#include <limits>
#include <optional>
#include <set>

#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "shared/domain/task_user.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

using domain::Allocation;
using domain::Node;
using domain::Plugin;
using domain::Volume;

namespace {

template <class T>
const T* find(const std::map<std::string, T>& m, const std::string& id) {
  auto it = m.find(id);
  return it == m.end() ? nullptr : &it->second;
}

std::string segments(const std::map<std::string, std::string>& s) {
  std::string out = "{";
  for (const auto& [k, v] : s) out += (out.size() > 1 ? ", " : "") + k + "=" + v;
  return out + "}";
}

struct Need {
  const domain::VolumeRequest* request;
  std::string volume_key;  // domain::volume_key, as the cluster's volumes are keyed
  const Volume* volume;
  const Plugin* plugin;
};

using Attached = std::map<std::pair<std::string, std::string>, std::set<std::string>>;  // (node, plugin) -> volumes

// What checking a node needs beyond the node: the volumes asked for, the volumes attached per
// node and plugin (only counted when a plugin limits them), and whether a claim's allocation is
// going away.
struct Context {
  const ClusterView& cluster;
  const std::vector<Need>& needs;
  const std::set<std::string>& plugin_ids;
  std::optional<Attached> attached_cache;
  domain::Time now;

  // Every claim holds an attachment until it is freed.
  const Attached& attached() {
    if (!attached_cache) {
      attached_cache.emplace();
      for (const auto& [vid, v] : cluster.volumes) {
        if (!plugin_ids.contains(v.plugin_id)) continue;
        for (const auto& [aid, claim] : v.claims) (*attached_cache)[{claim.node_id, v.plugin_id}].insert(vid);
      }
    }
    return *attached_cache;
  }
  // Stopping or done: its claims are being released.
  bool releasing(const std::string& alloc_id) const {
    if (cluster.stopping && cluster.stopping->contains(alloc_id)) return true;
    return is_leaving(find(cluster.allocations, alloc_id));
  }
};

// Why `node` cannot run the allocation, or "" when it can.
std::string check_node(const Allocation& alloc, const Node& node, Context& ctx) {
  const auto& needs = ctx.needs;
  if (node.status != domain::NodeStatus::ready) return "node is " + std::string(domain::to_string(node.status));
  if (!node.eligible) return node.drain ? "node is draining" : "node is ineligible for placement";
  // The node's task user rules (reported as attributes): a task it would refuse never lands there.
  if (alloc.task && !alloc.task->csi_plugin)
    if (auto refused = domain::refused_user(alloc.task->user, domain::task_user_rules_from(node.attributes)))
      return *refused;
  std::map<std::string, std::set<std::string>> in_use;  // plugin -> volumes attached with this allocation
  std::map<std::string, Volume> trial;                  // volume copies the claims are tried on
  for (const auto& need : needs) {
    const auto& v = *need.volume;
    const auto& p = *need.plugin;
    auto inst = p.nodes.find(node.id);
    if (inst == p.nodes.end()) return "plugin " + in_quotes(p.id) + " has no node instance on this node";
    if (!inst->second.healthy) {
      std::string desc = inst->second.health_description;
      return "plugin " + in_quotes(p.id) + " is unhealthy on this node" + (desc.empty() ? "" : ": " + desc);
    }
    static const std::map<std::string, std::string> kNoTopology;
    const auto& info = inst->second.node_info;
    const auto& topology = info ? info->accessible_topology : kNoTopology;
    if (!topology_allows(v, topology))
      return "volume " + in_quotes(v.id) + " is not accessible from this node's topology " + segments(topology);
    if (info && info->max_volumes > 0) {
      auto [it, fresh] = in_use.try_emplace(p.id);
      if (fresh) {
        const auto& attached = ctx.attached();
        if (auto a = attached.find({node.id, p.id}); a != attached.end()) it->second = a->second;
      }
      it->second.insert(need.volume_key);
      if (static_cast<std::int64_t>(it->second.size()) > info->max_volumes)
        return "plugin " + in_quotes(p.id) + " allows at most " + std::to_string(info->max_volumes) +
               " volumes on this node and this allocation would need " + std::to_string(it->second.size());
    }
    auto [copy, added] = trial.try_emplace(need.volume_key, v);
    // Claims being released (past, or held by an allocation that is stopping or done) do not
    // block placement: the new allocation's claim waits for them on the node (seed 004), as
    // Nomad's scheduler places once the previous allocation is terminal.
    if (added) drop_releasing_claims(copy->second, [&](const std::string& id) { return ctx.releasing(id); });
    ClaimRequest req{.allocation_id = alloc.id,
                     .node_id = node.id,
                     .external_node_id = info ? info->id : std::string{},
                     .mode = domain::claim_mode(*need.request),
                     .access_mode = need.request->access_mode,
                     .attachment_mode = need.request->attachment_mode};
    if (auto r = take_claim(copy->second, req, ctx.now); !r) return r.refusal().message;
  }
  return {};
}

}  // namespace

ClusterView cluster_view(const StateStore& store) {
  return ClusterView{store.nodes(), store.plugins(), store.volumes(), store.allocations(),
                     [&store](const std::string& node_id) { return store.live_allocation_ids_on(node_id).size(); }};
}

bool topology_allows(const Volume& volume, const std::map<std::string, std::string>& node_topology) {
  const auto& wanted = !volume.topologies.empty() ? volume.topologies : volume.requested_topologies.required;
  if (wanted.empty()) return true;
  for (const auto& t : wanted) {
    bool all = true;
    for (const auto& [key, value] : t.segments) {
      auto it = node_topology.find(key);
      if (it == node_topology.end() || it->second != value) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

int next_alloc_index(const std::vector<const Allocation*>& allocations, const std::string& name) {
  std::set<int> used;
  for (const auto* a : allocations)
    if (a->name == name && a->desired_status == domain::DesiredStatus::run && !domain::is_terminal(*a))
      used.insert(a->index);
  int n = 0;
  while (used.contains(n)) ++n;
  return n;
}

std::string PlacementResult::message(const Allocation& alloc) const {
  std::string out = "allocation " + in_quotes(alloc.name) + " cannot be placed";
  if (!alloc.node_id.empty()) out += " on node " + in_quotes(alloc.node_id);
  if (!cluster_reason.empty()) return out + ": " + cluster_reason;
  if (rejections.empty()) return out + ": no node is registered";
  out += ": ";
  for (std::size_t i = 0; i < rejections.size(); ++i) {
    if (i > 0) out += "; ";
    out += "node " + in_quotes(rejections[i].node_id) + ": " + rejections[i].reason;
  }
  return out;
}

PlacementResult place(const Allocation& alloc, const ClusterView& c) {
  PlacementResult out;
  std::vector<Need> needs;
  std::set<std::string> plugin_ids;
  for (const auto& [name, req] : alloc.volumes) {
    auto id = domain::claimed_volume_key(alloc, req);
    const Volume* v = find(c.volumes, id);
    if (!v) {
      out.cluster_reason =
          "volume not found" + domain::in_namespace(alloc.ns) + ": " + domain::claimed_volume_id(req, alloc.index);
      return out;
    }
    const Plugin* p = find(c.plugins, v->plugin_id);
    out.health_unknown = out.health_unknown || (p && domain::any_health_unknown(*p));
    if (auto refused = check_schedulable(*v, p)) {
      out.cluster_reason = refused->message;
      // "no healthy nodes" right after a restart means "not heard from yet": say so.
      if (out.health_unknown)
        out.cluster_reason += " (its instances' health is " + std::string(domain::kHealthUnknown) + "; retry shortly)";
      return out;
    }
    needs.push_back({&req, id, v, p});
    plugin_ids.insert(p->id);
  }

  Context ctx{.cluster = c, .needs = needs, .plugin_ids = plugin_ids, .attached_cache = {}, .now = domain::now()};
  std::size_t best_load = std::numeric_limits<std::size_t>::max();
  auto consider = [&](const Node& node) {
    auto reason = check_node(alloc, node, ctx);
    if (!reason.empty()) {
      out.rejections.push_back({node.id, std::move(reason)});
      return;
    }
    const std::size_t l = c.live_allocations_on(node.id);
    if (l < best_load) {  // nodes come in id order: ties keep the smaller id
      best_load = l;
      out.node_id = node.id;
    }
  };
  if (!alloc.node_id.empty()) {
    if (const Node* n = find(c.nodes, alloc.node_id))
      consider(*n);
    else
      out.rejections.push_back({alloc.node_id, "node not found"});
  } else {
    for (const auto& [id, node] : c.nodes) consider(node);
  }
  if (out.node_id) {
    out.rejections.clear();
    out.health_unknown = false;
  }
  return out;
}

}  // namespace mooring::controlplane
