// Secrets end to end with the real binaries: a volume's CSI secrets and a task's SecretEnv are
// absent from state.db's bytes, every API answer, event, and log; the task sees exactly its own
// environment (read from the kernel's copy); a key rotation leaves everything readable after a
// restart of the control plane. Root only (bind mounts).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kVolumeSecret = "e2e-secret-vault";  // Cluster::create_volume's
constexpr const char* kTaskSecret = "e2e-task-secret-4a1c";
constexpr const char* kAgentOnly = "e2e-agent-only-93b0";

std::string all_bytes_under(const std::filesystem::path& dir, const std::filesystem::path& skip = {}) {
  std::string out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, std::filesystem::directory_options::skip_permission_denied)) {
    // task-environ: what the task wrote into its own volume, seen through the agent's mounts.
    if (!e.is_regular_file() || e.path() == skip || e.path().filename() == "task-environ") continue;
    out += test::read_file(e.path());
  }
  return out;
}

TEST(Secrets, NeverInStateBytesApiEventsOrLogsAndTheTaskSeesOnlyItsOwnEnvironment) {
  MOORING_REQUIRE_ROOT();
  ::setenv("MOORING_E2E_AGENT_ONLY", kAgentOnly, 1);  // inherited by the agent, never by its tasks
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1");
  ::unsetenv("MOORING_E2E_AGENT_ONLY");
  ASSERT_FALSE(cluster.create_volume("vault").is_null());

  // The task writes what it sees into its own volume (a walled task sees the test's directory
  // read-only); the test reads it from the hostpath plugin's backend.
  auto a = allocation("secret-user", "vault", "node-1",
                      "tr '\\0' '\\n' < /proc/$$/environ > \"$MOORING_VOLUME_DATA/task-environ.tmp\"; mv "
                      "\"$MOORING_VOLUME_DATA/task-environ.tmp\" \"$MOORING_VOLUME_DATA/task-environ\"; sleep 600");
  a["Task"]["Env"] = {{"MODE", "blue"}};
  a["Task"]["SecretEnv"] = {{"TOKEN", kTaskSecret}};
  const auto id = cluster.run_alloc(a);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; }));
  std::filesystem::path environ_out;
  ASSERT_TRUE(Cluster::eventually([&] {
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(cluster.dir() / "hostpath", ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().filename() == "task-environ") environ_out = it->path();
    return !environ_out.empty();
  }));

  // The task's environment, from /proc/<pid>/environ of the real process.
  std::map<std::string, std::string> env;
  for (const auto& line : test::read_lines(environ_out)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["TOKEN"], kTaskSecret);
  EXPECT_EQ(env["MODE"], "blue");
  EXPECT_EQ(env["PATH"], "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(env["MOORING_ALLOC_ID"], id);
  EXPECT_FALSE(env["MOORING_VOLUME_DATA"].empty());
  EXPECT_FALSE(env["MOORING_LAUNCH_ID"].empty());
  for (const auto& [k, v] : env) {
    const bool expected = k == "TOKEN" || k == "MODE" || k == "PATH" || k == "HOME" || k.starts_with("MOORING_");
    EXPECT_TRUE(expected) << "the task inherited " << k;
    EXPECT_NE(v, kAgentOnly) << k;
  }

  // The API shows SecretEnv's key names only; nothing it serves carries a secret value.
  const auto got = cluster.get("/v1/allocation/" + id);
  EXPECT_EQ(got["Task"]["SecretEnv"], (json{{"TOKEN", "[REDACTED]"}}));
  EXPECT_EQ(got["Task"]["Env"]["MODE"], "blue");
  for (const auto* target : {"/v1/allocations", "/v1/events", "/v1/volumes", "/v1/volume/csi/vault",
                             "/v1/nodes", "/v1/node/node-1"}) {
    const auto body = cluster.request("GET", target).body;
    EXPECT_EQ(body.find(kTaskSecret), std::string::npos) << target;
    EXPECT_EQ(body.find(kVolumeSecret), std::string::npos) << target;
  }
  EXPECT_EQ(cluster.request("GET", "/v1/allocation/" + id).body.find(kTaskSecret), std::string::npos);

  // Not in the control plane's files (state.db and its WAL, keyring aside), nor the agent's
  // (its allocation states), nor any log.
  const auto cp_bytes = all_bytes_under(cluster.dir() / "cp", cluster.dir() / "cp" / "keyring");
  EXPECT_EQ(cp_bytes.find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(cp_bytes.find(kTaskSecret), std::string::npos);
  EXPECT_EQ(all_bytes_under(cluster.node_dir("node-1") / "agent").find(kTaskSecret), std::string::npos);
  EXPECT_EQ(cluster.controlplane_log().find(kTaskSecret), std::string::npos);
  EXPECT_EQ(cluster.controlplane_log().find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(cluster.node_log("node-1").find(kTaskSecret), std::string::npos);

  // Rotation: a new data key seals every row, the keyring file (root keys) is left as it was;
  // after a restart everything still opens.
  const auto keyring_before = test::read_file(cluster.dir() / "cp" / "keyring");
  auto rotated = cluster.request("PUT", "/v1/operator/keyring/rotate");
  ASSERT_EQ(rotated.status, 200u) << rotated.body;
  const auto rotation = json::parse(rotated.body);
  EXPECT_GE(rotation["RowsResealed"].get<int>(), 2);
  EXPECT_EQ(rotation["RetiredKeys"].size(), 1u);
  const auto keyring = json::parse(keyring_before);
  EXPECT_EQ(keyring["Active"], rotation["RootKeyID"]);
  EXPECT_EQ(test::read_file(cluster.dir() / "cp" / "keyring"), keyring_before);
  EXPECT_EQ(cluster.request("PUT", "/v1/operator/keyring/rotate?root=true").status, 409u)
      << "no new root key in the file yet";
  cluster.stop_controlplane();
  cluster.start_controlplane();
  EXPECT_EQ(cluster.get("/v1/allocation/" + id)["Task"]["SecretEnv"], (json{{"TOKEN", "[REDACTED]"}}));
  ASSERT_EQ(cluster.stop_alloc(id).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("vault") == 0; }));
  const auto after = all_bytes_under(cluster.dir() / "cp", cluster.dir() / "cp" / "keyring");
  EXPECT_EQ(after.find(kVolumeSecret), std::string::npos);
  EXPECT_EQ(after.find(kTaskSecret), std::string::npos);
}

}  // namespace
}  // namespace mooring::e2e
