// High availability with the real binaries (issue 22): three mooring-controlplane processes on a
// real etcd, node agents that list all three. Leadership and forwarding: one leader, standbys that
// forward to it and name it (over mutual TLS too, with the client named "via" the standby in the
// leader's audit log), agents that follow it; a standby forwarding to a paused leader, a paused
// leader that comes back as a standby, a restart of every control plane at once, and a start
// before etcd.
// Root only (bind mounts); skipped without etcd. The fixture: ha_cluster.hpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support/files.hpp"

#include "tests/e2e/ha_cluster.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_F(Ha, OneLeaderStandbysForwardAndNameItAgentsFollowIt) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  make_cluster("etcd://" + etcd.endpoint() + "/ha");
  // Member 1 leads; 0 and 2 join as standbys. The agent lists member 0 first, a standby.
  cluster->start_controlplane(1);
  ASSERT_EQ(cluster->leader(), std::optional<std::size_t>(1));
  cluster->start_controlplane(0);
  cluster->start_controlplane(2);
  const std::string leader = "http://127.0.0.1:" + std::to_string(cluster->http_port(1));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(leader_address_from(i), leader) << "member " << i;
    EXPECT_EQ(ready_status(i), i == 1 ? 200u : 503u) << "member " << i;
  }
  auto standby_ready = controlplane::http_request(cluster->http_port(0), "GET", "/v1/status/ready");
  EXPECT_NE(standby_ready.body.find("standby; the leader is at " + leader), std::string::npos) << standby_ready.body;

  cluster->start_node("node-1");  // registers with the leader through a standby's redirect
  EXPECT_NE(cluster->node_log("node-1").find("switching control plane"), std::string::npos)
      << cluster->node_log("node-1");

  // A write through a standby: the leader's answer, saying who gave it.
  cluster->use_controlplane(0);
  auto created = create("vol-1");
  ASSERT_EQ(created.status, 200u) << created.body;
  EXPECT_EQ(created.header("x-mooring-leader"), leader);
  cluster->use_controlplane(2);
  auto read = cluster->request("GET", "/v1/volume/csi/vol-1");
  ASSERT_EQ(read.status, 200u) << read.body;
  EXPECT_EQ(read.header("x-mooring-leader"), leader);
  EXPECT_FALSE(read.header("x-mooring-index").empty());
  // A bad request through a standby is the leader's own refusal, unchanged.
  auto bad = cluster->request("PUT", "/v1/volume/csi/bad", "{not json");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  // A claim, mount and release driven by the agent, with the API reached through a standby.
  EXPECT_EQ(cluster->run_task("t1", "vol-1", "node-1", "echo hi > \"$MOORING_VOLUME_DATA/f\""), "complete");
}

TEST_F(Ha, OverMutualTlsAStandbyForwardsOverHttpsAndAgentsFollowTheLeader) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  make_cluster("etcd://" + etcd.endpoint() + "/ha", /*mutual_tls=*/true);
  cluster->start_controlplane(2);
  ASSERT_EQ(cluster->leader(), std::optional<std::size_t>(2));
  cluster->start_controlplane(0);
  cluster->start_controlplane(1);
  cluster->start_node("node-1");
  cluster->use_controlplane(0);
  auto created = create("vol-tls");
  ASSERT_EQ(created.status, 200u) << created.body << created.error;
  EXPECT_EQ(created.header("x-mooring-leader"), "https://127.0.0.1:" + std::to_string(cluster->http_port(2)));
  EXPECT_EQ(cluster->run_task("t1", "vol-tls", "node-1", "echo hi > \"$MOORING_VOLUME_DATA/f\""), "complete");
}

TEST_F(Ha, AStandbyForwardingToAPausedLeaderAnswers503NamingItWithinTwoLeasesThenUsesTheNewLeader) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  make_cluster("etcd://" + etcd.endpoint() + "/ha");
  cluster->start_controlplane();
  const auto first = cluster->leader();
  ASSERT_TRUE(first);
  const auto standby = (*first + 1) % 3;
  cluster->use_controlplane(standby);
  ASSERT_EQ(cluster->request("GET", "/v1/volumes").status, 200u);
  const std::string paused = "http://127.0.0.1:" + std::to_string(cluster->http_port(*first));

  // Paused, the leader's port still accepts connections (the kernel does) but nothing answers.
  ASSERT_TRUE(cluster->controlplane(*first).stop());
  const auto t0 = Clock::now();
  auto during = cluster->request("PUT", "/v1/volume/csi/paused", "{not json");
  const auto waited = Clock::now() - t0;
  EXPECT_EQ(during.status, 503u) << during.body;
  EXPECT_NE(during.body.find("cannot reach the leader at " + paused), std::string::npos) << during.body;
  EXPECT_NE(during.body.find("no answer within 4.0 s"), std::string::npos) << during.body;
  EXPECT_EQ(during.header("retry-after"), "1");
  EXPECT_GE(waited, 2 * kLease - 100ms);
  EXPECT_LT(waited, 2 * kLease + 1s) << "the forward is bounded by twice the lease";
  std::cerr << "503 from the standby after " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
            << " ms\n";

  // Its lease ran out meanwhile and the standby read the key again: the next requests are served
  // by the new leader (give it the moment a new leader takes to load the state).
  HttpResult after;
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        after = cluster->request("GET", "/v1/volumes");
        return after.status == 200;
      },
      3s))
      << after.status << " " << after.body;
  EXPECT_NE(after.header("x-mooring-leader"), paused);
  ASSERT_TRUE(cluster->controlplane(*first).resume());
}

TEST_F(Ha, TheLeadersAuditLogNamesTheClientOfAForwardedWriteViaTheStandbyAndBelievesOnlyAControlPlane) {
  if (std::system("command -v curl >/dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  make_cluster("etcd://" + etcd.endpoint() + "/ha", /*mutual_tls=*/true);
  cluster->start_controlplane(0);
  ASSERT_EQ(cluster->leader(), std::optional<std::size_t>(0));
  cluster->start_controlplane(1);
  // The client connects from 127.0.0.2, the standby (and its forward) from 127.0.0.1, so the
  // audit line tells them apart. Each write also claims to come from 203.0.113.7.
  auto write = [&](std::size_t member, const std::string& id) {
    const std::string cmd = "curl -sS -o /dev/null -w '%{http_code}' --interface 127.0.0.2 --cacert " +
                            cluster->pki().server().ca + " -X PUT -H 'X-Mooring-Forwarded-For: 203.0.113.7:1'" +
                            " -H 'X-Mooring-Forwarded-By: https://forged:1' --data '{not json' https://127.0.0.1:" +
                            std::to_string(cluster->http_port(member)) + "/v1/volume/csi/" + id;
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[64];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    return out;
  };
  EXPECT_EQ(write(1, "through-standby"), "400");  // the leader's own refusal, forwarded back
  EXPECT_EQ(write(0, "straight-to-leader"), "400");
  const auto audit = test::read_file(cluster->dir() / "cp0" / "audit.log");
  auto line_of = [&](const std::string& id) -> json {
    std::istringstream in(audit);
    for (std::string line; std::getline(in, line);)
      if (line.find("/v1/volume/csi/" + id) != std::string::npos) return json::parse(line);
    return nullptr;
  };
  const auto forwarded = line_of("through-standby");
  ASSERT_TRUE(forwarded.is_object()) << audit;
  EXPECT_TRUE(forwarded.value("Remote", "").starts_with("127.0.0.2:")) << forwarded.dump();
  EXPECT_EQ(forwarded.value("Via", ""), "https://127.0.0.1:" + std::to_string(cluster->http_port(1)))
      << forwarded.dump();
  EXPECT_EQ(forwarded.value("Status", 0), 400);
  // Sent by a client itself, the headers are believed by no one.
  const auto direct = line_of("straight-to-leader");
  ASSERT_TRUE(direct.is_object()) << audit;
  EXPECT_TRUE(direct.value("Remote", "").starts_with("127.0.0.2:")) << direct.dump();
  EXPECT_FALSE(direct.contains("Via")) << direct.dump();
  EXPECT_EQ(audit.find("203.0.113.7"), std::string::npos) << audit;
  EXPECT_EQ(audit.find("forged"), std::string::npos) << audit;
}

TEST_F(Ha, PausedLeaderCommitsNothingAfterItsLeaseAndComesBackAsAStandby) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  std::optional<std::size_t> first;
  ASSERT_NO_FATAL_FAILURE(start_through_a_standby(etcd, first));
  ASSERT_EQ(create("before").status, 200u);

  ASSERT_TRUE(cluster->controlplane(*first).stop());  // SIGSTOP, every thread stopped
  std::this_thread::sleep_for(3 * kLease);
  const auto second = cluster->leader();
  ASSERT_TRUE(second);
  EXPECT_NE(*second, *first);
  // The agent's calls to the paused leader time out and it moves on; until then the new leader
  // has no healthy controller to create with, and says so with a 503 a client retries.
  HttpResult during;
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        during = create("during-pause");
        return during.status == 200;
      },
      20s))
      << during.status << " " << during.body;

  ASSERT_TRUE(cluster->controlplane(*first).resume());
  // It notices at once, commits nothing, and restarts as a standby naming the new leader.
  ASSERT_TRUE(Cluster::eventually(
      [&] { return cluster->controlplane_log(*first).find("stepping down") != std::string::npos; }, 10s))
      << cluster->controlplane_log(*first);
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        return ready_status(*first) == 503u &&
               leader_address_from(*first) == "http://127.0.0.1:" + std::to_string(cluster->http_port(*second));
      },
      15s));
  EXPECT_EQ(cluster->leader(), second);
  EXPECT_TRUE(cluster->controlplane(*first).running());
  // Its writes after the lease ended were refused: the log has no commit after the pause.
  const auto log = cluster->controlplane_log(*first);
  EXPECT_EQ(log.find("state snapshot written", log.find("stepping down")), std::string::npos);
  // Through the old leader (now a standby) the state is the new leader's.
  cluster->use_controlplane(*first);
  EXPECT_EQ(cluster->request("GET", "/v1/volume/csi/before").status, 200u);
  EXPECT_EQ(cluster->request("GET", "/v1/volume/csi/during-pause").status, 200u);
  ASSERT_EQ(create("after-resume").status, 200u);
}

TEST_F(Ha, EveryControlPlaneKilledAtOnceComesBackWithTheSameState) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  make_cluster("etcd://" + etcd.endpoint() + "/ha");
  cluster->start_controlplane();
  cluster->start_node("node-1");
  for (int i = 0; i < 4; ++i) ASSERT_EQ(create("vol-" + std::to_string(i)).status, 200u);
  ASSERT_EQ(cluster->request("DELETE", "/v1/volume/csi/vol-3").status, 200u);
  const auto volumes = cluster->request("GET", "/v1/volumes").body;
  const auto nodes = cluster->request("GET", "/v1/nodes").body;
  for (std::size_t i = 0; i < 3; ++i) cluster->kill_controlplane(i);
  cluster->start_controlplane();
  // The stored state is the same at once. The plugins' health is not state: the new leader holds
  // it unknown until the agent is heard from (issue 40), which the agent's reconnect takes up to
  // about a second; comparing it at once failed 3 runs in 4 on a quiet machine, before and after.
  const auto stored = [](json list) {
    for (auto& v : list)
      for (const char* live : {"ControllersHealthy", "NodesHealthy", "Schedulable"}) v.erase(live);
    return list;
  };
  EXPECT_EQ(stored(json::parse(cluster->request("GET", "/v1/volumes").body)), stored(json::parse(volumes)));
  EXPECT_EQ(json::parse(cluster->request("GET", "/v1/nodes").body).size(), json::parse(nodes).size());
  EXPECT_TRUE(Cluster::eventually(
      [&] { return json::parse(cluster->request("GET", "/v1/volumes").body) == json::parse(volumes); }, 15s))
      << cluster->request("GET", "/v1/volumes").body;
}

TEST_F(Ha, StartedBeforeEtcdItWaitsNotReadyAndLeadsOnceEtcdIsUp) {
  const auto port = test::free_tcp_port();
  make_cluster("etcd://127.0.0.1:" + std::to_string(port) + "/ha");
  cluster->start_controlplane(0);
  std::this_thread::sleep_for(1s);
  auto r = controlplane::http_request(cluster->http_port(0), "GET", "/v1/status/ready");
  EXPECT_EQ(r.status, 503u);
  EXPECT_NE(r.body.find("waiting for etcd"), std::string::npos) << r.body;
  EXPECT_TRUE(cluster->controlplane(0).running());
  test::EtcdProcess etcd(tmp.path() / "etcd-late", port);
  etcd.start();
  EXPECT_EQ(cluster->leader(20s), std::optional<std::size_t>(0));
}

}  // namespace
}  // namespace mooring::e2e
