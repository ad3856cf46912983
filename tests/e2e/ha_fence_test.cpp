// High availability with the real binaries: the fencing token (issue 43). Every call a leader makes
// to an agent carries its leader epoch (the etcd leader key's create revision); an agent that heard
// a newer one from the leader since refuses the call before it reaches a plugin. Here: the agent
// learns the epoch from the leader's answers and keeps it on disk; a call with an older epoch, with
// another cluster's or with none is refused ABORTED and the plugin never hears it; after the
// leader is killed the agent learns the successor's higher epoch, the successor's calls go
// through and the dead leader's would not, also after the agent restarts.
// The paused leader whose held call goes out on resume (the case this closes) is replayed by
// tests/chaos (chaos_short). Root only; skipped without etcd. The fixture: ha_cluster.hpp.
// Plaintext, as the Ha fixture runs: the test calls the agent itself as a control plane would,
// which with mutual TLS needs the control plane's certificate. On the secure defaults (mutual
// TLS, ACLs, metrics) run_ha's stack (`make run-ha`) runs every call through the fence, and
// chaos_short's secure cluster has agents refuse a resumed leader's calls.
#include <gtest/gtest.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <optional>
#include <string>

#include "mooring/v1/nodeagent.grpc.pb.h"
#include "shared/domain/leader_epoch.hpp"
#include "tests/e2e/agent_calls.hpp"
#include "tests/e2e/ha_cluster.hpp"
#include "tests/support/files.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using domain::LeaderEpoch;

// ListVolumes (a read that changes nothing, forwarded to the node's hostpath controller) sent
// straight to an agent as a control plane would, with `epoch` as its leader epoch (nullopt: none).
grpc::Status list_with(const std::string& agent, const std::optional<LeaderEpoch>& epoch) {
  auto stub = v1::NodeAgent::NewStub(agent_channel(agent, nullptr));
  v1::ListVolumesRequest req;
  req.set_plugin_id("hostpath");
  ::csi::v1::ListVolumesResponse resp;
  return call_with_deadline([&](grpc::ClientContext& ctx) {
    if (epoch) ctx.AddMetadata(domain::kLeaderEpochHeader, epoch->to_text());
    return stub->ListVolumes(&ctx, req, &resp);
  });
}

class HaFence : public Ha {
 protected:
  // The epoch node-1's agent keeps in its data dir; nullopt while it has none.
  std::optional<LeaderEpoch> agent_epoch() {
    auto text = test::read_file(cluster->node_dir("node-1") / "agent" / "leader-epoch");
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return LeaderEpoch::parse(text);
  }
  std::string agent_address() { return cluster->get("/v1/node/node-1").value("Address", ""); }
};

TEST_F(HaFence, AnAgentRefusesCallsFromALeaderOlderThanTheOneItHeardAlsoAfterItRestarts) {
  test::EtcdProcess etcd(tmp.path() / "etcd");
  etcd.start();
  std::optional<std::size_t> first;
  ASSERT_NO_FATAL_FAILURE(start_through_a_standby(etcd, first));

  // The leader's answers name its epoch; the agent keeps it.
  std::optional<LeaderEpoch> e1;
  ASSERT_TRUE(test::wait_until([&] { return (e1 = agent_epoch()).has_value(); }, 10s));
  EXPECT_NE(e1->cluster, 0u);
  EXPECT_GT(e1->revision, 0);
  const std::string agent = agent_address();
  ASSERT_FALSE(agent.empty());
  const auto lists = [&] { return cluster->calls("node-1", "ListVolumes").size(); };
  const auto lists_before = lists();
  const auto served = list_with(agent, e1);
  EXPECT_TRUE(served.ok()) << served.error_message();
  EXPECT_EQ(lists(), lists_before + 1);
  const auto older = list_with(agent, LeaderEpoch{e1->cluster, e1->revision - 1});
  EXPECT_EQ(older.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(older.error_message().find("no longer leads"), std::string::npos) << older.error_message();
  const auto none = list_with(agent, std::nullopt);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(none.error_message().find("carries no leader epoch"), std::string::npos) << none.error_message();
  const auto foreign = list_with(agent, LeaderEpoch{e1->cluster + 1, e1->revision + 100});
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(foreign.error_message().find("another etcd cluster"), std::string::npos) << foreign.error_message();
  // A refused call asks nothing of the plugin, and changes nothing the agent keeps.
  EXPECT_EQ(lists(), lists_before + 1);
  EXPECT_EQ(agent_epoch(), e1);

  // The leader dies; its successor's epoch is higher, and the agent learns it from its answers.
  cluster->kill_controlplane(*first);
  const auto second = cluster->leader();
  ASSERT_TRUE(second);
  ASSERT_NE(*second, *first);
  std::optional<LeaderEpoch> e2;
  ASSERT_TRUE(test::wait_until(
      [&] {
        e2 = agent_epoch();
        return e2 && e2->revision > e1->revision;
      },
      15s));
  EXPECT_EQ(e2->cluster, e1->cluster);
  // The successor's controller calls go through (the create reaches the plugin through the agent).
  ASSERT_EQ(create("after-failover").status, 200u);
  const auto deposed = list_with(agent, e1);
  EXPECT_EQ(deposed.error_code(), grpc::StatusCode::ABORTED) << deposed.error_message();
  EXPECT_TRUE(list_with(agent, e2).ok());

  // A restarted agent remembers: the dead leader's epoch is refused before anything is relearnt.
  cluster->kill_node("node-1");
  ASSERT_EQ(agent_epoch(), e2);
  cluster->start_node("node-1");
  // Its address is read once it registered again (the record may name the old one until then).
  std::string restarted;
  ASSERT_TRUE(test::wait_until(
      [&] {
        restarted = agent_address();
        return list_with(restarted, e2).ok();
      },
      15s));
  EXPECT_EQ(list_with(restarted, e1).error_code(), grpc::StatusCode::ABORTED);
}

}  // namespace
}  // namespace mooring::e2e
