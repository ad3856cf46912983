#include "tests/e2e/ha_cluster.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "tests/support/root.hpp"

namespace mooring::e2e {

using namespace std::chrono_literals;

std::string hostpath_volume_create(const std::string& id) {
  return json{{"Volumes",
               {{{"ID", id},
                 {"Name", id},
                 {"PluginID", "hostpath"},
                 {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
      .dump();
}

void HaClusterTest::SetUp() {
  MOORING_REQUIRE_ROOT();
  if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
}

void HaClusterTest::TearDown() {
  if (HasFailure() && cluster) std::cerr << failure_logs();
  cluster.reset();
}

std::string HaClusterTest::failure_logs() const { return cluster->log_tails(6000); }

void Ha::make_cluster(const std::string& etcd_url, bool mutual_tls) {
  cluster = std::make_unique<Cluster>(ClusterOptions{.mutual_tls = mutual_tls, .etcd = etcd_url, .controlplanes = 3});
}

std::string Ha::leader_address_from(std::size_t member) {
  auto r = controlplane::http_request(cluster->http_port(member), "GET", "/v1/status/leader");
  if (r.status != 200) return "(" + std::to_string(r.status) + " " + r.body + ")";
  return json::parse(r.body).get<std::string>();
}

unsigned Ha::ready_status(std::size_t member) {
  return controlplane::http_request(cluster->http_port(member), "GET", "/v1/status/ready").status;
}

void Ha::start_through_a_standby(test::EtcdProcess& etcd, std::optional<std::size_t>& leader) {
  make_cluster("etcd://" + etcd.endpoint() + "/ha");
  cluster->start_controlplane();
  leader = cluster->leader();
  ASSERT_TRUE(leader);
  cluster->use_controlplane((*leader + 1) % 3);
  cluster->start_node("node-1");
}

void Ha::run_claimed(const std::string& volume, const std::string& alloc, int n, std::vector<std::string>& volumes,
                     std::vector<std::string>& allocs) {
  for (int i = 0; i < n; ++i) {
    volumes.push_back(volume + "-" + std::to_string(i));
    ASSERT_EQ(create(volumes.back()).status, 200u);
    allocs.push_back(cluster->run_alloc(allocation(alloc + std::to_string(i), volumes.back(), "node-1", "sleep 600")));
  }
  for (const auto& id : allocs)
    ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; }, 30s)) << id;
}

HttpResult Ha::create(const std::string& id) {
  return cluster->request("PUT", "/v1/volume/csi/" + id + "/create", hostpath_volume_create(id),
                          {{"Idempotency-Key", "ha-create-" + id}});
}

std::map<std::string, std::pair<int, int>> Ha::controller_calls(const std::string& node) {
  std::map<std::string, std::pair<int, int>> out;
  for (const auto& c : cluster->calls(node)) {
    if (c.code != "OK") continue;
    if (c.rpc == "ControllerPublishVolume") ++out[c.volume_id].first;
    if (c.rpc == "ControllerUnpublishVolume") ++out[c.volume_id].second;
  }
  return out;
}

int Ha::expect_nothing_lost(const std::vector<std::string>& volumes, const std::string& node) {
  const auto calls = controller_calls(node);
  int repeated = 0;
  for (const auto& vol : volumes) {
    const auto it = calls.find(cluster->volume(vol).value("ExternalID", ""));
    if (it == calls.end()) {
      ADD_FAILURE() << "no controller call for " << vol;
      continue;
    }
    EXPECT_GE(it->second.first, 1) << "ControllerPublish of " << vol;
    EXPECT_GE(it->second.second, 1) << "ControllerUnpublish of " << vol;
    repeated += std::max(0, it->second.first - 1) + std::max(0, it->second.second - 1);
  }
  // (A restarted agent listens on a new port: the leader learns it when the agent registers.)
  HttpResult external;
  EXPECT_TRUE(Cluster::eventually([&] {
    external = cluster->request("GET", "/v1/volumes/external?plugin_id=hostpath");
    return external.status == 200;
  }, 30s)) << external.status << " " << external.body;
  auto j = json::parse(external.body, nullptr, false);
  if (j.is_object() && j.contains("Volumes")) {
    for (const auto& v : j["Volumes"]) {
      EXPECT_TRUE(v.value("PublishedExternalNodeIDs", json::array()).empty()) << "still published: " << v.dump();
    }
  }
  std::cerr << "controller calls repeated after the failover: " << repeated << " (of " << 2 * volumes.size() << ")\n";
  if (repeated > 0) std::cerr << dump_controller_calls(node);
  return repeated;
}

void Ha::gc_storm_with_a_leader_kill(test::EtcdProcess& etcd, bool kill_the_agent_too) {
  std::optional<std::size_t> first;
  ASSERT_NO_FATAL_FAILURE(start_through_a_standby(etcd, first));
  constexpr int kVolumes = 12;
  std::vector<std::string> allocs, volumes;
  ASSERT_NO_FATAL_FAILURE(run_claimed("storm", "s", kVolumes, volumes, allocs));

  cluster->set_faults("node-1", json::array({{{"rpc", "ControllerUnpublishVolume"}, {"delay_ms", 1000}}}));
  for (const auto& id : allocs) EXPECT_EQ(cluster->stop_alloc(id).status, 200u);
  std::this_thread::sleep_for(600ms);
  cluster->kill_controlplane(*first);
  if (kill_the_agent_too) cluster->kill_node("node-1");  // its plugin stays up, with what it did
  const auto second = cluster->leader();  // (the dead one is not asked)
  ASSERT_TRUE(second);
  ASSERT_NE(*second, *first);
  if (kill_the_agent_too) cluster->start_node("node-1");

  for (const auto& vol : volumes)
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count(vol) == 0; }, 60s)) << cluster->volume(vol).dump();
  EXPECT_EQ(expect_nothing_lost(volumes, "node-1"), 0);
  for (const auto& id : allocs)
    EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "complete"; }, 30s)) << id;
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }, 30s));
}

std::string Ha::dump_controller_calls(const std::string& node) {
  std::string out;
  for (const auto& c : cluster->calls(node))
    if (c.rpc.starts_with("Controller")) out += c.rpc + " " + c.volume_id + " " + c.code + "\n";
  return out;
}

std::size_t Ha::cut_off_unpublishes_answered(const std::string& node) {
  std::size_t resolved = 0, resent = 0;
  std::istringstream lines(cluster->node_log(node));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("unpublish cut off by the agent restart: the volume is no longer published") != std::string::npos) ++resolved;
    else if (line.find("sending it again (idempotent by CSI)") != std::string::npos) ++resent;
  }
  std::cerr << "unpublishes cut off by the agent restart: answered from the plugin's published nodes " << resolved
            << ", sent again " << resent << "\n";
  return resolved;
}

}  // namespace mooring::e2e
