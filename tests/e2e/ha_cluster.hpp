// e2e: the fixtures of the high-availability scenarios: control planes (real binaries) on a real
// etcd. HaClusterTest is the shape every such test shares (root and etcd required, else skipped;
// on failure the logs that explain it; the cluster stopped before etcd's data goes); Ha adds
// what its scenarios ask of a cluster (ha_*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/e2e/cluster.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::e2e {

inline constexpr std::chrono::seconds kLease{2};  // the default --leader-lease

// The body of a volume create as a client sends it: hostpath volume `id`, single-node-writer,
// file system (PUT /v1/volume/csi/<id>/create).
std::string hostpath_volume_create(const std::string& id);

class HaClusterTest : public ::testing::Test {
 protected:
  explicit HaClusterTest(std::string_view tmp_prefix) : tmp(tmp_prefix) {}
  void SetUp() override;     // skips without root or without etcd
  void TearDown() override;  // on failure, failure_logs() to stderr; then the cluster stops
  // What explains a failure: the tail of every log.
  virtual std::string failure_logs() const;

  test::TempDir tmp;  // etcd's data
  std::unique_ptr<Cluster> cluster;
};

class Ha : public HaClusterTest {
 protected:
  Ha() : HaClusterTest("mooring-ha") {}

  // A cluster of three control planes on `etcd_url`.
  void make_cluster(const std::string& etcd_url, bool mutual_tls = false);
  // The leader's advertised HTTP address as `member` reports it (or its error, in parentheses).
  std::string leader_address_from(std::size_t member);
  unsigned ready_status(std::size_t member);
  // Three control planes on `etcd` (`leader` leads), requests sent through a standby, node-1 up.
  void start_through_a_standby(test::EtcdProcess& etcd, std::optional<std::size_t>& leader);
  // `n` volumes VOLUME-i on node-1, each claimed by a running allocation ALLOCi (`sleep 600`).
  void run_claimed(const std::string& volume, const std::string& alloc, int n, std::vector<std::string>& volumes,
                   std::vector<std::string>& allocs);
  // A volume created through the API (the hostpath plugin creates it); the answer as it came.
  HttpResult create(const std::string& id);
  // Per volume: how many ControllerPublish and ControllerUnpublish calls answered OK.
  std::map<std::string, std::pair<int, int>> controller_calls(const std::string& node);
  // Nothing lost: every volume was published and unpublished at least once and the plugin has it
  // published nowhere now. Nothing doubled: the calls that reached the plugin more than once
  // (a call in flight when the leader died is sent again by the new one, with the same operation
  // id: the agent must answer it without the plugin). Returns how many calls were repeated.
  int expect_nothing_lost(const std::vector<std::string>& volumes, const std::string& node);
  // Twelve allocations holding a volume each on node-1, all stopped at once (a storm of
  // releases), and the leader killed 600 ms into it (with node-1's agent when asked: it comes back
  // once a standby leads). The plugin takes 1 s per ControllerUnpublish, so the kill finds them in
  // flight: the plugin completes them, the dead leader never records it, the new one resends.
  // Every claim is freed; no controller call lost or doubled.
  void gc_storm_with_a_leader_kill(test::EtcdProcess& etcd, bool kill_the_agent_too);
  // Every controller call of the plugin, for a failure message.
  std::string dump_controller_calls(const std::string& node);
  // Unpublishes cut off by a restart of `node`'s agent that it answered from the plugin's
  // published nodes (its log); how many it sent again instead goes to stderr beside it.
  std::size_t cut_off_unpublishes_answered(const std::string& node);
};

}  // namespace mooring::e2e
