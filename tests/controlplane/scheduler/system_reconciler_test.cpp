// The system reconciler: one live copy per eligible node (selector, readiness), nodes that join
// get theirs, ended copies are replaced after a per-node backoff that survives a restart, copies
// stopped on purpose stay stopped; and the rolling update of a plugin group, step by step.
#include "services/controlplane/scheduler/system_reconciler.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/scheduler/system_placement.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::scheduler {
namespace {

using namespace std::chrono_literals;
using domain::ClientStatus;

domain::Node node(const std::string& id, const std::string& name, domain::NodeStatus status = domain::NodeStatus::ready) {
  domain::Node n;
  n.id = id;
  n.name = name;
  n.address = "127.0.0.1:1";
  n.status = status;
  return n;
}

domain::Allocation group(const std::string& id, std::map<std::string, std::string> selector = {}) {
  domain::Allocation g;
  g.id = id;
  g.name = "sys";
  g.system = true;
  g.node_selector = std::move(selector);
  g.task = domain::Task{.command = "/bin/sleep", .args = {"600"}};
  return g;
}

class SystemReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }

  void put(auto... objects) {
    Batch b;
    (b.put(objects), ...);
    ASSERT_TRUE(store.commit(std::move(b)));
  }

  // node id -> the group's live copy there
  std::map<std::string, const domain::Allocation*> live(const std::string& group_id) {
    std::map<std::string, const domain::Allocation*> out;
    for (const auto& id : store.allocation_ids_in_group(group_id)) {
      const auto* c = store.allocation(id);
      if (is_live_copy(*c)) {
        EXPECT_FALSE(out.contains(c->node_id)) << "two live copies on " << c->node_id;
        out[c->node_id] = c;
      }
    }
    return out;
  }

  void set_status(const std::string& alloc_id, ClientStatus status) {
    auto a = *store.allocation(alloc_id);
    a.client_status = status;
    put(a);
  }

  boost::asio::io_context io;
  FakeBackend backend;
  ChangeFeed feed{backend};
  StateStore store{io.get_executor(), feed};
  SystemReconciler reconciler{io.get_executor(), store, feed};
  domain::Time t0 = domain::now();
};

TEST(SystemPlacementTest, NodeSelectorGlobsNameAndIdAndMatchesAttributesExactly) {
  auto n = node("n-1", "worker-a");
  n.attributes["zone"] = "eu-1";
  EXPECT_TRUE(selector_matches({}, n));
  EXPECT_TRUE(selector_matches({{"name", "worker-*"}}, n));
  EXPECT_FALSE(selector_matches({{"name", "db-*"}}, n));
  EXPECT_TRUE(selector_matches({{"id", "n-?"}}, n));
  EXPECT_TRUE(selector_matches({{"zone", "eu-1"}, {"name", "worker-[ab]"}}, n));
  EXPECT_FALSE(selector_matches({{"zone", "eu-*"}}, n));  // attributes match exactly
  EXPECT_FALSE(selector_matches({{"rack", "r1"}}, n));
  EXPECT_FALSE(system_eligible(group("g", {}), node("n-2", "x", domain::NodeStatus::down)));
  EXPECT_TRUE(check_node_selector({{"name", ""}}).has_value());
}

TEST_F(SystemReconcilerTest, PlacesOneCopyOnEveryReadyMatchingNodeOnly) {
  put(node("n1", "worker-1"), node("n2", "worker-2"), node("n3", "db-1"),
      node("n4", "worker-4", domain::NodeStatus::down), group("g", {{"name", "worker-*"}}));
  reconciler.follow("g");
  reconciler.reconcile(t0);
  auto copies = live("g");
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_TRUE(copies.contains("n1") && copies.contains("n2"));
  EXPECT_EQ(copies["n1"]->system_id, "g");
  EXPECT_EQ(copies["n1"]->task, store.allocation("g")->task);
  EXPECT_FALSE(copies["n1"]->system);
  // A second pass changes nothing (no duplicate copies, no write).
  auto index = store.index();
  reconciler.reconcile(t0 + 1s);
  EXPECT_EQ(store.index(), index);
}

TEST_F(SystemReconcilerTest, ZeroNodesIsFineAndANodeThatJoinsOrBecomesReadyGetsItsCopy) {
  put(group("g"));
  reconciler.follow("g");
  reconciler.reconcile(t0);
  EXPECT_TRUE(live("g").empty());
  put(node("n1", "a", domain::NodeStatus::initializing));
  reconciler.reconcile(t0);
  EXPECT_TRUE(live("g").empty());
  put(node("n1", "a"));
  reconciler.reconcile(t0);
  EXPECT_EQ(live("g").size(), 1u);
  put(node("n2", "b"));
  reconciler.reconcile(t0);
  EXPECT_EQ(live("g").size(), 2u);
}

TEST_F(SystemReconcilerTest, StartFollowsGroupsFromTheStateAndTheChangeFeedFollowsNewOnes) {
  put(node("n1", "a"), group("g1"));
  reconciler.start();
  EXPECT_EQ(reconciler.followed(), 1u);
  put(group("g2"));
  reconciler.reconcile(t0);  // takes the change feed's keys first
  EXPECT_EQ(reconciler.followed(), 2u);
  EXPECT_EQ(live("g2").size(), 1u);
  io.run_for(10ms);
  auto stopped = boost::asio::co_spawn(io, reconciler.stop(), boost::asio::use_future);
  io.run_for(200ms);
  stopped.get();
}

TEST_F(SystemReconcilerTest, AFailedCopyIsReplacedOnItsNodeWithADoublingBackoffKeptInTheGroup) {
  put(node("n1", "a"), group("g"));
  reconciler.follow("g");
  reconciler.reconcile(t0);
  auto first = live("g").at("n1")->id;
  set_status(first, ClientStatus::failed);

  auto next = reconciler.reconcile(t0 + 10s);
  EXPECT_TRUE(live("g").empty());
  auto st = store.allocation("g")->system_nodes.at("n1");
  EXPECT_EQ(st.backoff, 1s);
  EXPECT_EQ(st.next_restart, t0 + 11s);
  EXPECT_EQ(next, t0 + 11s);
  reconciler.reconcile(t0 + 10500ms);
  EXPECT_TRUE(live("g").empty());  // not before the backoff
  reconciler.reconcile(t0 + 11s);
  ASSERT_EQ(live("g").size(), 1u);
  auto second = live("g").at("n1")->id;
  EXPECT_NE(second, first);
  EXPECT_EQ(store.allocation("g")->system_nodes.at("n1").restarts, 1);

  // It fails again soon: 2 s. Then a copy that ran 5 minutes resets the backoff to 1 s.
  set_status(second, ClientStatus::failed);
  reconciler.reconcile(t0 + 12s);
  EXPECT_EQ(store.allocation("g")->system_nodes.at("n1").backoff, 2s);
  reconciler.reconcile(t0 + 14s);
  auto third = live("g").at("n1")->id;
  set_status(third, ClientStatus::failed);
  reconciler.reconcile(t0 + 14s + 5min);
  EXPECT_EQ(store.allocation("g")->system_nodes.at("n1").backoff, 1s);

  // The backoff is durable: a new reconciler (a restarted control plane) keeps the deadline.
  auto before = store.allocation("g")->system_nodes.at("n1");
  StateStore reloaded{io.get_executor(), backend};
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.allocation("g")->system_nodes.at("n1"), before);
}

TEST_F(SystemReconcilerTest, BackoffIsCappedAtSixtySeconds) {
  put(node("n1", "a"), group("g"));
  reconciler.follow("g");
  auto t = t0;
  reconciler.reconcile(t);
  for (int i = 0; i < 9; ++i) {
    set_status(live("g").at("n1")->id, ClientStatus::failed);
    reconciler.reconcile(t);
    t = store.allocation("g")->system_nodes.at("n1").next_restart;
    reconciler.reconcile(t);
  }
  EXPECT_EQ(store.allocation("g")->system_nodes.at("n1").backoff, 60s);
  EXPECT_EQ(store.allocation("g")->system_nodes.at("n1").restarts, 9);
}

TEST_F(SystemReconcilerTest, AStoppedGroupIsNoLongerFollowed) {
  put(node("n1", "a"), group("g"));
  reconciler.follow("g");
  reconciler.reconcile(t0);
  auto g = *store.allocation("g");
  g.desired_status = domain::DesiredStatus::stop;
  put(g);
  reconciler.reconcile(t0);
  EXPECT_EQ(reconciler.followed(), 0u);
}

TEST_F(SystemReconcilerTest, ACopyStoppedOnPurposeIsNotReplaced) {
  put(node("n1", "a"), group("g"));
  reconciler.follow("g");
  reconciler.reconcile(t0);
  // What the stop endpoint writes for a copy: the copy stopped, the node marked in the group.
  auto copy = *live("g").at("n1");
  copy.desired_status = domain::DesiredStatus::stop;
  copy.client_status = ClientStatus::complete;
  auto g = *store.allocation("g");
  g.system_nodes["n1"].stopped = true;
  put(copy, g);
  reconciler.reconcile(t0 + 1h);
  EXPECT_TRUE(live("g").empty());
}

// ---- rolling updates ----

class RolloutTest : public SystemReconcilerTest {
 protected:
  void SetUp() override {
    SystemReconcilerTest::SetUp();
    auto g = group("g");
    g.task->command = "mooring-hostpath";
    g.task->csi_plugin = domain::TaskCSIPlugin{.id = "hostpath", .type = domain::PluginType::node,
                                               .health_timeout = domain::Duration(30s)};
    put(node("n1", "a"), node("n2", "b"), g);
    reconciler.follow("g");
    reconciler.reconcile(t0);
    for (auto& [n, c] : live("g")) {
      old[n] = c->id;
      set_status(c->id, ClientStatus::running);
      fingerprint(n, c->id, true);
    }
    // What PUT /v1/allocation/g writes: the new task and a rollout over the nodes with a copy.
    g = *store.allocation("g");
    g.task->args = {"--version=2"};
    g.rollout = domain::Rollout{.version = 1, .status = "running",
                                .nodes = {{.node_id = "n1", .old_alloc_id = old["n1"]},
                                          {.node_id = "n2", .old_alloc_id = old["n2"]}}};
    put(g);
  }

  void fingerprint(const std::string& node_id, const std::string& alloc_id, bool healthy) {
    domain::Plugin p = store.plugin("hostpath") ? *store.plugin("hostpath") : domain::Plugin{.id = "hostpath"};
    domain::PluginInstance i;
    i.plugin_id = "hostpath";
    i.node_id = node_id;
    i.type = domain::PluginType::node;
    i.healthy = healthy;
    i.node_info = domain::NodeInfo{};
    i.alloc_id = alloc_id;
    domain::upsert_instance(p, i);
    Batch b;
    fixtures::put_running(b, {p}, &store);
    ASSERT_TRUE(store.commit(std::move(b)));
  }

  const domain::RolloutNode& at(const std::string& node_id) {
    for (const auto& n : store.allocation("g")->rollout->nodes)
      if (n.node_id == node_id) return n;
    throw std::runtime_error("no rollout node " + node_id);
  }

  std::map<std::string, std::string> old;
};

TEST_F(RolloutTest, NewCopyStartsBesideTheOldWhichStopsOnlyOnceTheFingerprintShowsItHealthy) {
  reconciler.reconcile(t0);
  EXPECT_EQ(at("n1").state, "starting");
  EXPECT_EQ(at("n2").state, "pending");  // one node at a time
  auto fresh = at("n1").new_alloc_id;
  ASSERT_TRUE(store.allocation(fresh));
  EXPECT_EQ(store.allocation(fresh)->task->args, std::vector<std::string>{"--version=2"});
  EXPECT_EQ(store.allocation(fresh)->node_id, "n1");
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n1"])));  // both run

  // Running, but the node's instance is still the old copy's: wait.
  set_status(fresh, ClientStatus::running);
  reconciler.reconcile(t0 + 1s);
  EXPECT_EQ(at("n1").state, "starting");
  fingerprint("n1", fresh, false);  // the new instance, not healthy yet
  reconciler.reconcile(t0 + 2s);
  EXPECT_EQ(at("n1").state, "starting");
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n1"])));

  fingerprint("n1", fresh, true);
  reconciler.reconcile(t0 + 3s);
  EXPECT_EQ(at("n1").state, "healthy");
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n1"])));
  reconciler.reconcile(t0 + 3s);
  EXPECT_EQ(at("n1").state, "done");
  EXPECT_EQ(store.allocation(old["n1"])->desired_status, domain::DesiredStatus::stop);
  EXPECT_EQ(at("n2").state, "pending");
  reconciler.reconcile(t0 + 3s);
  EXPECT_EQ(at("n2").state, "starting");

  auto fresh2 = at("n2").new_alloc_id;
  set_status(fresh2, ClientStatus::running);
  fingerprint("n2", fresh2, true);
  reconciler.reconcile(t0 + 4s);
  reconciler.reconcile(t0 + 4s);
  reconciler.reconcile(t0 + 4s);
  EXPECT_EQ(at("n2").state, "done");
  EXPECT_EQ(store.allocation("g")->rollout->status, "done");
  EXPECT_EQ(live("g").at("n1")->id, fresh);
  EXPECT_EQ(live("g").at("n2")->id, fresh2);
}

TEST_F(RolloutTest, ANewCopyThatFailsStopsTheRolloutAndKeepsTheOldServing) {
  reconciler.reconcile(t0);
  auto fresh = at("n1").new_alloc_id;
  set_status(fresh, ClientStatus::failed);
  reconciler.reconcile(t0 + 1s);
  EXPECT_EQ(at("n1").state, "failed");
  EXPECT_NE(at("n1").message.find("old copy keeps serving"), std::string::npos);
  EXPECT_EQ(store.allocation("g")->rollout->status, "failed");
  EXPECT_EQ(at("n2").state, "pending");
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n1"])));
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n2"])));
  // The group places the old task again (a node that joins gets what serves).
  EXPECT_EQ(store.allocation("g")->task->args, std::vector<std::string>{"600"});
  // The failed new copy is not "replaced": the node has its live (old) copy.
  reconciler.reconcile(t0 + 1min);
  EXPECT_EQ(live("g").at("n1")->id, old["n1"]);
}

TEST_F(RolloutTest, ANewCopyNotHealthyWithinHealthTimeoutPlusTenSecondsIsStopped) {
  reconciler.reconcile(t0);
  auto fresh = at("n1").new_alloc_id;
  set_status(fresh, ClientStatus::running);
  auto next = reconciler.reconcile(t0 + 39s);
  EXPECT_EQ(at("n1").state, "starting");
  EXPECT_EQ(next, t0 + 40s);
  reconciler.reconcile(t0 + 40s);
  EXPECT_EQ(at("n1").state, "failed");
  EXPECT_EQ(store.allocation(fresh)->desired_status, domain::DesiredStatus::stop);
  EXPECT_TRUE(is_live_copy(*store.allocation(old["n1"])));
}

TEST_F(RolloutTest, ARestartedControlPlaneResumesTheRolloutFromTheState) {
  reconciler.reconcile(t0);
  auto fresh = at("n1").new_alloc_id;
  set_status(fresh, ClientStatus::running);
  fingerprint("n1", fresh, true);
  // A new store and reconciler over the same backend: what a restart sees.
  ChangeFeed feed2{backend};
  StateStore store2{io.get_executor(), feed2};
  ASSERT_TRUE(store2.load());
  SystemReconciler again{io.get_executor(), store2, feed2};
  again.start();
  EXPECT_EQ(again.followed(), 1u);
  again.reconcile(t0 + 1s);  // healthy
  again.reconcile(t0 + 1s);  // the old copy stopped
  again.reconcile(t0 + 1s);  // the next node
  const auto& n1 = store2.allocation("g")->rollout->nodes.at(0);
  EXPECT_EQ(n1.state, "done");
  EXPECT_EQ(store2.allocation(old["n1"])->desired_status, domain::DesiredStatus::stop);
  EXPECT_EQ(store2.allocation("g")->rollout->nodes.at(1).state, "starting");
  auto stopped = boost::asio::co_spawn(io, again.stop(), boost::asio::use_future);
  io.run_for(200ms);
  stopped.get();
}

TEST_F(RolloutTest, ASinglePluginAllocationIsStoppedOnceItsReplacementIsHealthy) {
  // What PUT writes for a single allocation: the replacement beside it, the rollout on the old one.
  auto single = fixtures::allocation("old", "n1");
  single.task = store.allocation("g")->task;
  single.client_status = ClientStatus::running;
  auto fresh = fixtures::allocation("new", "n1");
  fresh.task = single.task;
  single.rollout = domain::Rollout{.version = 1, .status = "running",
                                   .nodes = {{.node_id = "n1", .state = "starting", .old_alloc_id = "old",
                                              .new_alloc_id = "new", .started = t0}}};
  put(single, fresh);
  reconciler.follow("old");
  reconciler.reconcile(t0 + 1s);
  EXPECT_EQ(store.allocation("old")->rollout->nodes[0].state, "starting");
  set_status("new", ClientStatus::running);
  fingerprint("n1", "new", true);
  reconciler.reconcile(t0 + 2s);
  EXPECT_EQ(store.allocation("old")->desired_status, domain::DesiredStatus::run);
  reconciler.reconcile(t0 + 2s);
  EXPECT_EQ(store.allocation("old")->desired_status, domain::DesiredStatus::stop);
  reconciler.reconcile(t0 + 2s);
  EXPECT_EQ(store.allocation("old")->rollout->status, "done");
  EXPECT_TRUE(is_live_copy(*store.allocation("new")));
  reconciler.reconcile(t0 + 3s);
  EXPECT_EQ(reconciler.followed(), 1u);  // the group only: the single allocation's rollout is over
}

}  // namespace
}  // namespace mooring::controlplane::scheduler
