// A plugin's node instances are stored once, in each node's row (issue 46): a registration, a
// changed fingerprint or a node down writes as many bytes at 1000 nodes as at 10; each plugin's
// aggregate follows the nodes in memory (node down, deregistration, purge) and is rebuilt at load
// the same (SQLite reopened, etcd started per test); a state written before, whose plugin rows
// held every node's instance, loads as it was and has those rows rewritten.
#include <cstdio>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/nodes/node_purge.hpp"
#include "services/controlplane/nodes/node_report.hpp"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/real_backends.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {
namespace {

namespace asio = boost::asio;
using domain::PluginInstance;
using domain::PluginType;
using namespace std::chrono_literals;

PluginInstance fp(const std::string& plugin, PluginType type, bool healthy = true, std::int64_t t = 1000,
                  std::string version = "1.0") {
  PluginInstance i;
  i.plugin_id = plugin;
  i.type = type;
  i.healthy = healthy;
  i.provider = "sim.mooring.dev";
  i.version = std::move(version);
  i.requires_controller_plugin = domain::has_controller(type);
  if (domain::has_node(type)) i.node_info = domain::NodeInfo{.id = "csi-node"};
  if (domain::has_controller(type)) i.controller_info = domain::ControllerInfo{.supports_attach_detach = true};
  i.update_time = domain::from_unix_ms(t);
  return i;
}

// Each step as the agent service and node liveness commit it: planned, staged, one commit.
void commit(StateStore& store, const NodeChange& ch) {
  Batch b;
  ch.stage(b);
  auto r = store.commit(std::move(b));
  ASSERT_TRUE(r) << r.error();
}
void register_node(StateStore& store, const std::string& node, std::vector<PluginInstance> fps) {
  commit(store, plan_registration(store.node(node), NodeRegistration{.node_id = node, .address = node + ":4702"},
                                  std::move(fps), domain::now()));
}
void heartbeat(StateStore& store, const std::string& node, std::vector<PluginInstance> fps) {
  commit(store, plan_heartbeat(*store.node(node), std::move(fps), {}, domain::now()));
}
void node_down(StateStore& store, const std::string& node) {
  commit(store, plan_node_down(*store.node(node), "no heartbeat for 10s", domain::now()));
}

// Every aggregate is what domain::recount makes of its instances (counts, provider and version of
// the newest, ControllerRequired), and holds exactly the instances the node rows hold.
void expect_consistent(const StateStore& store) {
  std::size_t instances = 0;
  for (const auto& [id, p] : store.plugins()) {
    auto copy = p;
    domain::recount(copy);
    EXPECT_EQ(copy, p) << "plugin " << id;
    for (const auto* map : {&p.controllers, &p.nodes})
      for (const auto& [node_id, inst] : *map) {
        const auto* node = store.node(node_id);
        ASSERT_NE(node, nullptr) << node_id;
        const bool held = (node->plugins.contains(id) && node->plugins.at(id) == inst) ||
                          (node->split_controllers.contains(id) && node->split_controllers.at(id) == inst);
        EXPECT_TRUE(held) << "plugin " << id << " on " << node_id;
        ++instances;
      }
  }
  std::size_t stored = 0;
  for (const auto& [id, n] : store.nodes())
    for (const auto& [pid, inst] : n.plugins) stored += inst.type == PluginType::monolith ? 2 : 1;
  for (const auto& [id, n] : store.nodes()) stored += n.split_controllers.size();
  EXPECT_EQ(instances, stored);
}

std::size_t bytes(const Transaction& tx) {
  std::size_t n = 0;
  for (const auto& m : tx.mutations) n += m.key.size() + (m.value ? m.value->size() : 0);
  return n;
}

struct Written {
  std::size_t registration = 0, heartbeat = 0, down = 0, plugin_row = 0;
};

// What one registration, one changed fingerprint and one node down write once `fleet` nodes run
// the plugin (ids of one width, so only the indexes' digits differ between fleets).
Written written_with(int fleet) {
  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  EXPECT_TRUE(store.load());
  char id[16];
  for (int i = 0; i < fleet; ++i) {
    std::snprintf(id, sizeof id, "n%05d", i);
    register_node(store, id, {fp("sim", PluginType::node)});
  }
  Written w;
  register_node(store, "x-new1", {fp("sim", PluginType::node)});
  w.registration = bytes(backend.transactions.back());
  for (const auto& m : backend.transactions.back().mutations)
    if (m.table == Table::plugins) w.plugin_row = m.value->size();
  heartbeat(store, "n00003", {fp("sim", PluginType::node, false, 2000)});
  w.heartbeat = bytes(backend.transactions.back());
  node_down(store, "n00004");
  w.down = bytes(backend.transactions.back());
  EXPECT_EQ(store.plugin("sim")->nodes_expected, fleet + 1);
  EXPECT_EQ(store.plugin("sim")->nodes_healthy, fleet - 1);
  expect_consistent(store);
  return w;
}

TEST(PluginAggregates, WhatARegistrationAHeartbeatOrANodeDownWritesDoesNotGrowWithTheFleet) {
  const Written small = written_with(10), big = written_with(1000);
  std::printf(
      "bytes written at 10 / 1000 nodes: registration %zu / %zu, changed heartbeat %zu / %zu, node down "
      "%zu / %zu, the plugin's row %zu / %zu\n",
      small.registration, big.registration, small.heartbeat, big.heartbeat, small.down, big.down, small.plugin_row,
      big.plugin_row);
  // Only the indexes' digits grow (a few per row); before, each wrote ~350 bytes per node.
  EXPECT_LE(big.registration, small.registration + 40);
  EXPECT_LE(big.heartbeat, small.heartbeat + 40);
  EXPECT_LE(big.down, small.down + 40);
  EXPECT_LE(big.plugin_row, small.plugin_row + 8);
  EXPECT_LT(big.registration, 4096u);
}

// Registrations, a health flip, a node down, a split plugin losing its controller, a plugin
// deregistered from one node, then a purge: the aggregate follows each step, and a store loaded
// again from the backend (a restart, a new leader) rebuilds the same one.
void follow_and_reload(const std::function<std::unique_ptr<StateBackend>()>& open) {
  asio::io_context io;
  std::map<std::string, domain::Plugin> before;
  {
    auto backend = open();
    ASSERT_TRUE(backend);
    StateStore store{io.get_executor(), *backend};
    ASSERT_TRUE(store.load());
    register_node(store, "n1", {fp("a", PluginType::monolith), fp("b", PluginType::node)});
    register_node(store, "n2", {fp("a", PluginType::node, true, 3000, "2.0")});
    register_node(store, "n3", {fp("s", PluginType::controller), fp("s", PluginType::node)});
    ASSERT_NE(store.plugin("a"), nullptr);
    EXPECT_EQ(store.plugin("a")->version, "2.0");  // the newest instance's
    EXPECT_EQ(store.plugin("a")->nodes_healthy, 2);
    EXPECT_EQ(store.plugin("s")->controllers.at("n3").type, PluginType::controller);
    const auto created = store.plugin("a")->create_index;

    heartbeat(store, "n2", {fp("a", PluginType::node, false, 4000, "2.0")});
    EXPECT_EQ(store.plugin("a")->nodes_healthy, 1);
    node_down(store, "n1");
    EXPECT_EQ(store.plugin("a")->nodes_healthy, 0);
    EXPECT_EQ(store.plugin("a")->controllers_healthy, 0);
    EXPECT_EQ(store.plugin("a")->nodes_expected, 2);
    EXPECT_EQ(store.plugin("a")->create_index, created);
    EXPECT_EQ(store.plugin("a")->modify_index, store.index());
    heartbeat(store, "n3", {fp("s", PluginType::node)});  // the split plugin's controller is gone
    EXPECT_TRUE(store.plugin("s")->controllers.empty());
    EXPECT_FALSE(store.plugin("s")->controller_required);
    heartbeat(store, "n2", {});  // "a" deregistered from n2
    EXPECT_EQ(store.plugin("a")->nodes_expected, 1);
    EXPECT_EQ(store.plugin("a")->version, "1.0");  // n1's is the newest left
    expect_consistent(store);

    auto purge = plan_node_purge(store, "n1", PurgeRequest{.reason = "test"}, domain::now());
    ASSERT_TRUE(purge) << purge.error();
    EXPECT_EQ(purge->plugin_instances, 2u);
    ASSERT_TRUE(store.commit(std::move(purge->batch)));
    EXPECT_EQ(store.plugin("a"), nullptr);  // no instance left anywhere
    EXPECT_EQ(store.plugin("b"), nullptr);
    ASSERT_NE(store.plugin("s"), nullptr);
    register_node(store, "n4", {fp("a", PluginType::monolith, true, 5000)});
    expect_consistent(store);
    before = store.plugins();
  }
  auto backend = open();
  ASSERT_TRUE(backend);
  StateStore again{io.get_executor(), *backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.plugins(), before);
  EXPECT_EQ(again.stale_plugin_rows(), 0u);
  auto rows = backend->load();
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->rows[Table::plugins].size(), 2u);  // "a" (again) and "s"; "b" was deleted with its last instance
}

TEST(PluginAggregates, TheAggregateFollowsTheNodesAndIsRebuiltAtLoadOnSqlite) {
  test::TempDir dir{"mooring-aggr-sqlite"};
  follow_and_reload([&] { return fixtures::open_sqlite(dir.path() / "data"); });
}

TEST(PluginAggregates, TheAggregateFollowsTheNodesAndIsRebuiltAtLoadOnEtcd) {
  if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir{"mooring-aggr-etcd"};
  test::EtcdProcess etcd{dir.path() / "etcd"};
  etcd.start();
  const auto o = fixtures::etcd_options(etcd, "/aggr-test");
  follow_and_reload([&] { return fixtures::open_etcd(o); });
}

// A data dir written before: the plugin's row held every node's instance (its API form, as the
// old field table stored it), and a row of a plugin no node runs any more.
TEST(PluginAggregates, AStateWrittenTheOldWayLoadsAsItWasAndItsPluginRowsAreRewritten) {
  test::TempDir dir{"mooring-aggr-old"};
  domain::Plugin old;
  old.id = "a";
  Transaction tx{.index = 1, .mutations = {}, .tables = {Table::nodes, Table::plugins}};
  for (const auto* id : {"n1", "n2"}) {
    domain::Node n;
    n.id = id;
    n.status = domain::NodeStatus::ready;
    auto inst = fp("a", std::string(id) == "n1" ? PluginType::monolith : PluginType::node);
    inst.node_id = id;
    n.plugins["a"] = inst;
    n.create_index = n.modify_index = 1;
    domain::set_node_instances(old, id, {inst});
    tx.mutations.push_back({Table::nodes, id, domain::to_storage_text(n)});
  }
  old.create_index = old.modify_index = 1;
  domain::Plugin orphan = old;
  orphan.id = "gone";
  for (auto& [node_id, inst] : orphan.nodes) inst.plugin_id = "gone";
  tx.mutations.push_back({Table::plugins, "a", domain::to_api_json(old).dump()});
  tx.mutations.push_back({Table::plugins, "gone", domain::to_api_json(orphan).dump()});
  {
    auto backend = SqliteBackend::open(dir.path() / "data");
    ASSERT_TRUE(backend) << backend.error();
    ASSERT_TRUE((*backend)->apply(tx));
  }
  asio::io_context io;
  auto backend = SqliteBackend::open(dir.path() / "data");
  ASSERT_TRUE(backend) << backend.error();
  StateStore store{io.get_executor(), **backend};
  ASSERT_TRUE(store.load());
  EXPECT_EQ(store.stale_plugin_rows(), 2u);
  ASSERT_NE(store.plugin("a"), nullptr);
  EXPECT_EQ(*store.plugin("a"), old);
  EXPECT_EQ(store.plugin("gone"), nullptr);

  Batch upgrade;
  upgrade.rewrite_plugin_rows();
  ASSERT_TRUE(store.commit(std::move(upgrade)));
  EXPECT_EQ(store.stale_plugin_rows(), 0u);
  EXPECT_EQ(*store.plugin("a"), old);  // its content and indexes as they were
  auto rows = (*backend)->load();
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->rows[Table::plugins].size(), 1u);  // "gone" deleted
  EXPECT_EQ(nlohmann::json::parse(rows->rows[Table::plugins].at("a")),
            (nlohmann::json{{"ID", "a"}, {"CreateIndex", 1}, {"ModifyIndex", 1}}));

  StateStore again{io.get_executor(), **backend};
  ASSERT_TRUE(again.load());
  EXPECT_EQ(again.stale_plugin_rows(), 0u);
  EXPECT_EQ(again.plugins(), store.plugins());
}

}  // namespace
}  // namespace mooring::controlplane
