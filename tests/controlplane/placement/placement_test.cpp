// Placement rules: ready nodes with a healthy node plugin, topology, max volumes, claims that
// would succeed, least loaded first, and a 409 message that says why each node was rejected.
#include <gtest/gtest.h>

#include <algorithm>

#include "services/controlplane/placement/placement.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane {

using domain::AccessMode;
using domain::AttachmentMode;

namespace {

struct Cluster {
  std::map<std::string, domain::Node> nodes;
  std::map<std::string, domain::Plugin> plugins;
  std::map<std::string, domain::Volume> volumes;
  std::map<std::string, domain::Allocation> allocations;
  ClusterView view() const {
    return {nodes, plugins, volumes, allocations, [this](const std::string& node_id) {
              return static_cast<std::size_t>(std::count_if(allocations.begin(), allocations.end(), [&](const auto& kv) {
                return kv.second.node_id == node_id && !domain::is_terminal(kv.second);
              }));
            }};
  }

  // A ready node running a healthy node instance of `plugin`.
  domain::PluginInstance& add_node(const std::string& id, const std::string& plugin = "hostpath",
                                   std::map<std::string, std::string> topology = {}) {
    domain::Node n;
    n.id = id;
    n.status = domain::NodeStatus::ready;
    nodes[id] = n;
    domain::PluginInstance i;
    i.plugin_id = plugin;
    i.node_id = id;
    i.type = domain::PluginType::node;
    i.healthy = true;
    i.node_info = domain::NodeInfo{};
    i.node_info->id = "csi-" + id;
    i.node_info->accessible_topology = std::move(topology);
    auto& p = plugins[plugin];
    domain::upsert_instance(p, i);
    return p.nodes.at(id);
  }
  void refresh(const std::string& plugin) { domain::recount(plugins.at(plugin)); }
  domain::Volume& add_volume(const std::string& id, AccessMode mode = AccessMode::single_node_writer) {
    auto v = fixtures::volume(id);
    v.requested_capabilities = {{mode, AttachmentMode::file_system}};
    return volumes[id] = v;
  }
  void running(const std::string& id, const std::string& node) {
    auto a = fixtures::allocation(id, node);
    a.client_status = domain::ClientStatus::running;
    allocations[id] = a;
  }
};

domain::Allocation alloc_for(std::vector<std::string> volumes, AccessMode mode = AccessMode::single_node_writer) {
  domain::Allocation a;
  a.id = "new-alloc";
  a.name = "web";
  for (const auto& v : volumes) {
    domain::VolumeRequest r;
    r.name = "vol-" + v;
    r.source = v;
    r.access_mode = mode;
    r.attachment_mode = AttachmentMode::file_system;
    r.read_only = domain::is_read_only(mode);
    a.volumes[r.name] = r;
  }
  return a;
}

void claim(domain::Volume& v, const std::string& alloc, const std::string& node, domain::ClaimMode mode) {
  v.claims[alloc] = domain::Claim{.allocation_id = alloc, .node_id = node, .mode = mode,
                                  .access_mode = v.requested_capabilities[0].access_mode,
                                  .attachment_mode = AttachmentMode::file_system};
  v.access_mode = v.requested_capabilities[0].access_mode;
  v.attachment_mode = AttachmentMode::file_system;
}

}  // namespace

TEST(Placement, PicksTheLeastLoadedReadyNodeAndBreaksTiesByNodeId) {
  Cluster c;
  c.add_node("a");
  c.add_node("b");
  c.add_node("c");
  c.running("x1", "a");
  c.running("x2", "c");
  auto r = place(alloc_for({}), c.view());
  ASSERT_TRUE(r.node_id);
  EXPECT_EQ(*r.node_id, "b");
  c.running("x3", "b");
  EXPECT_EQ(*place(alloc_for({}), c.view()).node_id, "a");
  // Terminal allocations do not count as load.
  c.allocations["x1"].client_status = domain::ClientStatus::complete;
  EXPECT_EQ(*place(alloc_for({}), c.view()).node_id, "a");
}

// Issue 40: right after a control plane restart the node instances' health is unknown until the
// agents are heard from: not placed, and the result says a retry is worth it (the API answers
// 503 with Retry-After, not 409).
TEST(Placement, NotPlacedWhileAPluginsHealthIsUnknownSaysSo) {
  Cluster c;
  c.add_volume("v1");
  auto& inst = c.add_node("a");
  inst.healthy = false;
  inst.health_description = std::string(domain::kHealthUnknown);
  c.refresh("hostpath");
  auto r = place(alloc_for({"v1"}), c.view());
  ASSERT_FALSE(r.node_id);
  EXPECT_TRUE(r.health_unknown);
  EXPECT_NE(r.message(alloc_for({"v1"})).find("unknown until"), std::string::npos) << r.message(alloc_for({"v1"}));

  // Unhealthy for a reason of its own: a plain refusal.
  c.plugins["hostpath"].nodes.at("a").health_description = "Probe failed";
  auto refused = place(alloc_for({"v1"}), c.view());
  ASSERT_FALSE(refused.node_id);
  EXPECT_FALSE(refused.health_unknown);
  // Heard from again: placed, nothing to retry.
  c.plugins["hostpath"].nodes.at("a").healthy = true;
  c.refresh("hostpath");
  auto placed = place(alloc_for({"v1"}), c.view());
  ASSERT_TRUE(placed.node_id);
  EXPECT_FALSE(placed.health_unknown);
}

TEST(Placement, SkipsNodesThatAreDownOrLackAHealthyNodePlugin) {
  Cluster c;
  c.add_volume("v1");
  c.add_node("a");
  c.add_node("b").healthy = false;
  c.add_node("c", "other");
  c.add_node("d");
  c.refresh("hostpath");
  c.nodes["d"].status = domain::NodeStatus::down;
  c.running("busy", "a");  // a stays the only fit even though it is loaded
  auto r = place(alloc_for({"v1"}), c.view());
  ASSERT_TRUE(r.node_id) << r.message(alloc_for({"v1"}));
  EXPECT_EQ(*r.node_id, "a");

  c.plugins["hostpath"].nodes.at("a").healthy = false;
  c.refresh("hostpath");
  auto none = place(alloc_for({"v1"}), c.view());
  ASSERT_FALSE(none.node_id);
  auto msg = none.message(alloc_for({"v1"}));
  EXPECT_NE(msg.find("allocation \"web\" cannot be placed: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("node \"d\": node is down"), std::string::npos) << msg;

  // No healthy instance anywhere: one reason for the whole cluster.
  c.plugins["hostpath"].nodes.at("d").healthy = false;
  c.refresh("hostpath");
  msg = place(alloc_for({"v1"}), c.view()).message(alloc_for({"v1"}));
  EXPECT_NE(msg.find("has no healthy nodes"), std::string::npos) << msg;
}

TEST(Placement, RejectionMessageNamesEachNodeAndWhy) {
  Cluster c;
  c.add_volume("v1");
  c.add_node("a");
  c.add_node("b").healthy = false;
  c.add_node("c", "other");
  c.refresh("hostpath");
  c.nodes["a"].status = domain::NodeStatus::down;
  auto a = alloc_for({"v1"});
  auto r = place(a, c.view());
  ASSERT_FALSE(r.node_id);
  auto msg = r.message(a);
  EXPECT_NE(msg.find("node \"a\": node is down"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node \"b\": plugin \"hostpath\" is unhealthy on this node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node \"c\": plugin \"hostpath\" has no node instance on this node"), std::string::npos) << msg;
}

TEST(Placement, TopologyMustMatchTheVolumesTopologies) {
  Cluster c;
  auto& v = c.add_volume("v1");
  v.topologies = {{{{"zone", "b"}}}};
  c.add_node("n-a", "hostpath", {{"zone", "a"}, {"rack", "1"}});
  c.add_node("n-b", "hostpath", {{"zone", "b"}, {"rack", "7"}});
  c.running("l1", "n-b");
  c.running("l2", "n-b");
  auto r = place(alloc_for({"v1"}), c.view());
  ASSERT_TRUE(r.node_id);
  EXPECT_EQ(*r.node_id, "n-b");  // loaded, but the only one in zone b

  // Without plugin topologies, the required request applies.
  auto& w = c.add_volume("v2");
  w.requested_topologies.required = {{{{"zone", "a"}}}};
  EXPECT_EQ(*place(alloc_for({"v2"}), c.view()).node_id, "n-a");
  // Both: no node is in both zones.
  auto both = alloc_for({"v1", "v2"});
  auto none = place(both, c.view());
  ASSERT_FALSE(none.node_id);
  EXPECT_NE(none.message(both).find("not accessible from this node's topology {rack=1, zone=a}"), std::string::npos)
      << none.message(both);
}

TEST(Placement, TopologyMatchingIsBySegmentSubset) {
  domain::Volume v;
  EXPECT_TRUE(topology_allows(v, {}));
  v.topologies = {{{{"zone", "a"}}}, {{{"zone", "c"}}}};
  EXPECT_TRUE(topology_allows(v, {{"zone", "c"}, {"host", "x"}}));
  EXPECT_FALSE(topology_allows(v, {{"host", "x"}}));
  EXPECT_FALSE(topology_allows(v, {{"zone", "b"}}));
}

TEST(Placement, MaxVolumesCountsVolumesAttachedToTheNodeForThatPlugin) {
  Cluster c;
  c.add_node("a").node_info->max_volumes = 2;
  c.add_node("b").node_info->max_volumes = 0;  // unlimited
  c.running("l1", "b");
  c.running("l2", "b");
  c.running("l3", "b");
  auto& v1 = c.add_volume("v1", AccessMode::multi_node_multi_writer);
  claim(v1, "other", "a", domain::ClaimMode::write);
  c.add_volume("v2");
  c.add_volume("v3");
  // a holds v1 already: v1 + v2 fits 2 volumes on a (a is less loaded).
  EXPECT_EQ(*place(alloc_for({"v2"}), c.view()).node_id, "a");
  auto both = alloc_for({"v2", "v3"});
  auto r = place(both, c.view());
  ASSERT_TRUE(r.node_id);
  EXPECT_EQ(*r.node_id, "b");  // a would need 3
  both.node_id = "a";
  auto pinned = place(both, c.view());
  ASSERT_FALSE(pinned.node_id);
  EXPECT_NE(pinned.message(both).find("at most 2 volumes"), std::string::npos) << pinned.message(both);
  // Re-using the volume already attached there adds nothing.
  auto reuse = alloc_for({"v1"}, AccessMode::multi_node_multi_writer);
  reuse.node_id = "a";
  EXPECT_TRUE(place(reuse, c.view()).node_id);
}

TEST(Placement, ClaimsMustSucceedOnTheNode) {
  Cluster c;
  c.add_node("a");
  c.add_node("b");
  auto& v = c.add_volume("v1");  // single-node-writer
  claim(v, "holder", "a", domain::ClaimMode::write);
  auto a = alloc_for({"v1"});
  auto r = place(a, c.view());
  ASSERT_FALSE(r.node_id);
  auto msg = r.message(a);
  EXPECT_NE(msg.find("volume max claims reached"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"holder\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("attached to node \"a\""), std::string::npos) << msg;
  // A reader of a multi-node-reader-only volume fits anywhere.
  auto& ro = c.add_volume("ro", AccessMode::multi_node_reader_only);
  claim(ro, "reader", "a", domain::ClaimMode::read);
  EXPECT_TRUE(place(alloc_for({"ro"}, AccessMode::multi_node_reader_only), c.view()).node_id);
}

// Seed 004: once the holder is stopping (or its claim is already past), the next allocation is
// placed and its claim waits on the node for the release, instead of being refused here.
TEST(Placement, ClaimsBeingReleasedDoNotBlockPlacement) {
  Cluster c;
  c.add_node("a");
  c.add_node("b");
  auto& v = c.add_volume("v1");  // single-node-writer
  claim(v, "holder", "a", domain::ClaimMode::write);
  c.running("holder", "a");
  auto a = alloc_for({"v1"});
  a.node_id = "b";
  EXPECT_FALSE(place(a, c.view()).node_id) << "a running holder blocks";
  c.allocations["holder"].desired_status = domain::DesiredStatus::stop;
  ASSERT_TRUE(place(a, c.view()).node_id) << place(a, c.view()).message(a);
  EXPECT_EQ(*place(a, c.view()).node_id, "b");
  // A past claim (the release has started) does not block either, whatever the allocation says.
  c.allocations["holder"].desired_status = domain::DesiredStatus::run;
  c.volumes["v1"].claims["holder"].state = domain::ClaimState::node_detached;
  EXPECT_TRUE(place(a, c.view()).node_id);
}

TEST(Placement, ExplicitNodeIsCheckedWithTheSameRules) {
  Cluster c;
  c.add_volume("v1");
  c.add_node("a");
  c.add_node("b", "other");
  auto a = alloc_for({"v1"});
  a.node_id = "b";
  auto r = place(a, c.view());
  ASSERT_FALSE(r.node_id);
  EXPECT_NE(r.message(a).find("cannot be placed on node \"b\": node \"b\": plugin \"hostpath\" has no node instance"),
            std::string::npos)
      << r.message(a);
  a.node_id = "a";
  EXPECT_EQ(*place(a, c.view()).node_id, "a");
}

TEST(Placement, ControllerRequiredWithoutHealthyControllersIsAClusterReason) {
  Cluster c;
  c.add_volume("v1");
  c.add_node("a");
  c.plugins["hostpath"].controller_required = true;
  auto a = alloc_for({"v1"});
  auto r = place(a, c.view());
  ASSERT_FALSE(r.node_id);
  EXPECT_NE(r.message(a).find("no healthy controllers"), std::string::npos) << r.message(a);
}

TEST(Placement, NoNodesSaysSo) {
  Cluster c;
  auto a = alloc_for({});
  EXPECT_NE(place(a, c.view()).message(a).find("no node is registered"), std::string::npos);
}

TEST(Placement, PerAllocVolumesUseTheAllocationIndex) {
  Cluster c;
  c.add_node("a");
  c.add_volume("data[1]");
  auto a = alloc_for({});
  domain::VolumeRequest r;
  r.source = "data";
  r.per_alloc = true;
  r.access_mode = AccessMode::single_node_writer;
  r.attachment_mode = AttachmentMode::file_system;
  a.volumes["data"] = r;
  a.index = 1;
  EXPECT_TRUE(place(a, c.view()).node_id);
  a.index = 0;
  auto missing = place(a, c.view());
  ASSERT_FALSE(missing.node_id);
  EXPECT_NE(missing.message(a).find("volume not found: data[0]"), std::string::npos);
}

TEST(Placement, NextAllocIndexReusesTheLowestFreeIndexOfTheName) {
  std::map<std::string, domain::Allocation> allocs;
  auto next = [&](const std::string& name) {
    std::vector<const domain::Allocation*> all;
    for (const auto& [id, a] : allocs) all.push_back(&a);
    return next_alloc_index(all, name);
  };
  EXPECT_EQ(next("web"), 0);
  auto add = [&](std::string id, std::string name, int index, domain::ClientStatus s) {
    auto a = fixtures::allocation(id);
    a.name = std::move(name);
    a.index = index;
    a.client_status = s;
    allocs[id] = a;
  };
  add("1", "web", 0, domain::ClientStatus::running);
  add("2", "web", 1, domain::ClientStatus::running);
  add("3", "db", 2, domain::ClientStatus::running);
  EXPECT_EQ(next("web"), 2);
  allocs["1"].client_status = domain::ClientStatus::failed;  // its replacement takes index 0
  EXPECT_EQ(next("web"), 0);
  EXPECT_EQ(next("db"), 0);
}

}  // namespace mooring::controlplane
