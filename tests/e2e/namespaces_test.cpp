// Namespaces end to end with the real binaries: one volume id in two namespaces is two volumes
// (two CSI creates, two claims, two staging and publish paths on the same node), each allocation
// mounts the volume of its own namespace, and releasing one leaves the other mounted. Namespaces
// as objects: a write into one that does not exist never reaches the plugin; each quota refuses
// the write past it (no CreateVolume for a create refused up front); racing creates never both
// take the last slot (a loser whose volume the plugin made has it deleted again), on SQLite and on
// etcd through two members; delete waits
// until the namespace is empty; namespaces in use before they were objects get their records
// when the control plane starts. Root only.
#include <future>

#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/e2e/ha_cluster.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

json create_body(const std::string& id) {
  return {{"Volumes",
           {{{"ID", id},
             {"PluginID", "hostpath"},
             {"RequestedCapacityMin", 10 << 20},
             {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
}

std::string error_of(const HttpResult& r) {
  auto j = json::parse(r.body, nullptr, false);
  return j.is_object() ? j.value("Error", "") : r.body;
}

HttpResult create_in(Cluster& cluster, std::size_t member, const std::string& ns, const std::string& id) {
  return controlplane::http_request(cluster.http_port(member), "PUT",
                                    "/v1/volume/csi/" + id + "/create?namespace=" + ns, create_body(id).dump());
}

// Successful CreateVolume calls for this namespace's volume (its CSI name is "ns:id").
std::size_t creates_of(Cluster& cluster, const std::string& ns, const std::string& id) {
  std::size_t n = 0;
  for (const auto& c : cluster.calls("node-1", "CreateVolume"))
    if (c.volume_id == ns + ":" + id && c.code == "OK") ++n;
  return n;
}

// Four creates race for the one slot of team-a's MaxVolumes, racer i sent through member i % members:
// one wins, the others get the quota's 409, and a loser the plugin created before the quota refused
// it at the commit is deleted again.
void expect_one_takes_the_last_slot(Cluster& cluster, std::size_t members) {
  ASSERT_TRUE(cluster.create_namespace("team-a", {{"Quota", {{"MaxVolumes", 1}}}}));
  constexpr std::size_t kRacers = 4;
  std::vector<std::future<HttpResult>> racers;
  for (std::size_t i = 0; i < kRacers; ++i)
    racers.push_back(std::async(std::launch::async, [&cluster, i, members] {
      return create_in(cluster, i % members, "team-a", "r" + std::to_string(i));
    }));
  int won = 0;
  std::vector<std::string> losers;
  for (std::size_t i = 0; i < kRacers; ++i) {
    auto r = racers[i].get();
    if (r.status == 200u) {
      ++won;
    } else {
      EXPECT_EQ(r.status, 409u) << r.body;
      EXPECT_NE(error_of(r).find("quota MaxVolumes is 1"), std::string::npos) << r.body;
      losers.push_back("r" + std::to_string(i));
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(cluster.get("/v1/volumes?namespace=team-a").size(), 1u);
  // The call log names a CreateVolume by its CSI name and a DeleteVolume by the plugin's id, so
  // count them: nothing else in these tests deletes a volume.
  std::size_t created_losers = 0;
  for (const auto& id : losers) created_losers += creates_of(cluster, "team-a", id);
  EXPECT_TRUE(Cluster::eventually([&] {
    std::size_t deleted = 0;
    for (const auto& c : cluster.calls("node-1", "DeleteVolume"))
      if (c.code == "OK") ++deleted;
    return deleted == created_losers;
  })) << created_losers
      << " losers were created by the plugin";
  std::cerr << "racing creates through " << members << " member(s): " << won << " won, " << losers.size()
            << " refused\n";
}

class Namespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    cluster->start_node("node-1");
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  json get_in(const std::string& ns, const std::string& target) {
    return cluster->get(target + (target.find('?') == std::string::npos ? "?" : "&") + "namespace=" + ns);
  }
  std::string run_in(const std::string& ns, const json& allocation) {
    auto r = cluster->request("POST", "/v1/allocations?namespace=" + ns, json{{"Allocation", allocation}}.dump());
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.status == 200 ? json::parse(r.body).value("ID", "") : "";
  }
  std::string status_in(const std::string& ns, const std::string& alloc) {
    return get_in(ns, "/v1/allocation/" + alloc).value("ClientStatus", "");
  }
  std::size_t claims_in(const std::string& ns, const std::string& volume) {
    auto v = get_in(ns, "/v1/volume/csi/" + volume);
    return v.is_object() ? v["Claims"].size() : 99;
  }
  HttpResult create(const std::string& ns, const std::string& id) {
    return cluster->request("PUT", "/v1/volume/csi/" + id + "/create?namespace=" + ns, create_body(id).dump());
  }
  std::size_t creates_of(const std::string& ns, const std::string& id) { return e2e::creates_of(*cluster, ns, id); }

  std::unique_ptr<Cluster> cluster;
};

TEST_F(Namespaces, OneVolumeIdInTwoNamespacesMountsTwoVolumesOnOneNode) {
  ASSERT_TRUE(cluster->create_namespace("team-a"));  // namespaces are made first
  ASSERT_FALSE(cluster->create_volume("data").is_null());
  auto created = cluster->request("PUT", "/v1/volume/csi/data/create?namespace=team-a", create_body("data").dump());
  ASSERT_EQ(created.status, 200u) << created.body;
  const auto ext_default = cluster->volume("data").value("ExternalID", "");
  const auto ext_team = get_in("team-a", "/v1/volume/csi/data").value("ExternalID", "");
  ASSERT_FALSE(ext_team.empty());
  EXPECT_NE(ext_default, ext_team);  // two CSI names, so two volumes in the plugin

  const std::string write = "echo \"$NS\" > \"$MOORING_VOLUME_DATA/who\"; sleep 600";
  auto a = allocation("writer", "data", "node-1", write);
  a["Task"]["Env"] = {{"NS", "default"}};
  auto b = allocation("writer", "data", "node-1", write);
  b["Task"]["Env"] = {{"NS", "team-a"}};
  const auto in_default = run_in("default", a);
  const auto in_team = run_in("team-a", b);
  ASSERT_TRUE(Cluster::eventually(
      [&] { return status_in("default", in_default) == "running" && status_in("team-a", in_team) == "running"; }));
  // Two staging and two publish mounts: the team's volume has its own paths ("team-a:data").
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").size() >= 4; }));
  bool team_path = false;
  for (const auto& m : cluster->mounts_of("node-1"))
    team_path = team_path || m.find("team-a:data") != std::string::npos;
  EXPECT_TRUE(team_path);

  // Stopping the team's allocation releases its volume only.
  ASSERT_EQ(cluster->request("POST", "/v1/allocation/" + in_team + "/stop?namespace=team-a").status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return claims_in("team-a", "data") == 0; }));
  EXPECT_EQ(claims_in("default", "data"), 1u);
  EXPECT_EQ(status_in("default", in_default), "running");
  ASSERT_EQ(cluster->stop_alloc(in_default).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return claims_in("default", "data") == 0; }));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }));

  // Each volume kept what its own namespace's task wrote.
  for (const std::string ns : {"default", "team-a"}) {
    auto check = allocation("reader", "data", "node-1", "test \"$(cat \"$MOORING_VOLUME_DATA/who\")\" = " + ns);
    const auto id = run_in(ns, check);
    ASSERT_TRUE(Cluster::eventually([&] {
      auto s = status_in(ns, id);
      return s == "complete" || s == "failed";
    }));
    EXPECT_EQ(status_in(ns, id), "complete") << ns;
  }
  // Events name the namespace of the volume they are about.
  auto events = get_in("team-a", "/v1/events?topic=Claim");
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_EQ(e.value("Namespace", ""), "team-a") << e.dump();
}

TEST_F(Namespaces, UnknownNamespacesQuotasAndDeleteWithTheRealBinaries) {
  auto unknown = create("team-x", "v1");
  EXPECT_EQ(unknown.status, 400u);
  EXPECT_EQ(error_of(unknown),
            "namespace \"team-x\" does not exist; create it first with PUT /v1/namespace/team-x (mooring namespace "
            "apply team-x)");
  EXPECT_EQ(cluster->request("POST", "/v1/allocations?namespace=team-x", R"({"Allocation":{"Name":"a"}})").status,
            400u);

  const json quota = {{"Quota", {{"MaxVolumes", 1}, {"MaxRunningAllocations", 1}}}};
  ASSERT_EQ(cluster->request("PUT", "/v1/namespace/team-a", quota.dump()).status, 200u);
  ASSERT_EQ(create("team-a", "v1").status, 200u);
  auto over = create("team-a", "v2");
  EXPECT_EQ(over.status, 409u);
  EXPECT_EQ(error_of(over), "namespace \"team-a\": quota MaxVolumes is 1; it holds 1 volumes and this request adds 1");
  EXPECT_EQ(creates_of("team-x", "v1"), 0u);  // refused before the plugin was asked
  EXPECT_EQ(creates_of("team-a", "v2"), 0u);

  auto holder = allocation("holder", "v1", "node-1", "sleep 600");
  auto placed = cluster->request("POST", "/v1/allocations?namespace=team-a", json{{"Allocation", holder}}.dump());
  ASSERT_EQ(placed.status, 200u) << placed.body;
  const std::string alloc = json::parse(placed.body)["ID"];
  auto second = cluster->request("POST", "/v1/allocations?namespace=team-a", R"({"Allocation":{"Name":"b"}})");
  EXPECT_EQ(second.status, 409u);
  EXPECT_NE(error_of(second).find("quota MaxRunningAllocations is 1"), std::string::npos) << second.body;

  auto busy = cluster->request("DELETE", "/v1/namespace/team-a");
  EXPECT_EQ(busy.status, 409u);
  EXPECT_NE(error_of(busy).find("still holds 1 volume(s) and 1 allocation(s)"), std::string::npos) << busy.body;

  ASSERT_EQ(cluster->request("POST", "/v1/allocation/" + alloc + "/stop?namespace=team-a").status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] {
    auto v = cluster->get("/v1/volume/csi/v1?namespace=team-a");
    return v.is_object() && v["Claims"].empty() &&
           cluster->get("/v1/allocation/" + alloc + "?namespace=team-a").value("ClientStatus", "") == "complete";
  }));
  ASSERT_EQ(cluster->request("DELETE", "/v1/volume/csi/v1/delete?namespace=team-a").status, 200u);
  auto deleted = cluster->request("DELETE", "/v1/namespace/team-a");
  EXPECT_EQ(deleted.status, 200u) << deleted.body;
  EXPECT_EQ(create("team-a", "v3").status, 400u);  // gone: no write lands in it
}

TEST_F(Namespaces, RacingCreatesNeverBothTakeTheLastSlot) { expect_one_takes_the_last_slot(*cluster, 1); }

// The same race on the etcd state, half of the creates sent through a standby (which forwards
// them to the leader): the check and the commit still share one turn of the leader's store.
class NamespacesOnEtcd : public HaClusterTest {
 protected:
  NamespacesOnEtcd() : HaClusterTest("mooring-ns-etcd") {}
};

TEST_F(NamespacesOnEtcd, RacingCreatesThroughTwoMembersNeverBothTakeTheLastSlot) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  cluster = std::make_unique<Cluster>(ClusterOptions{.etcd = "etcd://" + etcd.endpoint() + "/ns", .controlplanes = 2});
  cluster->start_controlplane();
  ASSERT_TRUE(cluster->leader());
  cluster->start_node("node-1");
  expect_one_takes_the_last_slot(*cluster, 2);
  cluster.reset();  // before etcd goes
}

TEST_F(Namespaces, NamespacesInUseBeforeTheyWereObjectsAreRecordedAtStart) {
  ASSERT_TRUE(cluster->create_namespace("team-a"));
  ASSERT_EQ(create("team-a", "old").status, 200u);
  cluster->stop_controlplane();
  // The state as a version before namespace records left it: the volume, no record.
  const auto db = (cluster->dir() / "cp" / "state.db").string();
  ASSERT_EQ(std::system(("sqlite3 '" + db + "' \"DELETE FROM rows WHERE tbl='namespaces'\"").c_str()), 0);
  cluster->start_controlplane();
  auto ns = cluster->get("/v1/namespace/team-a");
  ASSERT_TRUE(ns.is_object());
  EXPECT_EQ(ns["Usage"]["Volumes"], 1);
  EXPECT_NE(ns.value("Description", "").find("created on upgrade"), std::string::npos) << ns.dump();
  EXPECT_EQ(cluster->get("/v1/namespace/default").value("Name", ""), "default");
  // Still writable: nothing is stranded (a create waits until the restarted control plane has
  // heard from the agent again; before that it is a 503 asking to retry).
  EXPECT_TRUE(Cluster::eventually([&] { return create("team-a", "new").status == 200u; }));
}

}  // namespace
}  // namespace mooring::e2e
