// Envelope keys under high availability, with the real binaries (issues 21 and 22): three control
// planes on a real 3-member etcd share one keyring file of ROOT keys, made read-only as a
// Kubernetes Secret is (0400 in a read-only bind mount, so not even root can write it). The data
// keys that seal the secrets live wrapped in the state. What is pinned: `keyring rotate` on the
// leader succeeds without writing the file; after kill -9 of the leader the new one opens every
// secret (a claim's volume secrets reach the hostpath plugin's NodePublish), rotates again, and
// no secret is in etcd's values in plain text; a member whose file lacks the state's root key
// refuses to lead, naming the key id and the file, and changes nothing.
// Root only (bind mounts); skipped without etcd.
#include <sys/mount.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "services/controlplane/secrets/keyring.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

class KeyringHa : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    if (auto why = test::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails(6000);
    cluster.reset();
  }
  // A keyring file of one new root key in a directory of its own; returns the root key id.
  std::string make_keyring(const std::filesystem::path& file) {
    std::filesystem::create_directories(file.parent_path());
    auto ring = controlplane::secrets::Keyring::load_or_new(file);
    EXPECT_TRUE(ring) << ring.error();
    EXPECT_TRUE(ring->save());
    return ring->active().id;
  }
  // The file 0400 in a 0500 directory, bind-mounted read-only over itself (TempDir unmounts it).
  void make_read_only(const std::filesystem::path& file) {
    const auto d = file.parent_path();
    ASSERT_EQ(::chmod(file.c_str(), 0400), 0);
    ASSERT_EQ(::chmod(d.c_str(), 0500), 0);
    ASSERT_EQ(::mount(d.c_str(), d.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, d.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
    EXPECT_ANY_THROW(test::write_file(d / "probe", "x")) << "the keyring directory is not read-only";
    ASSERT_FALSE(std::filesystem::exists(d / "probe"));
  }
  // Every value under the etcd prefix, as etcdctl prints them.
  std::string etcd_values(test::EtcdCluster& etcd) {
    const auto out = tmp.path() / "etcdctl.out";
    test::ChildProcess p({.binary = "/usr/bin/etcdctl",
                          .args = {"--endpoints", etcd.member(0).endpoint(), "get", "--prefix", "/ha"},
                          .env = {{"ETCDCTL_API", "3"}},
                          .output_file = out});
    EXPECT_TRUE(p.wait_for_exit(20s));
    return test::read_file(out);
  }
  // PUT /v1/operator/keyring/rotate on member `i` (a standby forwards it); the body parsed.
  json rotate(std::size_t i, bool root = false) {
    cluster->use_controlplane(i);
    auto r = cluster->request("PUT", root ? "/v1/operator/keyring/rotate?root=true" : "/v1/operator/keyring/rotate");
    EXPECT_EQ(r.status, 200u) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  // A claim of `volume` on node-1 that runs until stopped; true once NodePublish carried the
  // volume's secrets (cluster.create_volume gives it {"token":"e2e-secret-<id>"}).
  bool secrets_reach_the_node(const std::string& volume, const std::string& name) {
    // A new leader may have marked the node down before its agent found it: wait for it.
    EXPECT_TRUE(Cluster::eventually([&] {
      const auto v = cluster->request("GET", "/v1/volume/csi/" + volume);
      const auto j = json::parse(v.body, nullptr, false);
      // What a claim checks: the node's plugin and its controller both healthy on this leader.
      return v.status == 200 && j.is_object() && j.value("NodesHealthy", 0) >= 1 && j.value("ControllersHealthy", 0) >= 1;
    }, 30s)) << volume << " has no healthy node or controller";
    const auto id = cluster->run_alloc(allocation(name, volume, "node-1", "sleep 600"));
    if (id.empty()) return false;
    if (!Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; }, 45s)) {
      ADD_FAILURE() << "allocation " << name << " is " << cluster->alloc_status(id) << ": "
                    << cluster->get("/v1/allocation/" + id).dump();
      return false;
    }
    const auto want = secrets_sha256({{"token", "e2e-secret-" + volume}});
    bool seen = false;
    for (const auto& c : cluster->calls("node-1", "NodePublishVolume"))
      if (c.code == "OK" && c.secrets_sha256 == want) seen = true;
    EXPECT_EQ(cluster->stop_alloc(id).status, 200u);
    return seen;
  }

  test::TempDir tmp{"keyring-ha"};
  std::unique_ptr<Cluster> cluster;
};

TEST_F(KeyringHa, ReadOnlySharedKeyringRotateFailoverServesSecretsAndRotatesAgain) {
  test::EtcdCluster etcd(tmp.path() / "etcd3");
  etcd.start();
  const auto keyring = tmp.path() / "secret" / "keyring";
  const auto root_id = make_keyring(keyring);
  const auto file_before = test::read_file(keyring);
  make_read_only(keyring);
  cluster = std::make_unique<Cluster>(
      ClusterOptions{.etcd = etcd.url("/ha"), .controlplanes = 3, .keyring_file = keyring.string()});
  cluster->start_controlplane();
  const auto first = cluster->leader();
  ASSERT_TRUE(first);
  cluster->use_controlplane((*first + 1) % 3);
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("before").is_null());

  const auto rotated = rotate(*first);
  ASSERT_TRUE(rotated.is_object());
  EXPECT_EQ(rotated.value("RootKeyID", ""), root_id);
  EXPECT_GE(rotated.value("RowsResealed", 0), 1);
  EXPECT_EQ(test::read_file(keyring), file_before);

  cluster->kill_controlplane(*first);
  std::optional<std::size_t> second;
  ASSERT_TRUE(Cluster::eventually([&] {
    second = cluster->leader(1s);
    return second && *second != *first;
  }, 20s));
  cluster->use_controlplane(*second);
  EXPECT_EQ(cluster->volume("before").value("ID", ""), "before");
  EXPECT_TRUE(secrets_reach_the_node("before", "after-failover")) << "the new leader opened the rotated secrets";
  ASSERT_FALSE(cluster->create_volume("after").is_null());

  const auto again = rotate(*second);
  ASSERT_TRUE(again.is_object());
  EXPECT_NE(again.value("KeyID", ""), rotated.value("KeyID", ""));
  EXPECT_EQ(again["RetiredKeys"], json::array({rotated.value("KeyID", "")}));
  EXPECT_GE(again.value("RowsResealed", 0), 2);
  // The killed member comes back as a standby and, once it leads, opens the state too.
  cluster->start_controlplane(*first);
  cluster->kill_controlplane(*second);
  std::optional<std::size_t> third;
  ASSERT_TRUE(Cluster::eventually([&] {
    third = cluster->leader(1s);
    return third && *third != *second;
  }, 20s));
  cluster->use_controlplane(*third);
  EXPECT_TRUE(secrets_reach_the_node("after", "after-second-failover"));

  EXPECT_EQ(test::read_file(keyring), file_before) << "no member wrote the keyring file";
  const auto values = etcd_values(etcd);
  EXPECT_NE(values.find("mooring-sealed:v1:"), std::string::npos) << "etcdctl read the state";
  EXPECT_EQ(values.find("e2e-secret-"), std::string::npos) << "a secret in etcd in plain text";
}

TEST_F(KeyringHa, AMemberWhoseKeyringLacksTheRootKeyRefusesToLeadNamingItAndChangesNothing) {
  test::EtcdCluster etcd(tmp.path() / "etcd3");
  etcd.start();
  const auto keyring = tmp.path() / "secret" / "keyring";
  const auto wrong = tmp.path() / "wrong" / "keyring";
  const auto root_id = make_keyring(keyring);
  make_keyring(wrong);
  cluster = std::make_unique<Cluster>(ClusterOptions{.etcd = etcd.url("/ha"),
                                                     .controlplanes = 3,
                                                     .keyring_file = keyring.string(),
                                                     .member_keyring = {"", "", wrong.string()}});
  // The good members first, so one of them makes the state.
  cluster->start_controlplane(0);
  cluster->start_controlplane(1);
  const auto first = cluster->leader();
  ASSERT_TRUE(first);
  cluster->use_controlplane(*first);
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("kept").is_null());

  // Member 2 is left the only candidate: elected, it cannot open the state and steps down.
  cluster->start_controlplane(2);
  cluster->kill_controlplane(0);
  cluster->kill_controlplane(1);
  // (The log escapes the quotes around the id.)
  const std::string named = "wrapped with root key \\\"" + root_id + "\\\", which keyring file " + wrong.string();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->controlplane_log(2).find(named) != std::string::npos; }, 20s))
      << named << "\n" << cluster->controlplane_log(2);
  EXPECT_FALSE(cluster->leader(3s)) << "a member without the root key led";
  EXPECT_EQ(cluster->controlplane_log(2).find("msg=\"state loaded\""), std::string::npos);
  // Each time it failed it handed its lease back and holds back from the next election longer.
  EXPECT_NE(cluster->controlplane_log(2).find("holding back from the election"), std::string::npos)
      << cluster->controlplane_log(2);

  // Nothing changed: a member with the key leads and serves the volume with its secrets.
  cluster->start_controlplane(0);
  const auto back = cluster->leader();
  ASSERT_TRUE(back);
  EXPECT_NE(*back, 2u);
  cluster->use_controlplane(*back);
  EXPECT_EQ(cluster->volume("kept").value("ID", ""), "kept");
  EXPECT_TRUE(secrets_reach_the_node("kept", "with-the-right-key"));
}

}  // namespace
}  // namespace mooring::e2e
