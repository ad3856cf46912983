// Node eligibility and drain with volume handoff, from the real binaries: an ineligible node
// takes no placement (the reason names it); a drain moves every allocation marked Migrate to
// another node, each replacement claiming its single-writer volume the moment the old claim is
// freed (no failed placement, no claim retried, never two writers: read from the plugins' call
// logs and the tasks' own start/exit records in the volume); a drain whose deadline passes stops
// the rest; bad input and a token without node:write are refused and change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using Headers = std::map<std::string, std::string>;

// Appends "start|exit <alloc> <ns>" to the volume's record: the records of all writers of one
// volume interleave in one file (the nodes' plugins share one data dir, as nodes share storage).
const std::string kRecorder =
    "rec() { echo \"$1 $MOORING_ALLOC_ID $(date +%s%N)\" >> \"$MOORING_VOLUME_DATA/writers\"; }; "
    "trap 'rec exit; exit 0' TERM; rec start; while true; do sleep 0.05; done";

json migrating(const std::string& name, const std::string& volume, const std::string& node) {
  auto a = allocation(name, volume, node, kRecorder);
  a["Migrate"] = true;
  return a;
}

std::int64_t last_ok_ms(const std::vector<PluginCall>& calls, const std::string& volume) {
  std::int64_t at = 0;
  for (const auto& c : calls)
    if (c.volume_id == volume && c.code == "OK") at = std::max(at, c.unix_ms);
  return at;
}

std::int64_t first_ok_ms(const std::vector<PluginCall>& calls, const std::string& volume) {
  std::int64_t at = 0;
  for (const auto& c : calls)
    if (c.volume_id == volume && c.code == "OK" && (at == 0 || c.unix_ms < at)) at = c.unix_ms;
  return at;
}

class Drain : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    for (auto n : {"node-1", "node-2", "node-3"}) cluster->start_node(n);
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  HttpResult put(const std::string& target, const json& body) { return cluster->request("PUT", target, body.dump()); }
  // The live replacement of `old` (MigratedFrom), or null.
  json replacement_of(const std::string& old) {
    for (const auto& a : cluster->get("/v1/allocations"))
      if (a.value("MigratedFrom", "") == old) return cluster->get("/v1/allocation/" + a.value("ID", ""));
    return nullptr;
  }
  std::unique_ptr<Cluster> cluster;
};

TEST_F(Drain, AnIneligibleNodeTakesNoPlacementAndSaysSo) {
  auto r = put("/v1/node/node-3/eligibility", {{"Eligible", false}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(cluster->get("/v1/node/node-3").value("SchedulingEligibility", ""), "ineligible");
  bool listed = false;
  for (const auto& n : cluster->get("/v1/nodes"))
    listed |= n.value("ID", "") == "node-3" && n.value("SchedulingEligibility", "") == "ineligible";
  EXPECT_TRUE(listed);
  ASSERT_FALSE(cluster->create_volume("pinned").is_null());
  auto refused = cluster->request("POST", "/v1/allocations",
                                  json{{"Allocation", allocation("pinned", "pinned", "node-3", "sleep 600")}}.dump());
  EXPECT_EQ(refused.status, 409u) << refused.body;
  EXPECT_NE(refused.body.find("node is ineligible for placement"), std::string::npos) << refused.body;
  // Unpinned work goes elsewhere; eligible again, node-3 takes it.
  ASSERT_EQ(put("/v1/node/node-3/eligibility", {{"Eligible", true}}).status, 200u);
  EXPECT_FALSE(cluster->run_alloc(allocation("pinned", "pinned", "node-3", "sleep 600")).empty());
}

TEST_F(Drain, MigratingAllocationsHandTheirVolumesToReplacementsWithNoFailedPlacementAndNoSecondWriter) {
  constexpr int kAllocs = 10;  // issue 44: a node running 10 allocations
  std::vector<std::string> olds;
  for (int i = 0; i < kAllocs; ++i) {
    const auto vol = "mig-" + std::to_string(i);
    ASSERT_FALSE(cluster->create_volume(vol).is_null());
    olds.push_back(cluster->run_alloc(migrating("mig-" + std::to_string(i), vol, "node-1")));
    ASSERT_FALSE(olds.back().empty());
  }
  for (const auto& id : olds) ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; }));

  const auto started = std::chrono::steady_clock::now();
  auto r = put("/v1/node/node-1/drain", {{"Deadline", "2m"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        for (const auto& id : olds) {
          auto rep = replacement_of(id);
          if (rep.is_null() || rep.value("ClientStatus", "") != "running") return false;
        }
        return true;
      },
      90s))
      << cluster->get("/v1/node/node-1").dump();
  const auto handed_over = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(Cluster::eventually(
      [&] { return cluster->get("/v1/node/node-1")["LastDrain"].value("Status", "") == "complete"; }, 30s))
      << cluster->get("/v1/node/node-1").dump();
  auto node = cluster->get("/v1/node/node-1");
  EXPECT_EQ(node.value("SchedulingEligibility", ""), "ineligible") << "the node stays ineligible after its drain";
  EXPECT_FALSE(node.value("Drain", true));

  const auto calls_1 = cluster->calls("node-1", "NodeUnpublishVolume");
  std::vector<std::int64_t> handoffs, freed_to_mounted;
  for (int i = 0; i < kAllocs; ++i) {
    const auto vol = "mig-" + std::to_string(i);
    auto rep = replacement_of(olds[i]);
    const auto to = rep.value("NodeID", "");
    EXPECT_NE(to, "node-1") << "replacement on the drained node";
    EXPECT_EQ(cluster->alloc_status(olds[i]), "complete");
    // No failed placement and no claim the control plane refused while the old one held it.
    for (const auto& e : rep["Events"]) {
      EXPECT_NE(e.value("Type", ""), "ClaimWaiting") << vol << ": " << e.dump();
      EXPECT_EQ(e.value("Message", "").find("failed"), std::string::npos) << vol << ": " << e.dump();
    }
    // Mounts: the new node publishes only after the old node's unpublish succeeded.
    const auto csi_id = cluster->volume(vol).value("ExternalID", "");  // the plugin's calls name it so
    const auto unpublished = last_ok_ms(calls_1, csi_id);
    const auto published = first_ok_ms(cluster->calls(to, "NodePublishVolume"), csi_id);
    ASSERT_GT(unpublished, 0) << vol;
    ASSERT_GT(published, 0) << vol;
    EXPECT_GE(published, unpublished) << vol << ": two nodes had it mounted";
    handoffs.push_back(published - unpublished);
    // The figure: old claim freed (its ControllerUnpublish answered) -> the new mount.
    std::int64_t detached = 0;
    for (auto n : {"node-1", "node-2", "node-3"})
      detached = std::max(detached, last_ok_ms(cluster->calls(n, "ControllerUnpublishVolume"), csi_id));
    if (detached > 0) freed_to_mounted.push_back(published - detached);
  }
  std::sort(handoffs.begin(), handoffs.end());
  std::sort(freed_to_mounted.begin(), freed_to_mounted.end());
  ASSERT_FALSE(freed_to_mounted.empty()) << "the plugin attaches: its ControllerUnpublish frees the claim";
  std::cout << "drain of " << kAllocs << " migrating allocations: every replacement running after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(handed_over).count()
            << " ms; old unpublish -> new publish p50 " << handoffs[handoffs.size() / 2] << " ms, max "
            << handoffs.back() << " ms; old ControllerUnpublish -> new NodePublish p50 "
            << freed_to_mounted[freed_to_mounted.size() / 2] << " ms, max " << freed_to_mounted.back() << " ms\n";

  // Writers per volume, from the tasks' own records: each starts after the previous one exited.
  std::size_t handed = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(cluster->dir() / "hostpath", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename() != "writers") continue;
    std::ifstream in(it->path());
    std::string running, line;
    std::set<std::string> writers;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string what, alloc;
      fields >> what >> alloc;
      writers.insert(alloc);
      if (what == "start") {
        EXPECT_TRUE(running.empty()) << it->path() << ": " << alloc << " started while " << running << " ran";
        running = alloc;
      } else if (what == "exit") {
        EXPECT_EQ(running, alloc) << it->path();
        running.clear();
      }
    }
    if (writers.size() == 2) ++handed;
  }
  EXPECT_EQ(handed, static_cast<std::size_t>(kAllocs)) << "volumes written by an old task and its replacement";

  // The event stream tells the story.
  std::set<std::string> types;
  for (const auto& e : cluster->get("/v1/events")) types.insert(e.value("Type", ""));
  for (auto t : {"NodeDrainStarted", "AllocationMigrated", "NodeDrainComplete"}) EXPECT_TRUE(types.contains(t)) << t;
}

TEST_F(Drain, PastTheDeadlineTheAllocationsThatDoNotMigrateAreStopped) {
  ASSERT_FALSE(cluster->create_volume("stay").is_null());
  const auto id = cluster->run_alloc(allocation("stay", "stay", "node-2", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; }));
  auto r = put("/v1/node/node-2/drain", {{"Deadline", 3}});  // seconds
  ASSERT_EQ(r.status, 200u) << r.body;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(cluster->alloc_status(id), "running") << "it has until the deadline";
  auto drain = cluster->get("/v1/node/node-2")["LastDrain"];
  EXPECT_EQ(drain.value("Status", ""), "draining") << drain.dump();
  EXPECT_NE(drain.value("Message", "").find("runs until the deadline"), std::string::npos) << drain.dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "complete"; }, 30s));
  EXPECT_TRUE(Cluster::eventually(
      [&] { return cluster->get("/v1/node/node-2")["LastDrain"].value("Status", "") == "complete"; }, 30s));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("stay") == 0; }, 30s)) << "released in order";
  for (const auto& a : cluster->get("/v1/allocations")) EXPECT_NE(a.value("MigratedFrom", ""), id) << "not migrated";
}

TEST_F(Drain, BadInputIsRefusedNamingTheNodeAndChangesNothing) {
  auto unknown = put("/v1/node/nope/drain", json::object());
  EXPECT_EQ(unknown.status, 404u) << unknown.body;
  EXPECT_NE(unknown.body.find("node not found: nope"), std::string::npos) << unknown.body;
  EXPECT_EQ(put("/v1/node/nope/eligibility", {{"Eligible", false}}).status, 404u);
  for (const json& bad : {json{{"Deadline", "soon"}}, json{{"Deadline", -5}}, json{{"Deadline", true}},
                          json{{"Dedline", "5m"}}, json{{"Disable", "yes"}}}) {
    auto r = put("/v1/node/node-1/drain", bad);
    EXPECT_EQ(r.status, 400u) << bad.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find("drain of node \\\"node-1\\\""), std::string::npos) << r.body;
  }
  auto no_flag = put("/v1/node/node-1/eligibility", json::object());
  EXPECT_EQ(no_flag.status, 400u) << no_flag.body;
  EXPECT_EQ(put("/v1/node/node-1/drain", {{"Disable", true}}).status, 409u) << "not draining";
  auto node = cluster->get("/v1/node/node-1");
  EXPECT_EQ(node.value("SchedulingEligibility", ""), "eligible") << node.dump();
  EXPECT_TRUE(node["DrainStrategy"].is_null()) << node.dump();
}

TEST(DrainAcl, ATokenWithoutNodeWriteIsRefusedNamingItAndChangesNothing) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster(ClusterOptions{.acl = true});
  cluster.start_controlplane();
  const auto management = cluster.bootstrap_acl();
  ASSERT_FALSE(management.empty());
  cluster.start_node("node-1");
  const auto reader = cluster.client_token("node-reader", {{"Node", "read"}});
  for (const auto& [target, body] :
       std::vector<std::pair<std::string, json>>{{"/v1/node/node-1/drain", json{{"Deadline", "1m"}}},
                                                 {"/v1/node/node-1/eligibility", json{{"Eligible", false}}}}) {
    auto r = cluster.request("PUT", target, body.dump(), Headers{{"X-Mooring-Token", reader}});
    EXPECT_EQ(r.status, 403u) << target << ": " << r.body;
    EXPECT_NE(r.body.find("node:write"), std::string::npos) << r.body;
  }
  cluster.use_token(management);
  auto node = cluster.get("/v1/node/node-1");
  EXPECT_EQ(node.value("SchedulingEligibility", ""), "eligible") << node.dump();
  EXPECT_TRUE(node["DrainStrategy"].is_null()) << node.dump();
  EXPECT_EQ(cluster.request("PUT", "/v1/node/node-1/eligibility", json{{"Eligible", false}}.dump()).status, 200u);
}

}  // namespace
}  // namespace mooring::e2e
