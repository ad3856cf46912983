// The `mooring` CLI against the real control plane and a node agent with its hostpath plugin
// (issue 45): the examples `volume init` writes are accepted by `volume create` and `volume
// register` as written (the register form once its ExternalID is filled in), a second create
// names the commands to use, and an ID prefix shows one volume, lists several, or says none match.
// `mooring node eligibility|drain` (issue 44) with ACLs on: a placement refused naming the
// ineligible node, a drain's progress in `node status`, its cancel, bad input and a token without
// node:write refused naming what is wrong and changing nothing.
// Root only (the agent's plugin bind-mounts).
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

struct CliRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

// The CLI run to its end in `cwd`; with `token`, as MOORING_TOKEN.
CliRun mooring(const Cluster& cluster, const std::vector<std::string>& args, const std::filesystem::path& cwd,
               const std::string& token = "") {
  static int runs = 0;
  const auto out_file = cluster.dir() / ("cli-" + std::to_string(++runs) + ".out");
  std::map<std::string, std::string> env{{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(cluster.http_port())}};
  if (!token.empty()) env["MOORING_TOKEN"] = token;
  test::ChildProcess cli(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"),
      .args = args,
      .env = env,
      .output_file = out_file,
      .working_dir = cwd});
  auto status = cli.wait_for_exit(60s);
  CliRun r;
  r.output = std::filesystem::exists(out_file) ? test::read_file(out_file) : "";
  if (status && status->exited) r.code = status->code;
  return r;
}

void replace_once(const std::filesystem::path& file, const std::string& from, const std::string& to) {
  auto text = test::read_file(file);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << file;
  text.replace(at, from.size(), to);
  test::write_file(file, text);
}

TEST(CliE2e, VolumeInitExamplesAreAcceptedAndPrefixesFindVolumes) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1");
  const auto work = cluster.dir() / "work";
  std::filesystem::create_directories(work);

  // The create form, as written.
  ASSERT_EQ(mooring(cluster, {"volume", "init"}, work).code, 0);
  auto created = mooring(cluster, {"volume", "create", "volume.json"}, work);
  ASSERT_EQ(created.code, 0) << created.output;
  EXPECT_TRUE(created.output.starts_with("Created external volume ")) << created.output;
  EXPECT_TRUE(created.output.ends_with(" with ID data (100.0 MiB)\n")) << created.output;
  const auto volume = cluster.volume("data");
  const std::string external = volume.value("ExternalID", "");
  ASSERT_FALSE(external.empty()) << volume.dump(2);
  EXPECT_EQ(volume["RequestedCapabilities"].size(), 2u) << volume.dump(2);

  // Again: the commands for the volume that exists, not the API's route.
  auto again = mooring(cluster, {"volume", "create", "volume.json"}, work);
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.output.find("volume \"data\" already exists (HTTP 409 from PUT /v1/volume/csi/data/create): "
                              "`mooring volume status data` shows it"),
            std::string::npos)
      << again.output;

  // The register form: the volume forgotten (not deleted), then registered back from the example
  // with the storage's id filled in.
  ASSERT_EQ(cluster.request("DELETE", "/v1/volume/csi/data").status, 200);
  ASSERT_EQ(mooring(cluster, {"volume", "init", "-register", "existing.json"}, work).code, 0);
  replace_once(work / "existing.json", "\"EXTERNAL_ID\"", "\"" + external + "\"");
  auto registered = mooring(cluster, {"volume", "register", "existing.json"}, work);
  ASSERT_EQ(registered.code, 0) << registered.output;
  EXPECT_TRUE(registered.output.ends_with("\n")) << registered.output;
  EXPECT_EQ(cluster.volume("data").value("ExternalID", ""), external);

  // Prefixes: one match shown, several listed, none said.
  ASSERT_FALSE(cluster.create_volume("data-2").is_null());
  auto one = mooring(cluster, {"volume", "status", "data-"}, work);
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find("= data-2\n"), std::string::npos) << one.output;
  auto several = mooring(cluster, {"volume", "status", "dat"}, work);
  EXPECT_EQ(several.code, 1);
  EXPECT_NE(several.output.find("Error: \"dat\" matches 2 volumes; give more of the ID:\n\nID "), std::string::npos)
      << several.output;
  EXPECT_NE(several.output.find("\ndata    "), std::string::npos) << several.output;
  EXPECT_NE(several.output.find("\ndata-2  "), std::string::npos) << several.output;
  auto none = mooring(cluster, {"volume", "status", "zzz"}, work);
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.output, "Error: no volume has the ID or ID prefix \"zzz\" (`mooring volume status` lists them)\n");
}

bool contains(const CliRun& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

TEST(CliE2e, NodeEligibilityAndDrainWithTheirRefusals) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster(ClusterOptions{.acl = true});
  cluster.start_controlplane();
  const auto management = cluster.bootstrap_acl();
  ASSERT_FALSE(management.empty());
  cluster.start_node("node-1");
  cluster.start_node("node-2");
  const auto work = cluster.dir() / "work";
  std::filesystem::create_directories(work);
  auto cli = [&](const std::vector<std::string>& args, const std::string& token = "") {
    return mooring(cluster, args, work, token.empty() ? management : token);
  };
  auto unchanged = [&](const std::string& why) {
    auto node = cluster.get("/v1/node/node-1");
    EXPECT_EQ(node.value("SchedulingEligibility", ""), "eligible") << why << ": " << node.dump();
    EXPECT_TRUE(node["DrainStrategy"].is_null()) << why << ": " << node.dump();
  };

  // Ineligible: a placement pinned to it is refused naming the node; eligible again, it is placed.
  ASSERT_FALSE(cluster.create_volume("pinned").is_null());
  test::write_file(work / "pinned.json", allocation("pinned", "pinned", "node-1", "exec sleep 600").dump());
  auto eligibility = [&](const std::string& flag, const std::string& word) {
    auto r = cli({"node", "eligibility", "node-1", flag});
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(r.output, "Node \"node-1\" scheduling eligibility set: " + word + "\n");
  };
  eligibility("--disable", "ineligible");
  auto refused = cli({"alloc", "run", "pinned.json"});
  EXPECT_EQ(refused.code, 1) << refused.output;
  EXPECT_TRUE(contains(refused, "node \"node-1\": node is ineligible for placement")) << refused.output;
  EXPECT_TRUE(cluster.get("/v1/allocations").empty()) << "the refused submit left an allocation";
  eligibility("--enable", "eligible");
  auto placed = cli({"alloc", "run", "pinned.json"});
  ASSERT_EQ(placed.code, 0) << placed.output;
  EXPECT_TRUE(contains(placed, "submitted to node \"node-1\"")) << placed.output;
  const std::string alloc_id = cluster.get("/v1/allocations")[0].value("ID", "");
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(alloc_id) == "running"; }));

  // Bad input and a token without node:write: a message naming the object and the reason, nothing changed.
  auto unknown = cli({"node", "drain", "nope", "--deadline", "30s"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_TRUE(contains(unknown, "Error: ") && contains(unknown, "node not found: nope")) << unknown.output;
  auto unknown_elig = cli({"node", "eligibility", "nope", "--disable"});
  EXPECT_EQ(unknown_elig.code, 1);
  EXPECT_TRUE(contains(unknown_elig, "node not found: nope")) << unknown_elig.output;
  auto bad = cli({"node", "drain", "node-1", "--deadline", "soon"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(contains(bad, "drain of node \"node-1\"") && contains(bad, "Deadline")) << bad.output;
  // A cancel that would only leave the node as it is has nothing to cancel.
  auto not_draining = cli({"node", "drain", "node-1", "--disable", "--keep-ineligible"});
  EXPECT_EQ(not_draining.code, 1);
  EXPECT_TRUE(contains(not_draining, "node \"node-1\" is not draining")) << not_draining.output;
  const auto reader = cluster.client_token("node-reader", {{"Node", "read"}});
  for (const auto& args : std::vector<std::vector<std::string>>{{"node", "drain", "node-1", "--deadline", "30s"},
                                                                {"node", "eligibility", "node-1", "--disable"}}) {
    auto r = cli(args, reader);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_TRUE(contains(r, "node:write")) << r.output;
  }
  cluster.use_token(management);
  unchanged("after the refusals");

  // A drain: started with its deadline, its progress in `node status`, then canceled.
  auto drain = cli({"node", "drain", "node-1", "--deadline", "30s"});
  ASSERT_EQ(drain.code, 0) << drain.output;
  EXPECT_TRUE(contains(drain, "Node \"node-1\" drain started: deadline 20")) << drain.output;
  EXPECT_TRUE(contains(drain, "`mooring node status node-1` shows its progress")) << drain.output;
  CliRun status;
  EXPECT_TRUE(Cluster::eventually(
      [&] {
        status = cli({"node", "status", "node-1"});
        return contains(status,
                        "draining, 1 allocation(s) left: allocation \"" + alloc_id + "\" runs until the deadline");
      },
      20s))
      << status.output;
  EXPECT_TRUE(contains(status, "ineligible")) << status.output;
  auto cancel = cli({"node", "drain", "node-1", "--disable"});
  ASSERT_EQ(cancel.code, 0) << cancel.output;
  EXPECT_EQ(cancel.output, "Node \"node-1\" drain canceled; scheduling eligibility: eligible\n");
  status = cli({"node", "status", "node-1"});
  EXPECT_TRUE(contains(status, "canceled")) << status.output;
  EXPECT_EQ(cluster.alloc_status(alloc_id), "running") << "a canceled drain stops nothing";
}

}  // namespace
}  // namespace mooring::e2e
