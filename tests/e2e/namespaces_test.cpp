// Namespaces end to end with the real binaries: one volume id in two namespaces is two volumes
// (two CSI creates, two claims, two staging and publish paths on the same node), each allocation
// mounts the volume of its own namespace, and releasing one leaves the other mounted. Root only.
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
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

  std::unique_ptr<Cluster> cluster;
};

TEST_F(Namespaces, OneVolumeIdInTwoNamespacesMountsTwoVolumesOnOneNode) {
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
  ASSERT_TRUE(Cluster::eventually([&] {
    return status_in("default", in_default) == "running" && status_in("team-a", in_team) == "running";
  }));
  // Two staging and two publish mounts: the team's volume has its own paths ("team-a:data").
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").size() >= 4; }));
  bool team_path = false;
  for (const auto& m : cluster->mounts_of("node-1")) team_path = team_path || m.find("team-a:data") != std::string::npos;
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

}  // namespace
}  // namespace mooring::e2e
