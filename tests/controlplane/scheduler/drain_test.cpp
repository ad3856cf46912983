// Node drain: the order rule (migrating workloads first, the rest at the deadline, system copies
// after the other workloads, plugin allocations last and only once no claim of their plugin is
// left on the node), the drainer's step over a store (a migration is a stop and a placed
// replacement in one commit, never on the draining node), eligibility and drain requests, and
// placement refusing an ineligible node by name.
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/claims/claim_plan.hpp"
#include "services/controlplane/nodes/node_drain.hpp"
#include "services/controlplane/scheduler/drain_rules.hpp"
#include "services/controlplane/scheduler/drainer.hpp"
#include "services/controlplane/scheduler/placement.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane::scheduler {
namespace {

using namespace std::chrono_literals;

domain::Allocation workload(const std::string& id, bool migrate = false) {
  auto a = fixtures::allocation(id, "n-1");
  a.client_status = domain::ClientStatus::running;
  a.migrate = migrate;
  a.task = domain::Task{.command = "/bin/sleep", .args = {"600"}};
  return a;
}

domain::Allocation plugin_alloc(const std::string& id, const std::string& plugin = "hostpath") {
  auto a = workload(id);
  a.task->csi_plugin = domain::TaskCSIPlugin{.id = plugin};
  return a;
}

struct Rules : ::testing::Test {
  domain::Time t0 = domain::now();
  domain::DrainStrategy strategy{.deadline = 10min, .started = t0, .force_deadline = t0 + 10min};

  DrainStep step(const std::vector<domain::Allocation>& allocs, std::map<std::string, int> claims = {},
                 domain::Time at = {}) {
    DrainInput in{
        .strategy = strategy, .now = domain::is_set(at) ? at : t0, .allocations = {}, .claims_by_plugin = claims};
    for (const auto& a : allocs) in.allocations.push_back(&a);
    return plan_drain_step(in);
  }
  static std::vector<std::string> ids(const DrainStep& s) {
    std::vector<std::string> out;
    for (const auto& d : s.decisions)
      out.push_back(d.alloc_id + (d.action == DrainAction::migrate ? ":migrate" : ":stop"));
    return out;
  }
};

TEST_F(Rules, MigratingWorkloadsMoveAtOnceOthersWaitForTheDeadlineAndPluginsForTheWorkloads) {
  std::vector<domain::Allocation> allocs{workload("a", true), workload("b"), plugin_alloc("p")};
  auto s = step(allocs, {{"hostpath", 2}});
  EXPECT_EQ(ids(s), (std::vector<std::string>{"a:migrate"}));
  EXPECT_EQ(s.left, 3);
  EXPECT_FALSE(s.complete);
  EXPECT_NE(s.waiting.find("runs until the deadline"), std::string::npos) << s.waiting;
}

TEST_F(Rules, PastTheDeadlineTheRestStopsButPluginsStillWaitForTheUnmountsTheyServe) {
  std::vector<domain::Allocation> allocs{workload("a", true), workload("b"), plugin_alloc("p")};
  auto s = step(allocs, {{"hostpath", 2}}, t0 + 11min);
  EXPECT_EQ(ids(s), (std::vector<std::string>{"a:migrate", "b:stop"}));
  EXPECT_NE(s.waiting.find("plugin allocation \"p\" waits for the node's workloads"), std::string::npos) << s.waiting;
}

TEST_F(Rules, StoppingWorkloadsStillHoldThePluginAndCountAsLeft) {
  auto stopping = workload("a");
  stopping.desired_status = domain::DesiredStatus::stop;
  std::vector<domain::Allocation> allocs{stopping, plugin_alloc("p")};
  auto s = step(allocs, {}, t0 + 11min);
  EXPECT_TRUE(s.decisions.empty());
  EXPECT_EQ(s.left, 2);
}

TEST_F(Rules, APluginStopsOnlyOnceNoClaimOfItsPluginIsLeftOnTheNode) {
  std::vector<domain::Allocation> allocs{plugin_alloc("p1", "one"), plugin_alloc("p2", "two")};
  auto s = step(allocs, {{"two", 1}}, t0 + 11min);  // past the deadline too: the claim comes first
  EXPECT_EQ(ids(s), (std::vector<std::string>{"p1:stop"}));
  EXPECT_NE(s.waiting.find("waits for 1 claim(s) of plugin \"two\""), std::string::npos) << s.waiting;
  EXPECT_EQ(ids(step(allocs, {})), (std::vector<std::string>{"p1:stop", "p2:stop"}));
}

TEST_F(Rules, SystemCopiesGoAfterTheOtherWorkloadsOrStayWithIgnoreSystemJobs) {
  auto copy = workload("sys");
  copy.system_id = "group";
  std::vector<domain::Allocation> allocs{workload("a", true), copy};
  EXPECT_EQ(ids(step(allocs)), (std::vector<std::string>{"a:migrate"}));
  std::vector<domain::Allocation> only_copy{copy};
  EXPECT_EQ(ids(step(only_copy)), (std::vector<std::string>{"sys:stop"}));
  strategy.ignore_system_jobs = true;
  auto s = step(only_copy);
  EXPECT_TRUE(s.decisions.empty());
  EXPECT_TRUE(s.complete) << "a kept copy is not waited for";
}

TEST_F(Rules, TerminalAllocationsAreDoneAndNothingLeftCompletesTheDrain) {
  auto done = workload("a");
  done.client_status = domain::ClientStatus::complete;
  std::vector<domain::Allocation> allocs{done};
  auto s = step(allocs);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.left, 0);
}

TEST_F(Rules, AReplacementKeepsNameIndexVolumesAndTaskButNoNode) {
  auto old = workload("old", true);
  old.index = 3;
  old.volumes["data"] = domain::VolumeRequest{.name = "data", .source = "v", .per_alloc = true};
  auto r = migration_replacement(old, "new", t0);
  EXPECT_EQ(r.id, "new");
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.volumes, old.volumes);
  EXPECT_EQ(r.task, old.task);
  EXPECT_TRUE(r.node_id.empty());
  EXPECT_EQ(r.migrated_from, "old");
  EXPECT_TRUE(r.migrate);
}

// ---- over a store ----

class DrainStore : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store.load());
    auto p = fixtures::plugin("hostpath", "n-1", true);
    domain::upsert_instance(p, fixtures::plugin("hostpath", "n-2", true).nodes.at("n-2"));
    auto v = fixtures::volume("v");
    v.claims["old"] = fixtures::claim("old", "n-1", domain::ClaimState::taken);
    v.access_mode = domain::AccessMode::single_node_writer;
    v.attachment_mode = domain::AttachmentMode::file_system;
    auto old = workload("old", true);
    old.volumes["data"] = domain::VolumeRequest{.name = "data",
                                                .source = "v",
                                                .access_mode = domain::AccessMode::single_node_writer,
                                                .attachment_mode = domain::AttachmentMode::file_system};
    Batch b;
    b.put(fixtures::ready_node(p, "n-1"));  // the plugin's aggregate follows the nodes' instances
    b.put(fixtures::ready_node(p, "n-2"));
    b.put(v);
    b.put(old);
    ASSERT_TRUE(store.commit(std::move(b)));
  }
  void commit(domain::Expected<Batch> b) {
    ASSERT_TRUE(b) << b.error();
    ASSERT_TRUE(store.commit(std::move(*b)));
  }

  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  Drainer drainer{io.get_executor(), store};
};

TEST_F(DrainStore, AMigrationStopsTheOldAndPlacesItsReplacementOnAnotherNodeInOneCommit) {
  commit(plan_drain(store, "n-1", DrainRequest{.deadline = 10min}, domain::now()));
  EXPECT_FALSE(store.node("n-1")->eligible);
  drainer.pass(domain::now());
  EXPECT_EQ(store.allocation("old")->desired_status, domain::DesiredStatus::stop);
  const domain::Allocation* replacement = nullptr;
  for (const auto& [id, a] : store.allocations())
    if (a.migrated_from == "old") replacement = &a;
  ASSERT_NE(replacement, nullptr);
  EXPECT_EQ(replacement->node_id, "n-2");
  const auto& drain = *store.node("n-1")->last_drain;
  EXPECT_EQ(drain.status, "draining");
  EXPECT_EQ(drain.allocations_left, 1);
}

TEST_F(DrainStore, TheReplacementsClaimWaitsForTheOldReleaseInsteadOfFailing) {
  auto replacement = migration_replacement(*store.allocation("old"), "new", domain::now());
  replacement.node_id = "n-2";
  auto old = *store.allocation("old");
  old.desired_status = domain::DesiredStatus::stop;
  Batch b;
  b.put(replacement);
  b.put(old);
  ASSERT_TRUE(store.commit(std::move(b)));
  const ClaimInput input{.volume_key = "v",
                         .allocation_id = "new",
                         .node_id = "n-2",
                         .mode = domain::ClaimMode::write,
                         .access_mode = domain::AccessMode::single_node_writer,
                         .attachment_mode = domain::AttachmentMode::file_system};
  auto leaving = [this](const std::string& id) { return is_leaving(store.allocation(id)); };
  EXPECT_TRUE(waits_for_release(input, *store.volume("v"), leaving, domain::now()));
  // A claim held by a running allocation is a real conflict: no wait.
  EXPECT_FALSE(waits_for_release(
      input, *store.volume("v"), [](const std::string&) { return false; }, domain::now()));
}

TEST_F(DrainStore, TheDrainCompletesWhenNothingIsLeftAndTheNodeStaysIneligible) {
  commit(plan_drain(store, "n-1", DrainRequest{.deadline = 0ms}, domain::now()));
  drainer.pass(domain::now());
  auto old = *store.allocation("old");
  old.client_status = domain::ClientStatus::complete;
  Batch b;
  b.put(old);
  ASSERT_TRUE(store.commit(std::move(b)));
  drainer.pass(domain::now());
  const auto* n = store.node("n-1");
  EXPECT_FALSE(n->drain);
  EXPECT_FALSE(n->eligible);
  EXPECT_EQ(n->last_drain->status, "complete");
}

TEST_F(DrainStore, EligibilityIsRefusedWhileDrainingAndPlacementNamesTheIneligibleNode) {
  commit(plan_eligibility(store, "n-2", false, domain::now()));
  auto a = fixtures::allocation("x", "n-2");
  auto placed = place(a, cluster_view(store));
  ASSERT_FALSE(placed.node_id);
  EXPECT_NE(placed.message(a).find("node \"n-2\": node is ineligible for placement"), std::string::npos)
      << placed.message(a);
  commit(plan_drain(store, "n-1", DrainRequest{}, domain::now()));
  auto refused = plan_eligibility(store, "n-1", true, domain::now());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("is draining"), std::string::npos) << refused.error();
  EXPECT_FALSE(plan_drain(store, "nope", DrainRequest{}, domain::now()));
  commit(plan_drain(store, "n-1", DrainRequest{.enable = false, .mark_eligible = true}, domain::now()));
  EXPECT_TRUE(store.node("n-1")->eligible);
  EXPECT_EQ(store.node("n-1")->last_drain->status, "canceled");
}

}  // namespace
}  // namespace mooring::controlplane::scheduler
