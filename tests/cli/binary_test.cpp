// The real `mooring` binary against a fake control plane: tables, -json, the requests it sends,
// error messages and exit codes (0 ok, 1 API/connection error, 2 usage).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/settings.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/cli/fake_api.hpp"

extern char** environ;

namespace mooring::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

class CliBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mooring-cli-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    auto p = dir_ / name;
    std::ofstream(p) << content;
    return p.string();
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Runs the binary with `args`; MOORING_ADDR is removed from the environment unless given.
  RunResult run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                const std::string& cwd = "") {
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      if (!kv.starts_with("MOORING_ADDR=")) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<std::string> argv_s = {MOORING_CLI_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);

    auto out_path = dir_ / "stdout", err_path = dir_ / "stderr";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    pid_t pid = -1;
    int rc = posix_spawn(&pid, MOORING_CLI_BINARY, &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    RunResult r;
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << MOORING_CLI_BINARY << ": " << std::strerror(rc);
      return r;
    }
    // Generous: ASan builds on a shared machine are slow to start.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "mooring did not exit within 60s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    return r;
  }

  RunResult cli(FakeApi& api, std::vector<std::string> args) {
    args.insert(args.begin(), {"-address", api.url()});
    return run(args);
  }

  fs::path dir_;
};

const json kVolumes = json::array({
    {{"ID", "data"}, {"Name", "data"}, {"PluginID", "hostpath"}, {"Schedulable", true},
     {"AccessMode", "single-node-writer"}, {"CurrentReaders", 0}, {"CurrentWriters", 1}},
    {{"ID", "scratch-volume"}, {"Name", "scratch"}, {"PluginID", "hostpath"}, {"Schedulable", false},
     {"AccessMode", ""}, {"CurrentReaders", 0}, {"CurrentWriters", 0}},
});

json volume_detail() {
  return {{"ID", "data"},
          {"Name", "data"},
          {"ExternalID", "ext-data"},
          {"PluginID", "hostpath"},
          {"Provider", "hostpath.mooring.io"},
          {"ProviderVersion", "0.1.0"},
          {"Capacity", 104857600},
          {"RequestedCapacityMin", 104857600},
          {"RequestedCapacityMax", 0},
          {"Schedulable", true},
          {"ControllersHealthy", 1},
          {"ControllersExpected", 1},
          {"NodesHealthy", 2},
          {"NodesExpected", 2},
          {"AccessMode", "single-node-writer"},
          {"AttachmentMode", "file-system"},
          {"RequestedCapabilities", json::array({{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}})},
          {"MountOptions", {{"FSType", "ext4"}, {"MountFlags", json::array({"[REDACTED]"})}}},
          {"Topologies", json::array()},
          {"Claims", json::array({{{"AllocationID", "a1"},
                                   {"NodeID", "node-1"},
                                   {"Mode", "write"},
                                   {"State", "unpublishing"},
                                   {"LastError", "NodeUnpublishVolume: rpc error: code = Unavailable"},
                                   {"NextAttempt", "2099-01-01T00:00:00Z"}}})}};
}

TEST_F(CliBinary, VolumeStatusPrintsAnAlignedTable) {
  FakeApi api;
  api.on("GET", "/v1/volumes", {200, kVolumes.dump()});
  auto r = cli(api, {"volume", "status"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "ID              Name     Plugin ID  Schedulable  Access Mode         Readers  Writers\n"
            "data            data     hostpath   true         single-node-writer  0        1\n"
            "scratch-volume  scratch  hostpath   false        <none>              0        0\n");
}

TEST_F(CliBinary, JsonFlagPrintsTheApiJson) {
  FakeApi api;
  api.on("GET", "/v1/volumes", {200, kVolumes.dump()});
  auto r = cli(api, {"volume", "status", "-json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), kVolumes);
}

TEST_F(CliBinary, VolumeDetailShowsClaimsWithStateLastErrorAndNextAttempt) {
  FakeApi api;
  api.on("GET", "/v1/volume/csi/data", {200, volume_detail().dump()});
  auto r = cli(api, {"volume", "status", "data"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("External ID         = ext-data\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Capacity            = 100.0 MiB\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Nodes Healthy       = 2/2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mount Options       = ext4 flags [\"[REDACTED]\"]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Allocation ID  Node ID  Mode   State         Last Error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a1             node-1   write  unpublishing  NodeUnpublishVolume: rpc error: code = Unavailable  "
                       "2099-01-01T00:00:00Z (in "),
            std::string::npos)
      << r.out;
}

TEST_F(CliBinary, VolumeDetailShowsEachClaimsUsageAndConditionWhenReported) {
  FakeApi api;
  auto v = volume_detail();
  v["Claims"][0]["Usage"] = {{"BytesUsed", 1048576}, {"BytesTotal", 104857600}, {"BytesAvailable", 103809024},
                             {"InodesUsed", 12}, {"InodesTotal", 65536}, {"InodesAvailable", 65524}};
  v["Claims"][0]["Condition"] = {{"Abnormal", true}, {"Message", "disk on fire"}};
  api.on("GET", "/v1/volume/csi/data", {200, v.dump()});
  auto r = cli(api, {"volume", "status", "data"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Volume Health\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.0 MiB / 100.0 MiB used, 12 / 65536 inodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ABNORMAL: disk on fire"), std::string::npos) << r.out;
}

TEST_F(CliBinary, HttpErrorPrintsTheApiMessageAndExitsOne) {
  FakeApi api;
  api.on("GET", "/v1/volume/csi/nope", {404, R"({"Error":"volume not found: nope"})"});
  auto r = cli(api, {"volume", "status", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "Error: volume not found: nope (HTTP 404 from GET /v1/volume/csi/nope)\n");
}

TEST_F(CliBinary, NonJsonErrorBodyIsShownAsAnExcerpt) {
  FakeApi api;
  api.on("GET", "/v1/plugins", {502, "bad gateway\n"});
  auto r = cli(api, {"plugin", "status"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "Error: bad gateway (HTTP 502 from GET /v1/plugins)\n");
}

TEST_F(CliBinary, UnreachableControlPlaneNamesTheAddressAndWhatToSet) {
  // A port that was free a moment ago and has nobody listening.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto port = a.local_endpoint().port();
  a.close();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto r = run({"node", "status"}, {{"MOORING_ADDR", url}});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "Error: cannot reach the control plane at " + url +
                       " (MOORING_ADDR): Connection refused. Is it running, and is MOORING_ADDR its address?\n");
  auto flag = run({"-address", url, "node", "status"});
  EXPECT_NE(flag.err.find(url + " (-address): Connection refused. Is it running, and is -address its address?"),
            std::string::npos)
      << flag.err;
}

TEST_F(CliBinary, WithoutAnAddressTheDefaultIsTriedAndMooringAddrNamed) {
  // The default port may be served on this machine (make run): only when nothing listens there
  // is the message about it.
  boost::asio::io_context io;
  boost::system::error_code ec;
  boost::asio::ip::tcp::socket probe(io);
  probe.connect({boost::asio::ip::make_address("127.0.0.1"), 4700}, ec);
  if (!ec) GTEST_SKIP() << "something listens on 127.0.0.1:4700";
  auto r = run({"node", "status"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot reach the control plane at http://127.0.0.1:4700, the default address: Connection "
                       "refused. Is it running? If it runs elsewhere, set MOORING_ADDR (or -address)"),
            std::string::npos)
      << r.err;
}

TEST_F(CliBinary, PlainHttpToAnHttpsControlPlaneSaysToSetAnHttpsAddress) {
  // What `make run` serves: HTTPS. A plain request gets no answer at all, only a closed connection.
  const auto tls_dir = (dir_ / "tls").string();
  ASSERT_EQ(run({"tls", "ca", "create", "-dir", tls_dir}).code, 0);
  ASSERT_EQ(run({"tls", "cert", "create", "-server", "-dir", tls_dir}).code, 0);
  FakeApi server(FakeApiTls{tls_dir + "/server.pem", tls_dir + "/server-key.pem"});
  server.on("GET", "/v1/nodes", {200, "[]", {}});
  const std::string https = server.url(), http = "http://" + https.substr(8);
  auto r = run({"node", "status"}, {{"MOORING_ADDR", http}});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "Error: the control plane at " + http + " speaks HTTPS: set MOORING_ADDR=" + https +
                       " and MOORING_CACERT (or -ca-cert) to the CA that signed its certificate (make run: "
                       ".mooring/tls/ca.pem)\n");
  auto flag = run({"-address", http, "-ca-cert", tls_dir + "/ca.pem", "node", "status"});
  EXPECT_EQ(flag.err, "Error: the control plane at " + http + " speaks HTTPS: use -address " + https + "\n");
  EXPECT_TRUE(server.requests().empty());
  // As told: the same command works.
  auto fixed = run({"node", "status"}, {{"MOORING_ADDR", https}, {"MOORING_CACERT", tls_dir + "/ca.pem"}});
  EXPECT_EQ(fixed.code, 0) << fixed.err;
  EXPECT_EQ(fixed.out, "No nodes\n");
}

TEST_F(CliBinary, A401NamesMooringTokenNotTheHeader) {
  FakeApi api;
  api.on("GET", "/v1/volumes",
         {401, R"x({"Error":"ACL token required: send it as X-Mooring-Token (or Authorization: Bearer)"})x"});
  auto none = cli(api, {"volume", "status"});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.err,
            "Error: the control plane wants an ACL token: set MOORING_TOKEN (or -token) to a token's Secret ID "
            "(make run: export MOORING_TOKEN=$(cat .mooring/bootstrap-token)) (HTTP 401 from GET /v1/volumes)\n");
  api.on("GET", "/v1/nodes", {401, R"({"Error":"ACL token not found"})"});
  auto wrong = run({"-address", api.url(), "node", "status"}, {{"MOORING_TOKEN", "not-a-token"}});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_EQ(wrong.err,
            "Error: the ACL token given (MOORING_TOKEN or -token) was refused: ACL token not found (HTTP 401 from GET "
            "/v1/nodes)\n");
  EXPECT_EQ(wrong.err.find("not-a-token"), std::string::npos);
  // No ACL token given: another credential's 401 (a used introduction token) keeps the API's
  // reason and blames no ACL token.
  api.on("GET", "/v1/nodes", {401, R"({"Error":"node \"node-9\": the introduction token was used at 2026-01-01"})"});
  auto used = cli(api, {"node", "status"});
  EXPECT_EQ(used.code, 1);
  EXPECT_EQ(used.err,
            "Error: node \"node-9\": the introduction token was used at 2026-01-01 (HTTP 401 from GET /v1/nodes)\n");
}

TEST_F(CliBinary, CreatingAVolumeThatExistsNamesTheCommandsForIt) {
  FakeApi api;
  api.on("PUT", "/v1/volume/csi/data/create",
         {409, R"({"Error":"volume \"data\" already exists; update it with PUT /v1/volume/csi/data"})"});
  api.on("GET", "/v1/volume/csi/data", {200, volume_detail().dump()});
  const auto file = write("v.json", R"({"ID":"data","PluginID":"hostpath"})");
  auto r = cli(api, {"volume", "create", file});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "Error: volume \"data\" already exists (HTTP 409 from PUT /v1/volume/csi/data/create): `mooring volume "
            "status data` shows it; `mooring volume expand data SIZE` grows it; `mooring volume delete data` deletes "
            "it, to create it anew\n");
  // Another conflict, of a volume that is not there, keeps the API's own words.
  api.on("PUT", "/v1/volume/csi/other/create", {409, R"({"Error":"CreateVolume answered with an existing volume: x"})"});
  auto other = cli(api, {"volume", "create", write("o.json", R"({"ID":"other","PluginID":"hostpath"})")});
  EXPECT_EQ(other.err,
            "Error: CreateVolume answered with an existing volume: x (HTTP 409 from PUT /v1/volume/csi/other/create)\n");
}

TEST_F(CliBinary, AVolumePrefixMatchingOneVolumeShowsIt) {
  FakeApi api;
  api.on("GET", "/v1/volumes", {200, kVolumes.dump()});
  api.on("GET", "/v1/volume/csi/data", {200, volume_detail().dump()});
  api.on("GET", "/v1/volume/csi/scr", {404, R"({"Error":"volume \"scr\" not found"})"});
  api.on("GET", "/v1/volume/csi/scratch-volume", {200, R"({"ID":"scratch-volume","Name":"scratch"})"});
  auto r = cli(api, {"volume", "status", "scr"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ID                  = scratch-volume\n"), std::string::npos) << r.out;
  // The exact ID is asked for first, the list only after its 404.
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].target, "/v1/volume/csi/scr");
  EXPECT_EQ(reqs[1].target, "/v1/volumes");
  EXPECT_EQ(reqs[2].target, "/v1/volume/csi/scratch-volume");
  auto exact = cli(api, {"volume", "status", "data"});
  ASSERT_EQ(exact.code, 0) << exact.err;
  EXPECT_EQ(api.requests().size(), 4u);
}

TEST_F(CliBinary, AVolumePrefixMatchingSeveralListsTheCandidates) {
  FakeApi api;
  json volumes = kVolumes;
  volumes.push_back({{"ID", "data-2"}, {"Name", "data-2"}, {"PluginID", "hostpath"}, {"Schedulable", true},
                     {"AccessMode", ""}, {"CurrentReaders", 0}, {"CurrentWriters", 0}});
  api.on("GET", "/v1/volumes", {200, volumes.dump()});
  auto r = cli(api, {"volume", "status", "dat"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "Error: \"dat\" matches 2 volumes; give more of the ID:\n\n"
            "ID      Name    Plugin ID  Schedulable  Access Mode         Readers  Writers\n"
            "data    data    hostpath   true         single-node-writer  0        1\n"
            "data-2  data-2  hostpath   true         <none>              0        0\n");
  auto none = cli(api, {"volume", "status", "zzz"});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.err, "Error: no volume has the ID or ID prefix \"zzz\" (`mooring volume status` lists them)\n");
  // A failure that is not "not found" is not searched for.
  api.on("GET", "/v1/volume/csi/secret", {403, R"({"Error":"permission denied: read-volume"})"});
  auto denied = cli(api, {"volume", "status", "secret"});
  EXPECT_EQ(denied.err, "Error: permission denied: read-volume (HTTP 403 from GET /v1/volume/csi/secret)\n");
  for (const auto& req : api.requests()) EXPECT_NE(req.target, "/v1/volume/csi/data") << "a candidate was fetched";
}

TEST_F(CliBinary, NodeAndPluginPrefixesWorkAsVolumeOnes) {
  FakeApi api;
  api.on("GET", "/v1/nodes", {200, R"([{"ID":"node-1","Name":"n1","Status":"ready"},{"ID":"node-2","Name":"n2","Status":"down"}])"});
  api.on("GET", "/v1/node/node-2", {200, R"({"ID":"node-2","Name":"n2","Status":"down"})"});
  api.on("GET", "/v1/plugins", {200, R"([{"ID":"hostpath","Provider":"hostpath.mooring.io"},{"ID":"hostpath-b"}])"});
  api.on("GET", "/v1/plugin/csi/hostpath-b", {200, R"({"ID":"hostpath-b"})"});
  auto several = cli(api, {"node", "status", "node"});
  EXPECT_EQ(several.code, 1);
  EXPECT_NE(several.err.find("Error: \"node\" matches 2 nodes; give more of the ID:\n\nID      Name  Address  Status"),
            std::string::npos)
      << several.err;
  auto one = cli(api, {"node", "status", "node-2"});
  ASSERT_EQ(one.code, 0) << one.err;
  auto by_prefix = cli(api, {"node", "status", "node-"});
  EXPECT_EQ(by_prefix.code, 1);
  auto plugin = cli(api, {"plugin", "status", "hostpath-"});
  ASSERT_EQ(plugin.code, 0) << plugin.err;
  EXPECT_NE(plugin.out.find("ID                  = hostpath-b"), std::string::npos) << plugin.out;
  auto plugins = cli(api, {"plugin", "status", "host"});
  EXPECT_NE(plugins.err.find("\"host\" matches 2 plugins"), std::string::npos) << plugins.err;
  auto no_plugin = cli(api, {"plugin", "status", "nfs"});
  EXPECT_NE(no_plugin.err.find("no plugin has the ID or ID prefix \"nfs\" (`mooring plugin status` lists them)"),
            std::string::npos)
      << no_plugin.err;
}

TEST_F(CliBinary, MooringAddrIsUsedAndTheFlagWins) {
  FakeApi api, other;
  api.on("GET", "/v1/nodes", {200, "[]"});
  auto r = run({"node", "status"}, {{"MOORING_ADDR", api.url()}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "No nodes\n");
  auto flag = run({"-address", api.url(), "node", "status"}, {{"MOORING_ADDR", other.url()}});
  EXPECT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(other.requests().size(), 0u);
}

TEST_F(CliBinary, BadUsagePrintsTheCommandsUsageAndExitsTwo) {
  auto r = run({"volume", "detach", "only-one"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("Error: volume detach: missing arguments (expected ID NODE)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: mooring volume detach ID NODE"), std::string::npos) << r.err;
  auto unknown = run({"volume", "status", "-bogus"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown flag -bogus"), std::string::npos);
  auto bad_addr = run({"-address", "ftp://x:1", "node", "status"});
  EXPECT_EQ(bad_addr.code, 2);
  EXPECT_NE(bad_addr.err.find("only https:// and http://"), std::string::npos);
  auto help = run({"volume", "-h"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("volume snapshot create VOLUME NAME"), std::string::npos);
}

TEST_F(CliBinary, RegisterWrapsABareVolumeAndPutsItOnItsPath) {
  FakeApi api;
  api.on("PUT", "/v1/volume/csi/data", {200, R"({"Index":5,"Volumes":[{"ID":"data"}]})"});
  json vol = {{"ID", "data"}, {"PluginID", "hostpath"}, {"ExternalID", "data"},
              {"RequestedCapabilities", json::array({{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}})}};
  auto r = cli(api, {"-secrets", "token=s3cret", "volume", "register", write("v.json", vol.dump())});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Volume \"data\" registered\n");
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(json::parse(reqs[0].body), json({{"Volumes", json::array({vol})}}));
  // Secrets travel in the body for register; the header is for create/delete/snapshot only.
  EXPECT_FALSE(reqs[0].headers.contains("x-mooring-csi-secrets"));
}

TEST_F(CliBinary, RegisterOfSeveralVolumesUsesOneTransaction) {
  FakeApi api;
  api.on("PUT", "/v1/volumes", {200, R"({"Index":6})"});
  json body = {{"Volumes", json::array({{{"ID", "a"}}, {{"ID", "b"}}})}};
  auto r = cli(api, {"volume", "register", write("v.json", body.dump())});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Volume \"a\" registered\nVolume \"b\" registered\n");
  EXPECT_EQ(json::parse(api.requests().at(0).body), body);
}

TEST_F(CliBinary, RegisterOfABadFileFailsBeforeAnyRequest) {
  FakeApi api;
  auto r = cli(api, {"volume", "register", write("v.json", "{\"ID\": ")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not valid JSON"), std::string::npos) << r.err;
  auto missing = cli(api, {"volume", "register", (dir_ / "absent.json").string()});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
  EXPECT_TRUE(api.requests().empty());
}

TEST_F(CliBinary, CreateSendsSecretsInTheHeaderAndNeverPrintsThem) {
  FakeApi api;
  api.on("PUT", "/v1/volume/csi/scratch/create",
         {200, R"({"Volumes":[{"ID":"scratch","ExternalID":"scratch-123","Capacity":1073741824}]})"});
  json vol = {{"ID", "scratch"}, {"PluginID", "hostpath"}};
  auto r = cli(api, {"volume", "create", "-secrets", "user=admin,pass=hunter2", write("v.json", vol.dump())});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Created external volume scratch-123 with ID scratch (1.0 GiB)\n");
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].headers["x-mooring-csi-secrets"], "pass=hunter2,user=admin");
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos);
  EXPECT_EQ(r.err.find("hunter2"), std::string::npos);
}

TEST_F(CliBinary, DeleteDeregisterAndDetachUseTheirEndpoints) {
  FakeApi api;
  api.on("DELETE", "/v1/volume/csi/data/delete", {200, "{}"});
  api.on("DELETE", "/v1/volume/csi/data?force=true", {200, R"({"Index":9})"});
  api.on("DELETE", "/v1/volume/csi/data/detach?node=node-1", {200, "{}"});
  EXPECT_EQ(cli(api, {"volume", "delete", "-secrets", "k=v", "data"}).code, 0);
  auto dereg = cli(api, {"volume", "deregister", "-force", "data"});
  EXPECT_EQ(dereg.code, 0) << dereg.err;
  EXPECT_EQ(dereg.out, "Successfully deregistered volume \"data\"\n");
  auto detach = cli(api, {"volume", "detach", "data", "node-1"});
  EXPECT_EQ(detach.code, 0) << detach.err;
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 3u);
  api.on("DELETE", "/v1/volume/csi/data?purge=true", {202, R"({"Index":10,"Deregistering":true})"});
  auto purge = cli(api, {"volume", "deregister", "-purge", "data"});
  EXPECT_EQ(purge.code, 0) << purge.err;
  EXPECT_NE(purge.out.find("deregistered once its claims are released"), std::string::npos) << purge.out;
  EXPECT_EQ(cli(api, {"volume", "deregister", "-purge", "-force", "data"}).code, 2);
  EXPECT_EQ(reqs[0].headers["x-mooring-csi-secrets"], "k=v");
  EXPECT_FALSE(reqs[2].headers.contains("x-mooring-csi-secrets"));
}

TEST_F(CliBinary, ExpandReRegistersWithAHigherMinimumAndKeepsTheMaximum) {
  FakeApi api;
  json v = volume_detail();
  v["RequestedCapacityMax"] = 1073741824;
  api.on("GET", "/v1/volume/csi/data", {200, v.dump()});
  api.on("PUT", "/v1/volume/csi/data", {200, R"({"Index":7,"Volumes":[{"ID":"data","Capacity":209715200}]})"});
  auto r = cli(api, {"volume", "expand", "data", "200MiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Volume \"data\": requested minimum capacity is now 200.0 MiB; capacity 200.0 MiB\n");
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  json sent = json::parse(reqs[1].body)["Volumes"][0];
  EXPECT_EQ(sent["RequestedCapacityMin"], 209715200);
  EXPECT_EQ(sent["RequestedCapacityMax"], 1073741824);
  EXPECT_EQ(sent["ExternalID"], "ext-data");
  EXPECT_EQ(sent["RequestedCapabilities"], v["RequestedCapabilities"]);
  // Redacted mount flags and absent secrets are not sent back: the server keeps what it stored.
  EXPECT_FALSE(sent.contains("MountOptions"));
  EXPECT_FALSE(sent.contains("Secrets"));
}

TEST_F(CliBinary, ExpandRefusesToShrinkOrPassTheMaximum) {
  FakeApi api;
  json v = volume_detail();
  v["RequestedCapacityMax"] = 209715200;
  api.on("GET", "/v1/volume/csi/data", {200, v.dump()});
  auto shrink = cli(api, {"volume", "expand", "data", "50Mi"});
  EXPECT_EQ(shrink.code, 1);
  EXPECT_NE(shrink.err.find("volumes only grow"), std::string::npos) << shrink.err;
  auto over = cli(api, {"volume", "expand", "data", "1Gi"});
  EXPECT_EQ(over.code, 1);
  EXPECT_NE(over.err.find("RequestedCapacityMax"), std::string::npos) << over.err;
  auto junk = cli(api, {"volume", "expand", "data", "lots"});
  EXPECT_EQ(junk.code, 1);
  for (const auto& req : api.requests()) EXPECT_EQ(req.method, "GET");
}

TEST_F(CliBinary, SnapshotCreateNamesThePluginOfTheVolume) {
  FakeApi api;
  api.on("GET", "/v1/volume/csi/data", {200, volume_detail().dump()});
  api.on("PUT", "/v1/volumes/snapshot",
         {200, R"({"Snapshots":[{"ID":"snap-1","SourceVolumeID":"data","PluginID":"hostpath","SizeBytes":1024,
                   "CreateTime":"2026-01-02T03:04:05Z","IsReady":true}]})"});
  auto r = cli(api, {"volume", "snapshot", "create", "-secrets", "a=b", "data", "nightly"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("snap-1       hostpath   data       1.0 KiB  2026-01-02T03:04:05Z  true"), std::string::npos) << r.out;
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(json::parse(reqs[1].body),
            json({{"Snapshots", json::array({{{"SourceVolumeID", "data"}, {"Name", "nightly"}, {"PluginID", "hostpath"}}})}}));
  EXPECT_EQ(reqs[1].headers["x-mooring-csi-secrets"], "a=b");
}

TEST_F(CliBinary, SnapshotListAsksEveryPluginAndWarnsAboutOnesThatCannot) {
  FakeApi api;
  api.on("GET", "/v1/plugins", {200, R"([{"ID":"hostpath"},{"ID":"nosnap"}])"});
  api.on("GET", "/v1/volumes/snapshot?plugin_id=hostpath", {200, R"({"Snapshots":[{"ID":"snap-1","SourceVolumeID":"data"}]})"});
  api.on("GET", "/v1/volumes/snapshot?plugin_id=nosnap", {400, R"({"Error":"plugin \"nosnap\" cannot list snapshots"})"});
  auto r = cli(api, {"volume", "snapshot", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("snap-1       hostpath   data"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Warning: plugin \"nosnap\": plugin \"nosnap\" cannot list snapshots"), std::string::npos) << r.err;
  auto one = cli(api, {"volume", "snapshot", "list", "-plugin", "nosnap"});
  EXPECT_EQ(one.code, 1);
}

TEST_F(CliBinary, GroupSnapshotCreateListAndDeleteSendTheGroupAndShowItsMembers) {
  FakeApi api;
  const std::string group = R"({"ID":"group-1","PluginID":"hostpath","IsReady":true,"Name":"nightly",
    "Snapshots":[{"ID":"snap-a","SourceVolumeID":"a","PluginID":"hostpath","GroupSnapshotID":"group-1","IsReady":true},
                 {"ID":"snap-b","SourceVolumeID":"b","PluginID":"hostpath","GroupSnapshotID":"group-1","IsReady":true}]})";
  api.on("PUT", "/v1/volumes/group-snapshot", {200, R"({"GroupSnapshot":)" + group + "}"});
  api.on("GET", "/v1/volumes/group-snapshot?plugin_id=hostpath", {200, R"({"GroupSnapshots":[)" + group + "]}"});
  api.on("DELETE", "/v1/volumes/group-snapshot?plugin_id=hostpath&group_snapshot_id=group-1", {200, R"({"Index":7})"});
  auto made = cli(api, {"volume", "group-snapshot", "create", "-secrets", "k=v", "nightly", "a", "b"});
  ASSERT_EQ(made.code, 0) << made.err;
  EXPECT_NE(made.out.find("Created group snapshot \"nightly\" (group-1) of 2 volumes"), std::string::npos) << made.out;
  EXPECT_NE(made.out.find("snap-b"), std::string::npos) << made.out;
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(json::parse(reqs[0].body),
            json({{"GroupSnapshot", {{"Name", "nightly"}, {"SourceVolumeIDs", json::array({"a", "b"})}}}}));
  EXPECT_EQ(reqs[0].headers["x-mooring-csi-secrets"], "k=v");

  auto listed = cli(api, {"volume", "group-snapshot", "list", "-plugin", "hostpath"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("group-1"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("snap-a"), std::string::npos) << listed.out;

  auto deleted = cli(api, {"volume", "group-snapshot", "delete", "hostpath", "group-1"});
  ASSERT_EQ(deleted.code, 0) << deleted.err;
  EXPECT_NE(deleted.out.find("Deleted group snapshot \"group-1\""), std::string::npos) << deleted.out;
  auto few = cli(api, {"volume", "group-snapshot", "create", "nightly"});
  EXPECT_EQ(few.code, 2);
}

TEST_F(CliBinary, AllocStopAndStatusTakeARunningNameOrAnIdPrefix) {
  FakeApi api;
  api.on("GET", "/v1/allocations",
         {200, R"([{"ID":"0a11","Name":"writer","DesiredStatus":"stop","ClientStatus":"complete"},
                   {"ID":"0b22","Name":"writer","DesiredStatus":"run","ClientStatus":"running"},
                   {"ID":"0b33","Name":"reader","DesiredStatus":"run","ClientStatus":"running"}])"});
  api.on("POST", "/v1/allocation/0b22/stop", {200, R"({"ID":"0b22","Index":4})"});
  api.on("GET", "/v1/allocation/0b33", {200, R"({"ID":"0b33","Name":"reader","ClientStatus":"running"})"});
  auto stop = cli(api, {"alloc", "stop", "writer"});
  ASSERT_EQ(stop.code, 0) << stop.err;
  EXPECT_NE(stop.out.find("\"0b22\""), std::string::npos) << stop.out;
  auto one = cli(api, {"alloc", "status", "0b3"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("reader"), std::string::npos) << one.out;
  auto ambiguous = cli(api, {"alloc", "stop", "0b"});
  EXPECT_NE(ambiguous.code, 0);
  EXPECT_EQ(ambiguous.err,
            "Error: \"0b\" matches 2 allocations; give more of the ID:\n\n"
            "ID    Name    Node ID  Desired  Status\n"
            "0b22  writer           run      running\n"
            "0b33  reader           run      running\n");
  auto unknown = cli(api, {"alloc", "stop", "nobody"});
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.err.find("no allocation has the ID, ID prefix or running name \"nobody\""), std::string::npos)
      << unknown.err;
}

TEST_F(CliBinary, AllocRunWrapsABareAllocationAndStopAndStatusWork) {
  FakeApi api;
  api.on("POST", "/v1/allocations", {200, R"({"ID":"a1b2","NodeID":"node-1","Index":3})"});
  api.on("POST", "/v1/allocation/a1b2/stop", {200, R"({"ID":"a1b2","Index":4})"});
  api.on("GET", "/v1/allocations",
         {200, R"([{"ID":"a1b2","Name":"writer","NodeID":"node-1","DesiredStatus":"stop","ClientStatus":"complete"}])"});
  api.on("GET", "/v1/allocation/a1b2",
         {200, R"({"ID":"a1b2","Name":"writer","NodeID":"node-1","DesiredStatus":"run","ClientStatus":"running",
                   "Task":{"Command":"/bin/sh","Args":["-c","true"]},
                   "Volumes":{"data":{"Source":"data","AccessMode":"single-node-writer","AttachmentMode":"file-system","ReadOnly":false}},
                   "Events":[{"Type":"Received","Message":"assigned to node node-1","Time":"2026-01-02T03:04:05Z"}]})"});
  json alloc = {{"Name", "writer"}, {"Task", {{"Command", "/bin/true"}}}};
  auto run_r = cli(api, {"alloc", "run", write("a.json", alloc.dump())});
  ASSERT_EQ(run_r.code, 0) << run_r.err;
  EXPECT_EQ(run_r.out, "Allocation \"a1b2\" submitted to node \"node-1\"\n");
  EXPECT_EQ(json::parse(api.requests().at(0).body), json({{"Allocation", alloc}}));
  EXPECT_EQ(cli(api, {"alloc", "stop", "a1b2"}).code, 0);
  auto list = cli(api, {"alloc", "status"});
  EXPECT_EQ(list.out, "ID    Name    Node ID  Desired  Status\na1b2  writer  node-1   stop     complete\n");
  auto one = cli(api, {"alloc", "status", "a1b2"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("Task           = /bin/sh -c true\n"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("data  data    single-node-writer  file-system      false"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("Received  assigned to node node-1"), std::string::npos) << one.out;
}

// Every write carries an Idempotency-Key; a write that got no usable answer is sent again with the
// same key (so the control plane acts once), and a new command gets a new key.
TEST_F(CliBinary, WritesCarryAnIdempotencyKeyKeptAcrossRetries) {
  FakeApi api;
  api.on("GET", "/v1/allocations",
         {200, R"([{"ID":"a1b2","Name":"w1","DesiredStatus":"run","ClientStatus":"running"},
                   {"ID":"c3d4","Name":"w2","DesiredStatus":"run","ClientStatus":"running"}])"});
  api.on("POST", "/v1/allocation/a1b2/stop", {503, R"({"Error":"state is not loaded yet"})"});
  api.on("POST", "/v1/allocation/c3d4/stop", {200, R"({"ID":"c3d4","Index":4})"});
  EXPECT_EQ(cli(api, {"alloc", "stop", "a1b2"}).code, 1);
  EXPECT_EQ(cli(api, {"alloc", "stop", "c3d4"}).code, 0);
  std::vector<std::string> first_keys;
  std::string second_key;
  for (const auto& r : api.requests()) {
    if (r.target == "/v1/allocation/a1b2/stop") first_keys.push_back(r.headers.count("idempotency-key") ? r.headers.at("idempotency-key") : "");
    if (r.target == "/v1/allocation/c3d4/stop") second_key = r.headers.count("idempotency-key") ? r.headers.at("idempotency-key") : "";
  }
  ASSERT_EQ(first_keys.size(), 4u) << "a 503 is retried";
  EXPECT_EQ(first_keys[0].size(), 32u);
  for (const auto& k : first_keys) EXPECT_EQ(k, first_keys[0]) << "the retries keep the key";
  EXPECT_EQ(second_key.size(), 32u);
  EXPECT_NE(second_key, first_keys[0]);
  for (const auto& r : api.requests()) {
    if (r.method == "GET") {
      EXPECT_FALSE(r.headers.count("idempotency-key"));
    }
  }
}

TEST_F(CliBinary, NodePurgeUsesItsEndpointAndSaysWhatWasLost) {
  FakeApi api;
  api.on("DELETE", "/v1/node/node-9", {200, R"({"Index":12,"LostAllocations":2})"});
  api.on("DELETE", "/v1/node/node-8", {409, R"({"Error":"node \"node-8\" still holds claims on volumes \"data\""})"});
  auto ok = cli(api, {"node", "purge", "node-9"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out, "Node \"node-9\" purged; 2 of its allocations marked lost\n");
  auto refused = cli(api, {"node", "purge", "node-8"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("still holds claims"), std::string::npos) << refused.err;
}

TEST_F(CliBinary, PluginAndNodeDetails) {
  FakeApi api;
  api.on("GET", "/v1/plugin/csi/hostpath",
         {200, R"({"ID":"hostpath","Provider":"hostpath.mooring.io","Version":"0.1.0","ControllerRequired":true,
                   "ControllersHealthy":1,"ControllersExpected":1,"NodesHealthy":1,"NodesExpected":2,
                   "Controllers":{"node-1":{"Healthy":true,"HealthDescription":"ok"}},
                   "Nodes":{"node-1":{"Healthy":true,"HealthDescription":"ok","NodeInfo":{"MaxVolumes":0,"RequiresNodeStageVolume":true,
                                      "AccessibleTopology":{"Segments":{"zone":"a"}}}},
                            "node-2":{"Healthy":false,"HealthDescription":"probe failed: unavailable"}}})"});
  api.on("GET", "/v1/node/node-1",
         {200, R"({"ID":"node-1","Name":"n1","Address":"10.0.0.1:4702","Status":"ready","Attributes":{"os":"linux"},
                   "Plugins":{"hostpath":{"Type":"monolith","Healthy":true,"HealthDescription":"ok","Provider":"hostpath.mooring.io","Version":"0.1.0"}},
                   "Events":[{"Timestamp":"2026-01-02T03:04:05Z","Subsystem":"CSI","Message":"plugin hostpath healthy"}]})"});
  auto p = cli(api, {"plugin", "status", "hostpath"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("Nodes Healthy       = 1/2\n"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("node-1   true     ok                         unlimited    true    zone=a"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("node-2   false    probe failed: unavailable  unlimited"), std::string::npos) << p.out;
  auto n = cli(api, {"node", "status", "node-1"});
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_NE(n.out.find("Attributes     = os=linux\n"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("hostpath   monolith  true     ok"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("plugin hostpath healthy"), std::string::npos) << n.out;
}

TEST_F(CliBinary, EventsWaitWithoutIndexStartsFromTheCurrentIndex) {
  FakeApi api;
  api.on("GET", "/v1/events?per_page=1", {200, "[]", {{"X-Mooring-Index", "42"}}});
  api.on("GET", "/v1/events?index=42&wait=2000ms",
         {200, R"([{"Index":43,"Time":"2026-01-02T03:04:05Z","Topic":"Volume","Type":"VolumeRegistered","Key":"data",
                    "Message":"registered volume \"data\""}])"});
  auto r = cli(api, {"events", "-wait", "2s"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Index  Time                  Topic   Type              Key   Message\n"
            "43     2026-01-02T03:04:05Z  Volume  VolumeRegistered  data  registered volume \"data\"\n");
  auto bad = cli(api, {"events", "-index", "x"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("-index: expected a non-negative integer"), std::string::npos);
}

// `mooring tls`: local files only, so no fake API is needed.
TEST_F(CliBinary, TlsCaAndCertCreateWriteSignedPairs0600) {
  const auto tls_dir = (dir_ / "tls").string();
  auto ca = run({"tls", "ca", "create", "-dir", tls_dir, "-days", "30"});
  ASSERT_EQ(ca.code, 0) << ca.err;
  EXPECT_NE(ca.out.find("ca.pem"), std::string::npos) << ca.out;
  auto agent = run({"tls", "cert", "create", "-agent", "-node-id", "node-1", "-dir", tls_dir, "-additional-dnsname",
                    "node1.example.com", "-additional-ipaddress", "10.1.2.3", "-additional-ipaddress", "::1"});
  ASSERT_EQ(agent.code, 0) << agent.err;
  EXPECT_NE(agent.out.find("spiffe://mooring/node/node-1"), std::string::npos) << agent.out;
  auto server = run({"tls", "cert", "create", "-server", "-dir", tls_dir});
  ASSERT_EQ(server.code, 0) << server.err;
  auto client = run({"tls", "cert", "create", "-cli", "-ca", tls_dir + "/ca.pem", "-ca-key", tls_dir + "/ca-key.pem",
                     "-dir", (dir_ / "elsewhere").string()});
  ASSERT_EQ(client.code, 0) << client.err;
  for (const auto& f : {"tls/ca.pem", "tls/ca-key.pem", "tls/agent-node-1.pem", "tls/agent-node-1-key.pem",
                        "tls/server.pem", "tls/server-key.pem", "elsewhere/cli.pem", "elsewhere/cli-key.pem"}) {
    std::error_code ec;
    const auto perms = fs::status(dir_ / f, ec).permissions();
    ASSERT_FALSE(ec) << f;
    EXPECT_EQ(perms, fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  const auto pem = slurp(dir_ / "tls/agent-node-1.pem");
  EXPECT_NE(pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(slurp(dir_ / "tls/agent-node-1-key.pem").find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST_F(CliBinary, TlsBadInputIsRefusedAndWritesNothing) {
  const auto tls_dir = (dir_ / "tls").string();
  ASSERT_EQ(run({"tls", "ca", "create", "-dir", tls_dir}).code, 0);
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"tls", "cert", "create", "-dir", tls_dir}, 2, "exactly one of -server, -agent or -cli"},
      {{"tls", "cert", "create", "-server", "-cli", "-dir", tls_dir}, 2, "exactly one of"},
      {{"tls", "cert", "create", "-agent", "-dir", tls_dir}, 2, "-agent needs -node-id"},
      {{"tls", "cert", "create", "-agent", "-node-id", "a/b", "-dir", tls_dir}, 2, "-node-id: \"a/b\""},
      {{"tls", "cert", "create", "-server", "-node-id", "n1", "-dir", tls_dir}, 2, "-node-id goes with -agent only"},
      {{"tls", "cert", "create", "-server", "-days", "0", "-dir", tls_dir}, 2, "-days: expected a positive number"},
      {{"tls", "cert", "create", "-server", "-additional-ipaddress", "1.2.3.999", "-dir", tls_dir}, 1,
       "\"1.2.3.999\" is not an IP address"},
      {{"tls", "cert", "create", "-server", "-additional-dnsname", "bad name", "-dir", tls_dir}, 1,
       "\"bad name\" is not a DNS name"},
      {{"tls", "cert", "create", "-server", "-dir", (dir_ / "no-ca").string()}, 1, "ca.pem does not exist"},
      {{"tls", "ca", "create", "-dir", tls_dir}, 1, "already exists"},
      {{"tls", "ca", "create", "-days", "soon", "-dir", tls_dir}, 2, "-days: expected a positive number"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args.back() << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  // Only the CA is there: no failed command left a file behind.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tls_dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"ca-key.pem", "ca.pem"}));
}

TEST_F(CliBinary, OverHttpsOnlyTheControlPlanesCertificateIsTrusted) {
  // An agent's certificate is signed by the same CA and names localhost too: on a node it would
  // pass a host-name check alone. The CLI wants spiffe://mooring/server from a Mooring CA.
  const auto tls_dir = (dir_ / "tls").string();
  ASSERT_EQ(run({"tls", "ca", "create", "-dir", tls_dir}).code, 0);
  ASSERT_EQ(run({"tls", "cert", "create", "-server", "-dir", tls_dir}).code, 0);
  ASSERT_EQ(run({"tls", "cert", "create", "-agent", "-node-id", "node-1", "-dir", tls_dir}).code, 0);
  const std::map<std::string, std::string> env = {{"MOORING_CACERT", tls_dir + "/ca.pem"}};

  FakeApi server(FakeApiTls{tls_dir + "/server.pem", tls_dir + "/server-key.pem"});
  server.on("GET", "/v1/volumes", {200, "[]", {}});
  auto ok = run({"-address", server.url(), "volume", "status"}, env);
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(server.requests().size(), 1u);

  FakeApi impostor(FakeApiTls{tls_dir + "/agent-node-1.pem", tls_dir + "/agent-node-1-key.pem"});
  impostor.on("GET", "/v1/volumes", {200, "[]", {}});
  auto refused = run({"-address", impostor.url(), "volume", "status"}, env);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.err.find("TLS handshake failed"), std::string::npos) << refused.err;
  EXPECT_TRUE(impostor.requests().empty()) << "the request reached a server that is not the control plane";
}

// `mooring tls cert request` (node enrollment) against canned answers: the CSR and the
// introduction token of -intro-token-file go to the node's enroll endpoint; what comes back is
// written only when it is a certificate for the key made here, from the CA it came with; a refusal
// writes nothing, not even the key. -check-only asks nothing.
TEST_F(CliBinary, TlsCertRequestSendsOnlyACsrAndWritesTheAnswerForItsKey) {
  const auto tls_dir = dir_ / "node-tls";
  const auto token_file = write("intro-token", "intro-secret\n");
  // The fake cannot sign, so the "control plane" answers with a certificate for another key.
  auto ca = tls::create_ca({});
  ASSERT_TRUE(ca);
  auto foreign = tls::create_certificate(*ca, {.identity = {tls::Role::agent, "node-1"}});
  ASSERT_TRUE(foreign);
  FakeApi api;
  api.on("POST", "/v1/node/node-1/enroll",
         {200, nlohmann::json{{"NodeID", "node-1"}, {"Certificate", foreign->cert_pem}, {"CA", ca->cert_pem}}.dump()});
  api.on("POST", "/v1/node/node-2/enroll", {409, R"x({"Error":"node \"node-2\" is live (status ready)"})x"});
  auto r = run({"-address", api.url(), "tls", "cert", "request", "-node-id", "node-1", "-dir", tls_dir.string(),
                "-intro-token-file", token_file});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("not for spiffe://mooring/node/node-1 and this key; nothing was written"), std::string::npos) << r.err;
  auto refused = run({"-address", api.url(), "tls", "cert", "request", "-node-id", "node-2", "-dir", tls_dir.string()},
                     {{"MOORING_TOKEN", "mgmt-secret"}});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("is live"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(tls_dir));
  auto check = run({"-address", api.url(), "tls", "cert", "request", "-node-id", "node-1", "-dir", tls_dir.string(),
                    "-renew-within", "10m", "-check-only"});
  EXPECT_EQ(check.code, 1);
  EXPECT_NE(check.out.find("needs enrolling"), std::string::npos) << check.out;

  const auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);  // -check-only asked nothing
  EXPECT_FALSE(reqs[0].headers.contains("x-mooring-token"));
  const auto body = nlohmann::json::parse(reqs[0].body);
  EXPECT_EQ(body.value("IntroToken", ""), "intro-secret");
  auto csr = tls::inspect_csr(body.value("CSR", ""));
  ASSERT_TRUE(csr) << csr.error();
  EXPECT_EQ(csr->uris, std::vector<std::string>{"spiffe://mooring/node/node-1"});
  EXPECT_EQ(reqs[0].body.find("PRIVATE KEY"), std::string::npos);
  // Without an introduction token, the management token re-keys (the header, no IntroToken).
  EXPECT_EQ(reqs[1].headers.at("x-mooring-token"), "mgmt-secret");
  EXPECT_FALSE(nlohmann::json::parse(reqs[1].body).contains("IntroToken"));

  EXPECT_EQ(run({"tls", "cert", "request", "-dir", tls_dir.string()}).code, 2);
  auto bad = run({"tls", "cert", "request", "-node-id", "../x", "-dir", tls_dir.string()});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("-node-id: \"../x\""), std::string::npos) << bad.err;
  EXPECT_EQ(run({"tls", "cert", "request", "-node-id", "n", "-renew-within", "soon"}).code, 2);
  auto missing = run({"-address", api.url(), "tls", "cert", "request", "-node-id", "node-1", "-dir", tls_dir.string(),
                      "-intro-token-file", (dir_ / "none").string()});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(api.requests().size(), 2u);
}

// `mooring node intro create` prints the token once, or writes it to a 0600 file and prints only
// its accessor; `mooring node purge -force` asks for the forced purge.
TEST_F(CliBinary, NodeIntroCreateHandsTheTokenOnceAndPurgeForceAsksForIt) {
  FakeApi api;
  const json made = {{"NodeID", "node-3"}, {"AccessorID", "acc-3"}, {"SecretID", "sec-3"},
                     {"ExpirationTime", "2026-01-01T01:00:00Z"}};
  api.on("POST", "/v1/node/node-3/intro", {200, made.dump()});
  api.on("DELETE", "/v1/node/node-3?force=true", {200, R"({"Index":7,"LostAllocations":0})"});
  auto printed = cli(api, {"node", "intro", "create", "-node-id", "node-3", "-ttl", "15m"});
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_NE(printed.out.find("sec-3"), std::string::npos) << printed.out;
  EXPECT_NE(printed.out.find("acc-3"), std::string::npos) << printed.out;
  const auto out_file = dir_ / "node-3.token";
  auto written = cli(api, {"node", "intro", "create", "-node-id", "node-3", "-out", out_file.string()});
  ASSERT_EQ(written.code, 0) << written.err;
  EXPECT_EQ(written.out.find("sec-3"), std::string::npos) << written.out;
  EXPECT_EQ(slurp(out_file), "sec-3\n");
  struct stat st {};
  ASSERT_EQ(::stat(out_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(cli(api, {"node", "intro", "create"}).code, 2);
  auto purge = cli(api, {"node", "purge", "-force", "node-3"});
  EXPECT_EQ(purge.code, 0) << purge.err;
  const auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(json::parse(reqs[0].body), (json{{"TTL", "15m"}}));
  EXPECT_EQ(reqs[2].method, "DELETE");
  EXPECT_EQ(reqs[2].target, "/v1/node/node-3?force=true");
}

TEST_F(CliBinary, TheTokenComesFromMooringTokenAndTheFlagWins) {
  FakeApi api;
  api.on("GET", "/v1/nodes", {200, "[]"});
  ASSERT_EQ(run({"-address", api.url(), "node", "status"}, {{"MOORING_TOKEN", "env-secret"}}).code, 0);
  ASSERT_EQ(run({"-address", api.url(), "-token", "flag-secret", "node", "status"}, {{"MOORING_TOKEN", "env-secret"}}).code,
            0);
  ASSERT_EQ(run({"-address", api.url(), "node", "status"}).code, 0);
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].headers["x-mooring-token"], "env-secret");
  EXPECT_EQ(reqs[1].headers["x-mooring-token"], "flag-secret");
  EXPECT_FALSE(reqs[2].headers.contains("x-mooring-token"));
}

TEST_F(CliBinary, AclBootstrapAndTokenCreatePrintTheSecretOnce) {
  FakeApi api;
  const json token = {{"AccessorID", "acc-1"}, {"SecretID", "sec-1"}, {"Name", "ro"}, {"Type", "client"},
                      {"Policies", {"reader", "ops"}}, {"CreateTime", "2026-01-01T00:00:00Z"}, {"ExpirationTime", nullptr}};
  api.on("POST", "/v1/acl/bootstrap", {200, token.dump()});
  api.on("PUT", "/v1/acl/token", {200, token.dump()});
  json listed = token;
  listed.erase("SecretID");
  api.on("GET", "/v1/acl/tokens", {200, json::array({listed}).dump()});
  auto b = cli(api, {"acl", "bootstrap"});
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("Secret ID    = sec-1"), std::string::npos) << b.out;
  auto c = cli(api, {"-token", "mgmt", "acl", "token", "create", "-name", "ro", "-policy", "reader", "-policy", "ops",
                     "-ttl", "1h"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Policies     = reader, ops"), std::string::npos) << c.out;
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(json::parse(reqs[1].body),
            (json{{"Name", "ro"}, {"Type", "client"}, {"Policies", {"reader", "ops"}}, {"ExpirationTTL", "1h"}}));
  EXPECT_EQ(reqs[1].headers["x-mooring-token"], "mgmt");
  auto l = cli(api, {"acl", "token", "list"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_NE(l.out.find("acc-1"), std::string::npos);
  EXPECT_EQ(l.out.find("sec-1"), std::string::npos);
}

TEST_F(CliBinary, AclPolicyApplyTakesTheRulesFromAFile) {
  FakeApi api;
  api.on("PUT", "/v1/acl/policy/reader", {200, R"({"Name":"reader"})"});
  auto file = write("reader.json", R"({"Namespace":{"*":{"Policy":"read"}},"Node":"read"})");
  auto r = cli(api, {"acl", "policy", "apply", "-description", "read all", "reader", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Successfully wrote \"reader\" ACL policy!\n");
  auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(json::parse(reqs[0].body), (json{{"Name", "reader"},
                                             {"Description", "read all"},
                                             {"Rules", {{"Namespace", {{"*", {{"Policy", "read"}}}}}, {"Node", "read"}}}}));
}

// `volume init` writes the example; `volume create`/`register` read it, comments and all (the e2e
// CLI test sends both to a real control plane).
TEST_F(CliBinary, VolumeInitWritesCommentedExamplesThatCreateAndRegisterRead) {
  const auto work = (dir_ / "work").string();
  fs::create_directories(work);
  auto made = run({"volume", "init"}, {}, work);
  ASSERT_EQ(made.code, 0) << made.err;
  EXPECT_EQ(made.out,
            "Example volume specification written to volume.json; edit it, then run `mooring volume create "
            "volume.json`\n");
  const auto create_form = slurp(fs::path(work) / "volume.json");
  EXPECT_TRUE(create_form.starts_with("// A volume for `mooring volume create FILE`")) << create_form;
  EXPECT_EQ(create_form.find("\"ExternalID\""), std::string::npos) << create_form;

  // Never over a file that is there, the user's edits included.
  std::ofstream(fs::path(work) / "volume.json", std::ios::app) << "// my edit\n";
  auto again = run({"volume", "init"}, {}, work);
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err, "Error: volume.json already exists; remove it or name another file (mooring volume init FILE)\n");
  EXPECT_EQ(slurp(fs::path(work) / "volume.json"), create_form + "// my edit\n");

  const auto reg_path = (dir_ / "existing.json").string();
  auto reg = run({"volume", "init", "-register", reg_path});
  ASSERT_EQ(reg.code, 0) << reg.err;
  const auto register_form = slurp(reg_path);
  EXPECT_NE(register_form.find("\"ExternalID\": \"EXTERNAL_ID\""), std::string::npos) << register_form;

  FakeApi api;
  api.on("PUT", "/v1/volume/csi/data/create", {200, R"({"Volumes":[{"ID":"data","ExternalID":"data-1"}]})"});
  api.on("PUT", "/v1/volume/csi/data", {200, R"({"Index":3})"});
  auto created = cli(api, {"volume", "create", (fs::path(work) / "volume.json").string()});
  ASSERT_EQ(created.code, 0) << created.err;
  auto registered = cli(api, {"volume", "register", reg_path});
  ASSERT_EQ(registered.code, 0) << registered.err;
  const auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const json sent_create = json::parse(reqs[0].body)["Volumes"][0];
  EXPECT_EQ(sent_create,
            json::parse(create_form, nullptr, true, /*ignore_comments=*/true)) << reqs[0].body;
  EXPECT_EQ(sent_create["RequestedCapabilities"].size(), 2u);
  EXPECT_EQ(json::parse(reqs[1].body)["Volumes"][0]["ExternalID"], "EXTERNAL_ID");
  EXPECT_EQ(run({"volume", "init", "a", "b"}).code, 2);
}

// A completion question: the words typed before the cursor, and the word that must be offered
// when its first letter is typed.
struct Ask {
  std::vector<std::string> before;
  std::string word;
};

// Every command of the table, word by word.
std::vector<Ask> command_word_asks() {
  std::vector<Ask> asks;
  for (const auto& c : all_commands())
    for (std::size_t k = 0; k < c.words.size(); ++k)
      asks.push_back({std::vector<std::string>(c.words.begin(), c.words.begin() + k), c.words[k]});
  return asks;
}

// "mooring 'volume' 'status' 'x'": the words of a question, the cursor's one being its first letter.
std::string quoted_words(const Ask& ask) {
  std::string words = "mooring";
  for (const auto& w : ask.before) words += " '" + w + "'";
  return words + " '" + ask.word.substr(0, 1) + "'";
}

// Runs `shell` ("bash", "zsh -f") on `driver` (one answer line per ask) and checks every asked
// word is offered.
void expect_offered(const fs::path& dir, const std::string& shell, const std::string& driver, const std::vector<Ask>& asks) {
  const auto driver_path = dir / "driver", answers_path = dir / "answers";
  std::ofstream(driver_path) << driver;
  ASSERT_EQ(std::system((shell + " '" + driver_path.string() + "' > '" + answers_path.string() + "'").c_str()), 0);
  std::ifstream answers(answers_path);
  std::string line;
  for (const auto& ask : asks) {
    ASSERT_TRUE(std::getline(answers, line)) << "no answer for " << ask.word;
    std::istringstream offered(line);
    std::vector<std::string> items{std::istream_iterator<std::string>(offered), std::istream_iterator<std::string>()};
    EXPECT_NE(std::find(items.begin(), items.end(), ask.word), items.end())
        << shell << ": " << quoted_words(ask) << "<TAB> offers: " << line;
  }
}

// Completion runs in bash itself: every command of the table, word by word, and its flags.
TEST_F(CliBinary, BashCompletionOffersEveryCommandWordAndFlag) {
  auto script = run({"completion", "bash"});
  ASSERT_EQ(script.code, 0) << script.err;
  auto asks = command_word_asks();
  for (const auto& c : all_commands()) {
    for (const auto& f : c.flags) asks.push_back({c.words, "-" + f.name});
    asks.push_back({c.words, "-address"});  // global flags everywhere
  }
  // A flag's value is not taken for a command word: `-address X volume` still completes volume's.
  asks.push_back({{"-address", "volume", "volume"}, "status"});
  // One bash run answers every question, a line each.
  std::string driver = "source '" + write("mooring.bash", script.out) + "'\n";
  for (const auto& ask : asks)
    driver += "COMP_WORDS=(" + quoted_words(ask) + "); COMP_CWORD=" + std::to_string(ask.before.size() + 1) +
              "; COMPREPLY=(); _mooring; echo \"${COMPREPLY[*]}\"\n";
  expect_offered(dir_, "bash", driver, asks);
  // The fixed values of an argument: completion's shells.
  EXPECT_NE(script.out.find("\"completion\") subs=\"bash zsh\""), std::string::npos);
  EXPECT_EQ(run({"completion", "fish"}).code, 2);
}

// zsh: the script's syntax, and its function run with the completion system's builtins stubbed.
TEST_F(CliBinary, ZshCompletionOffersEveryCommandWord) {
  if (std::system("command -v zsh >/dev/null") != 0) GTEST_SKIP() << "zsh is not installed";
  auto script = run({"completion", "zsh"});
  ASSERT_EQ(script.code, 0) << script.err;
  const auto script_path = write("_mooring", script.out);
  ASSERT_EQ(std::system(("zsh -n '" + script_path + "'").c_str()), 0);
  std::string driver = "compdef() { :; }\n_files() { print FILES; }\n"
                       "_describe() { local a; for a in ${(P)4}; do print -rn -- \"${a%%:*} \"; done; print; }\n"
                       "source '" + script_path + "'\n";
  auto asks = command_word_asks();
  asks.push_back({{"volume", "status"}, "-refresh-stats"});
  for (const auto& ask : asks)
    driver += "words=(" + quoted_words(ask) + "); CURRENT=" + std::to_string(ask.before.size() + 2) + "; PREFIX='" +
              ask.word.substr(0, 1) + "'; _mooring\n";
  expect_offered(dir_, "zsh -f", driver, asks);
}

TEST_F(CliBinary, HelpMarkdownIsTheReferencePage) {
  auto r = run({"--help-markdown"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, cli_reference_markdown());
  for (const auto& name : {"MOORING_ADDR", "MOORING_CACERT", "MOORING_CLIENT_CERT", "MOORING_CLIENT_KEY", "MOORING_TOKEN",
                           "MOORING_NAMESPACE"})
    EXPECT_NE(r.out.find(std::string("| `") + name + "` |"), std::string::npos) << name;
}

}  // namespace
}  // namespace mooring::cli
