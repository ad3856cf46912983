// The `mooring` CLI against the real control plane and a node agent with its hostpath plugin
// (issue 45): the examples `volume init` writes are accepted by `volume create` and `volume
// register` as written (the register form once its ExternalID is filled in), a second create
// names the commands to use, and an ID prefix shows one volume, lists several, or says none match.
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

CliRun mooring(const Cluster& cluster, const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  static int runs = 0;
  const auto out_file = cluster.dir() / ("cli-" + std::to_string(++runs) + ".out");
  test::ChildProcess cli(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"),
      .args = args,
      .env = {{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(cluster.http_port())}},
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

}  // namespace
}  // namespace mooring::e2e
