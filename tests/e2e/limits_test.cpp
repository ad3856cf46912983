// Limits that follow the node (issue 44; Kubernetes 1.36 re-reads a CSI node's max volumes), end
// to end with the real binaries: mooring-hostpath reads its max volumes from a file
// (--max-volumes-file) at every NodeGetInfo and ControllerPublish, and the test lowers it at run
// time. The agent reads it again on its fingerprint period, and at once after a claim's
// ControllerPublish answers RESOURCE_EXHAUSTED (the period set to a minute, so only that can be
// it); the next placement beyond the new limit is refused naming it. Root only.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Limits : public ::testing::Test {
 protected:
  void start(const std::string& fingerprint_interval) {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    limit_file = cluster->dir() / "max-volumes";
    set_limit(3);
    cluster->start_controlplane();
    NodeOptions node;
    node.plugin_args = {"--max-volumes-file", limit_file.string()};
    node.fingerprint_interval = fingerprint_interval;
    cluster->start_node("node-1", node);
    ASSERT_TRUE(Cluster::eventually([&] { return max_volumes() == 3; })) << max_volumes();
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  void set_limit(int n) { std::ofstream(limit_file) << n << "\n"; }
  std::int64_t max_volumes() {
    auto p = cluster->get("/v1/plugin/csi/hostpath");
    return p.is_null() ? -1 : p["Nodes"]["node-1"]["NodeInfo"].value("MaxVolumes", std::int64_t{-1});
  }
  HttpResult submit(const std::string& name, const std::string& volume, const std::string& node) {
    return cluster->request("POST", "/v1/allocations",
                            json{{"Allocation", allocation(name, volume, node, "sleep 600")}}.dump());
  }

  std::unique_ptr<Cluster> cluster;
  std::filesystem::path limit_file;
};

TEST_F(Limits, TheFingerprintPeriodFollowsALoweredLimit) {
  ASSERT_NO_FATAL_FAILURE(start("1s"));
  set_limit(1);
  EXPECT_TRUE(Cluster::eventually([&] { return max_volumes() == 1; }, 10s)) << max_volumes();
}

TEST_F(Limits, APublishAtTheLimitRereadsItAndTheNextPlacementIsRefused) {
  ASSERT_NO_FATAL_FAILURE(start("60s"));
  for (const char* v : {"vol-1", "vol-2", "vol-3"}) ASSERT_FALSE(cluster->create_volume(v).is_null());
  auto first = submit("first", "vol-1", "node-1");
  ASSERT_EQ(first.status, 200u) << first.body;
  const auto first_id = json::parse(first.body).value("ID", "");
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(first_id) == "running"; }));

  set_limit(1);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(max_volumes(), 3) << "the period is a minute: nothing has read the new limit yet";

  // Placed by the stale figure; the plugin's ControllerPublish answers RESOURCE_EXHAUSTED.
  const auto asked = Clock::now();
  auto second = submit("second", "vol-2", "node-1");
  ASSERT_EQ(second.status, 200u) << second.body;
  ASSERT_TRUE(Cluster::eventually([&] { return max_volumes() == 1; }, 20s)) << max_volumes();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
  std::cout << "[limits] RESOURCE_EXHAUSTED -> fresh MaxVolumes at the control plane: " << took.count() << " ms\n";
  EXPECT_LT(took, 30s);
  bool exhausted = false;
  for (const auto& c : cluster->calls("node-1", "ControllerPublishVolume")) exhausted |= c.code == "RESOURCE_EXHAUSTED";
  EXPECT_TRUE(exhausted);
  ASSERT_EQ(cluster->stop_alloc(json::parse(second.body).value("ID", "")).status, 200u);

  auto third = submit("third", "vol-3", "");
  EXPECT_NE(third.status, 200u) << third.body;
  EXPECT_NE(third.body.find("allows at most 1 volumes on this node"), std::string::npos) << third.body;
}

}  // namespace
}  // namespace mooring::e2e
