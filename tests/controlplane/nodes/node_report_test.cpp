// Node reports folded into node records, and the plugin aggregates kept from them (as the store
// keeps them): counts, removal, no write for an unchanged heartbeat, node down and back.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "services/controlplane/nodes/node_report.hpp"
#include "services/controlplane/state/plugin_aggregates.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/plugin_facts.hpp"

namespace mooring::controlplane {

using domain::PluginInstance;
using domain::PluginType;

namespace {

PluginInstance fp(std::string plugin, PluginType type, bool healthy = true, std::int64_t t = 1000) {
  PluginInstance i;
  i.plugin_id = std::move(plugin);
  i.type = type;
  i.healthy = healthy;
  i.provider = "hostpath.mooring.dev";
  i.version = "1.0";
  i.requires_controller_plugin = domain::has_controller(type);
  if (domain::has_node(type)) {
    i.node_info = domain::NodeInfo{};
    i.node_info->id = "csi-node";
  }
  if (domain::has_controller(type)) {
    i.controller_info = domain::ControllerInfo{};
    i.controller_info->supports_attach_detach = true;
  }
  i.update_time = domain::from_unix_ms(t);
  return i;
}

// A tiny in-memory world: nodes as the store would hold them after applying plans, and the
// plugins' aggregates kept from them as the store keeps them.
struct World {
  std::map<std::string, domain::Node> nodes;
  PluginAggregates aggregates;
  const std::map<std::string, domain::Plugin>& plugins = aggregates.plugins();
  std::uint64_t index = 0;
  void apply(const NodeChange& ch) {
    if (!ch.node_changed) return;
    auto it = nodes.find(ch.node.id);
    aggregates.apply(it == nodes.end() ? nullptr : &it->second, &ch.node, ++index);
    nodes[ch.node.id] = ch.node;
  }
  NodeChange reg(const std::string& node, std::vector<PluginInstance> fps) {
    auto it = nodes.find(node);
    auto ch =
        plan_registration(it == nodes.end() ? nullptr : &it->second,
                          NodeRegistration{.node_id = node, .address = node + ":4702"}, std::move(fps), domain::now());
    apply(ch);
    return ch;
  }
  NodeChange beat(const std::string& node, std::vector<PluginInstance> fps,
                  std::vector<domain::NodeEvent> events = {}) {
    auto ch = plan_heartbeat(nodes.at(node), std::move(fps), std::move(events), domain::now());
    apply(ch);
    return ch;
  }
};

}  // namespace

TEST(NodeReport, RegistrationStoresTheNodeReadyAndAggregatesItsPlugins) {
  World w;
  auto ch = w.reg("n1", {fp("hostpath", PluginType::monolith)});
  ASSERT_TRUE(ch.node_changed);
  const auto& node = w.nodes.at("n1");
  EXPECT_EQ(node.status, domain::NodeStatus::ready);
  EXPECT_EQ(node.name, "n1");
  EXPECT_EQ(node.address, "n1:4702");
  ASSERT_TRUE(node.plugins.contains("hostpath"));
  EXPECT_EQ(node.plugins.at("hostpath").node_id, "n1");
  const auto& p = w.plugins.at("hostpath");
  EXPECT_EQ(p.controllers_healthy, 1);
  EXPECT_EQ(p.controllers_expected, 1);
  EXPECT_EQ(p.nodes_healthy, 1);
  EXPECT_EQ(p.nodes_expected, 1);
  EXPECT_TRUE(p.controller_required);
  EXPECT_EQ(p.provider, "hostpath.mooring.dev");
  ASSERT_FALSE(ch.events.empty());
  EXPECT_EQ(ch.events[0].type, "NodeRegistered");
  ASSERT_EQ(node.events.size(), 1u);
  EXPECT_EQ(node.events[0].message, "node registered");
}

TEST(NodeReport, HeartbeatsFromSeveralNodesCountHealthyAndExpected) {
  World w;
  w.reg("n1", {fp("hostpath", PluginType::node)});
  w.reg("n2", {fp("hostpath", PluginType::node, false)});
  w.reg("n3", {fp("hostpath", PluginType::controller)});
  const auto& p = w.plugins.at("hostpath");
  EXPECT_EQ(p.nodes_expected, 2);
  EXPECT_EQ(p.nodes_healthy, 1);
  EXPECT_EQ(p.controllers_expected, 1);
  EXPECT_EQ(p.controllers_healthy, 1);
  // n2's plugin recovers.
  auto ch = w.beat("n2", {fp("hostpath", PluginType::node, true, 2000)});
  EXPECT_EQ(w.plugins.at("hostpath").nodes_healthy, 2);
  ASSERT_EQ(ch.events.size(), 1u);
  EXPECT_EQ(ch.events[0].type, "PluginHealthy");
  EXPECT_EQ(ch.events[0].details.at("node_id"), "n2");
}

TEST(NodeReport, UnchangedHeartbeatPlansNoWriteEvenWithANewFingerprintTime) {
  World w;
  w.reg("n1", {fp("hostpath", PluginType::monolith, true, 1000)});
  auto ch = w.beat("n1", {fp("hostpath", PluginType::monolith, true, 5000)});
  EXPECT_TRUE(ch.empty());
  // A changed health description is a change.
  auto changed = fp("hostpath", PluginType::monolith, true, 6000);
  changed.health_description = "probe slow";
  EXPECT_FALSE(w.beat("n1", {changed}).empty());
}

// A heartbeat that changes nothing costs what one node's report costs, not what the aggregate of
// every node costs: before, each one copied and compared the plugin's aggregate (an instance per
// node), so N nodes heartbeating cost O(N^2) (bench/node_fleet.cpp: 2000 nodes saturated the
// control plane). 5000 unchanged heartbeats over an aggregate of 5000 nodes took minutes then
// under ASan; the bound is far above what they take now.
TEST(NodeReport, UnchangedHeartbeatsOfManyNodesDoNotCopyThePluginsAggregate) {
  constexpr int kNodes = 5000;
  World w;
  for (int i = 0; i < kNodes; ++i) {
    const std::string id = "n" + std::to_string(i);
    auto inst = fp("hostpath", PluginType::node);
    inst.node_id = id;
    NodeChange put;
    put.node.id = id;
    put.node.status = domain::NodeStatus::ready;
    put.node.plugins["hostpath"] = inst;
    put.node_changed = true;
    w.apply(put);
  }
  const auto before = w.plugins.at("hostpath");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kNodes; ++i)
    ASSERT_TRUE(w.beat("n" + std::to_string(i), {fp("hostpath", PluginType::node, true, 2000 + i)}).empty());
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf("%d unchanged heartbeats over an aggregate of %d nodes: %.1f ms\n", kNodes, kNodes,
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(w.plugins.at("hostpath"), before);
}

// A restarted agent registers with its plugin "starting" before it has fingerprinted it: the
// health changes, the capabilities the plugin last reported stay (a controller that attaches
// must not read as "needs no controller" for those moments).
TEST(NodeReport, AnUnfingerprintedReportKeepsTheCapabilitiesLastReported) {
  World w;
  w.reg("n1", {fp("hostpath", PluginType::monolith)});
  ASSERT_EQ(domain::needs_controller_publish(w.plugins.at("hostpath")), std::optional<bool>(true));
  PluginInstance starting;
  starting.plugin_id = "hostpath";
  starting.type = PluginType::monolith;
  starting.health_description = "starting";
  w.reg("n1", {starting});
  const auto& inst = w.nodes.at("n1").plugins.at("hostpath");
  EXPECT_FALSE(inst.healthy);
  EXPECT_EQ(inst.health_description, "starting");
  ASSERT_TRUE(inst.controller_info);
  EXPECT_TRUE(inst.controller_info->supports_attach_detach);
  EXPECT_EQ(inst.provider, "hostpath.mooring.dev");
  EXPECT_TRUE(w.plugins.at("hostpath").controller_required);
  EXPECT_EQ(domain::needs_controller_publish(w.plugins.at("hostpath")), std::optional<bool>(true));
  // The first real fingerprint replaces them, whatever it says.
  auto changed = fp("hostpath", PluginType::monolith, true, 3000);
  changed.controller_info->supports_attach_detach = false;
  w.beat("n1", {changed});
  EXPECT_EQ(domain::needs_controller_publish(w.plugins.at("hostpath")), std::optional<bool>(false));
}

TEST(NodeReport, PluginAbsentFromTheFullSetIsRemovedAndDeletedWhenNoInstanceIsLeft) {
  World w;
  w.reg("n1", {fp("a", PluginType::node), fp("b", PluginType::node)});
  w.reg("n2", {fp("a", PluginType::node)});
  auto ch = w.beat("n1", {fp("a", PluginType::node)});
  EXPECT_FALSE(w.nodes.at("n1").plugins.contains("b"));
  EXPECT_TRUE(ch.node_changed);
  EXPECT_FALSE(w.plugins.contains("b"));  // no instance anywhere: the record is gone
  w.beat("n1", {});
  ASSERT_TRUE(w.plugins.contains("a"));  // n2 still runs it
  EXPECT_EQ(w.plugins.at("a").nodes_expected, 1);
  EXPECT_FALSE(w.plugins.at("a").nodes.contains("n1"));
}

TEST(NodeReport, TypeChangeMovesTheInstanceBetweenMaps) {
  World w;
  w.reg("n1", {fp("a", PluginType::monolith)});
  w.beat("n1", {fp("a", PluginType::node)});
  const auto& p = w.plugins.at("a");
  EXPECT_EQ(p.controllers_expected, 0);
  EXPECT_EQ(p.nodes_expected, 1);
}

TEST(NodeReport, NodeEventsAreKeptBoundedAndStoredAsEvents) {
  World w;
  w.reg("n1", {});
  std::vector<domain::NodeEvent> events;
  for (int i = 0; i < 60; ++i)
    events.push_back({domain::from_unix_ms(1000 + i), "plugin", "event " + std::to_string(i), {{"plugin_id", "a"}}});
  auto ch = w.beat("n1", {}, events);
  EXPECT_EQ(ch.events.size(), 60u);
  EXPECT_EQ(ch.events[0].type, "NodeEvent");
  EXPECT_EQ(ch.events[0].details.at("subsystem"), "plugin");
  const auto& node = w.nodes.at("n1");
  ASSERT_EQ(node.events.size(), kMaxNodeEvents);
  EXPECT_EQ(node.events.back().message, "event 59");
}

TEST(NodeReport, NodeDownMarksItsInstancesUnhealthyAndAHeartbeatBringsItBack) {
  World w;
  w.reg("n1", {fp("a", PluginType::monolith)});
  auto down = plan_node_down(w.nodes.at("n1"), "no heartbeat for 10s", domain::now());
  w.apply(down);
  EXPECT_EQ(w.nodes.at("n1").status, domain::NodeStatus::down);
  EXPECT_EQ(w.plugins.at("a").nodes_healthy, 0);
  EXPECT_EQ(w.plugins.at("a").controllers_healthy, 0);
  EXPECT_EQ(w.plugins.at("a").nodes_expected, 1);
  EXPECT_NE(w.nodes.at("n1").plugins.at("a").health_description.find("node down"), std::string::npos);
  bool saw_down = false;
  for (const auto& e : down.events) saw_down |= e.type == "NodeDown";
  EXPECT_TRUE(saw_down);

  auto back = w.beat("n1", {fp("a", PluginType::monolith)});
  EXPECT_EQ(w.nodes.at("n1").status, domain::NodeStatus::ready);
  EXPECT_EQ(w.plugins.at("a").nodes_healthy, 1);
  bool saw_ready = false;
  for (const auto& e : back.events) saw_ready |= e.type == "NodeReady";
  EXPECT_TRUE(saw_ready);
}

// Issue 40: a restarted control plane (or a new leader) does not report healthy what it has not
// heard from: each healthy instance counts as unknown, keeping its facts and the time of its
// last fingerprint, until the agent reports again.
TEST(NodeReport, AtTheStartOfLeadingHealthyInstancesCountAsUnknownUntilTheAgentReportsAgain) {
  World w;
  w.reg("n1", {fp("a", PluginType::monolith, true, 1000)});
  auto unknown = plan_unknown_until_heard(w.nodes.at("n1"));
  w.apply(unknown);
  EXPECT_EQ(w.nodes.at("n1").status, domain::NodeStatus::ready) << "liveness decides that, after its TTL of grace";
  const auto& inst = w.nodes.at("n1").plugins.at("a");
  EXPECT_FALSE(inst.healthy);
  EXPECT_TRUE(domain::health_unknown(inst)) << inst.health_description;
  EXPECT_TRUE(inst.controller_info.has_value());
  EXPECT_EQ(inst.update_time, domain::from_unix_ms(1000));
  const auto& agg = w.plugins.at("a");
  EXPECT_EQ(agg.nodes_healthy, 0);
  EXPECT_EQ(agg.controllers_healthy, 0);
  EXPECT_EQ(agg.nodes_expected, 1);
  EXPECT_TRUE(domain::health_unknown(agg.controllers.at("n1")));
  bool unhealthy_event = false;
  for (const auto& e : unknown.events) unhealthy_event |= e.type == "PluginUnhealthy";
  EXPECT_TRUE(unhealthy_event);
  // Nothing healthy left: planning it again writes nothing.
  EXPECT_TRUE(plan_unknown_until_heard(w.nodes.at("n1")).empty());

  // The agent heartbeats: what it reports stands.
  auto back = w.beat("n1", {fp("a", PluginType::monolith, true, 2000)});
  EXPECT_TRUE(w.nodes.at("n1").plugins.at("a").healthy);
  EXPECT_EQ(w.plugins.at("a").nodes_healthy, 1);
  EXPECT_EQ(w.plugins.at("a").controllers_healthy, 1);
  bool healthy_event = false;
  for (const auto& e : back.events) healthy_event |= e.type == "PluginHealthy";
  EXPECT_TRUE(healthy_event);
}

TEST(NodeReport, StageWritesOnlyWhatChanged) {
  World w;
  auto ch = w.reg("n1", {fp("a", PluginType::node)});
  Batch b;
  ch.stage(b);
  EXPECT_FALSE(b.empty());
  Batch none;
  w.beat("n1", {fp("a", PluginType::node)}).stage(none);
  EXPECT_TRUE(none.empty());
}

TEST(NodeReport, ASplitPluginsControllerAndNodeInstancesOnOneNodeAreBothKeptAndCounted) {
  World w;
  w.reg("n1", {fp("split", PluginType::controller), fp("split", PluginType::node)});
  const auto& node = w.nodes.at("n1");
  EXPECT_EQ(node.plugins.at("split").type, PluginType::node);  // the instance that mounts
  EXPECT_EQ(node.split_controllers.at("split").type, PluginType::controller);
  const auto& p = w.plugins.at("split");
  EXPECT_EQ(p.controllers.at("n1").type, PluginType::controller);
  EXPECT_EQ(p.nodes.at("n1").type, PluginType::node);
  EXPECT_EQ(p.controllers_expected, 1);
  EXPECT_EQ(p.controllers_healthy, 1);
  EXPECT_EQ(p.nodes_expected, 1);
  EXPECT_EQ(p.nodes_healthy, 1);

  // Each instance is healthy or not on its own, and says which one it is.
  auto ch = w.beat("n1", {fp("split", PluginType::node), fp("split", PluginType::controller, false)});
  EXPECT_EQ(w.plugins.at("split").controllers_healthy, 0);
  EXPECT_EQ(w.plugins.at("split").nodes_healthy, 1);
  bool named = false;
  for (const auto& e : ch.events)
    named |= e.type == "PluginUnhealthy" && e.message.find("(controller instance)") != std::string::npos;
  EXPECT_TRUE(named);
  EXPECT_TRUE(w.beat("n1", {fp("split", PluginType::node), fp("split", PluginType::controller, false)}).empty());

  // Node down: both unhealthy; purge-like removal of the id takes both.
  w.apply(plan_node_down(w.nodes.at("n1"), "missed heartbeats", domain::now()));
  EXPECT_EQ(w.plugins.at("split").nodes_healthy, 0);
  EXPECT_EQ(w.plugins.at("split").controllers_expected, 1);
  EXPECT_TRUE(w.nodes.at("n1").split_controllers.contains("split"));

  // The controller no longer reported: only the node instance stays, in both records.
  ch = w.beat("n1", {fp("split", PluginType::node)});
  EXPECT_FALSE(w.nodes.at("n1").split_controllers.contains("split"));
  EXPECT_TRUE(w.plugins.at("split").controllers.empty());
  EXPECT_EQ(w.plugins.at("split").nodes_expected, 1);
  bool deregistered = false;
  for (const auto& e : ch.events) deregistered |= e.type == "PluginDeregistered";
  EXPECT_TRUE(deregistered);

  // Nothing reported: the plugin is gone.
  w.beat("n1", {});
  EXPECT_FALSE(w.plugins.contains("split"));
  EXPECT_TRUE(w.nodes.at("n1").plugins.empty());
}

TEST(NodeReport, TwoInstancesOfOneTypeForAnIdKeepTheLastAsBefore) {
  World w;
  w.reg("n1", {fp("dup", PluginType::node, false), fp("dup", PluginType::node, true)});
  EXPECT_TRUE(w.nodes.at("n1").split_controllers.empty());
  EXPECT_TRUE(w.nodes.at("n1").plugins.at("dup").healthy);
  EXPECT_EQ(w.plugins.at("dup").nodes_expected, 1);
}

}  // namespace mooring::controlplane
