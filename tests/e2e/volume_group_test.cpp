// A non-root task's writable volume given its group (issue 41), with the real binaries: through
// VOLUME_MOUNT_GROUP when mooring-hostpath advertises it (the files owned by the task's group,
// NodeStage/NodePublish logged with it), and through the agent's OnRootMismatch fallback when
// the plugin lacks it. The upstream csi-driver-host-path, which lacks it, is not installed on
// this machine: mooring-hostpath started with --no-volume-mount-group (it then neither
// advertises the capability nor accepts the field) stands in for it. A read-only claim stays
// read-only and gets no group. The claim's Ownership in the volume's API says which way it went.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr gid_t kNobody = 65534;

struct stat stat_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st;
}

class VolumeGroupE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>(ClusterOptions{});
    cluster->start_controlplane();
  }
  std::string output(const std::string& id) {
    return test::read_file(cluster->node_dir("node-1") / "agent" / "allocs" / id / "stdout.log");
  }
  // The volume's directory in the hostpath plugin's data dir (Cluster::plugin_args).
  fs::path volume_dir(const std::string& volume_id) {
    return cluster->dir() / "hostpath" / "volumes" / cluster->volume(volume_id).value("ExternalID", "");
  }
  // The Ownership of the volume's claim, once the node reported it (with the fresh mount's stats).
  json ownership(const std::string& volume_id) {
    json out;
    Cluster::eventually([&] {
      for (const auto& c : cluster->volume(volume_id).value("Claims", json::array()))
        if (!c.value("Ownership", json()).is_null()) out = c["Ownership"];
      return !out.is_null();
    }, 15s);
    return out;
  }
  // Writes a file into the volume as the default user (nobody) and keeps running.
  std::string run_writer(const std::string& name, const std::string& volume_id) {
    const auto id = cluster->run_alloc(allocation(name, volume_id, "node-1",
                                                  "echo hi > $MOORING_VOLUME_DATA/" + name + " && echo WROTE; exec sleep 3600"));
    EXPECT_TRUE(Cluster::eventually([&] { return output(id).find("WROTE") != std::string::npos; }, 60s))
        << cluster->log_tails() << cluster->get("/v1/allocation/" + id).dump(2);
    return id;
  }
  std::unique_ptr<Cluster> cluster;
};

TEST_F(VolumeGroupE2E, HostpathGivesTheTasksGroupThroughVolumeMountGroup) {
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const auto id = run_writer("writer", "vol");
  const auto root = stat_of(volume_dir("vol"));
  EXPECT_EQ(root.st_gid, kNobody);
  EXPECT_TRUE(root.st_mode & S_ISGID);
  EXPECT_EQ(stat_of(volume_dir("vol") / "writer").st_gid, kNobody);  // inherited from the setgid root
  const auto log = cluster->node_log("node-1");
  EXPECT_NE(log.find("volume staged"), std::string::npos) << log;
  EXPECT_NE(log.find("volume_mount_group=65534"), std::string::npos) << log;
  EXPECT_EQ(log.find("volume given the task's group"), std::string::npos) << "the agent walked: " << log;
  const auto owned = ownership("vol");
  EXPECT_EQ(owned.value("By", ""), "VOLUME_MOUNT_GROUP") << owned.dump();
  EXPECT_EQ(owned.value("Group", 0), 65534);
  EXPECT_FALSE(owned.value("Walked", true));
  ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 30s));
}

TEST_F(VolumeGroupE2E, WithoutVolumeMountGroupTheAgentGivesTheGroupOnceAndAReadOnlyClaimStaysReadOnly) {
  cluster->start_node("node-1", NodeOptions{.plugin_args = {"--no-volume-mount-group"}});
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const auto id = run_writer("writer", "vol");
  EXPECT_EQ(stat_of(volume_dir("vol")).st_gid, kNobody);
  EXPECT_TRUE(stat_of(volume_dir("vol")).st_mode & S_ISGID);
  EXPECT_EQ(stat_of(volume_dir("vol") / "writer").st_gid, kNobody);
  const auto log = cluster->node_log("node-1");
  EXPECT_EQ(log.find("volume_mount_group=65534"), std::string::npos) << "the plugin was sent the group: " << log;
  EXPECT_NE(log.find("volume given the task's group"), std::string::npos) << log;
  const auto owned = ownership("vol");
  EXPECT_EQ(owned.value("By", ""), "OnRootMismatch") << owned.dump();
  EXPECT_TRUE(owned.value("Walked", false));
  ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 30s));

  // The next writer finds the root already the group's: nothing walked.
  const auto next = run_writer("next", "vol");
  EXPECT_FALSE(ownership("vol").value("Walked", true)) << ownership("vol").dump();
  ASSERT_EQ(cluster->stop_alloc(next).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 30s));

  // A read-only claim: the task cannot write, and no group is given or reported.
  ASSERT_FALSE(cluster->create_volume("ro-vol").is_null());
  ASSERT_EQ(::chmod(volume_dir("ro-vol").c_str(), 0777), 0);  // only the read-only mount may refuse
  const auto reader = cluster->run_alloc(allocation("reader", "ro-vol", "node-1",
                                                    "touch $MOORING_VOLUME_DATA/x 2>/dev/null || echo RO_REFUSED; "
                                                    "echo READ_DONE; exec sleep 3600",
                                                    "single-node-writer", /*read_only=*/true));
  ASSERT_TRUE(Cluster::eventually([&] { return output(reader).find("READ_DONE") != std::string::npos; }, 60s))
      << cluster->log_tails();
  EXPECT_NE(output(reader).find("RO_REFUSED"), std::string::npos) << output(reader);
  EXPECT_EQ(stat_of(volume_dir("ro-vol")).st_gid, 0u);
  std::this_thread::sleep_for(2s);  // the fresh mount's report has gone out by now
  for (const auto& c : cluster->volume("ro-vol").value("Claims", json::array()))
    EXPECT_TRUE(c.value("Ownership", json()).is_null()) << c.dump();  // null: never reported
  ASSERT_EQ(cluster->stop_alloc(reader).status, 200u);
}

}  // namespace
}  // namespace mooring::e2e
