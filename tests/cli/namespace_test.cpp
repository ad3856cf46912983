// The CLI and namespaces, in process against the fake control plane: -namespace (or
// MOORING_NAMESPACE) goes on every call as ?namespace=, '*' lists show a Namespace column, and a
// malformed namespace is a usage error before anything is sent. `mooring namespace ...`: list and
// status show usage against the quota, apply keeps what its flags do not name (and makes a new
// namespace when there is none), a bad limit is refused before anything is written.
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run.hpp"
#include "tests/cli/fake_api.hpp"

namespace mooring::cli {
namespace {

using json = nlohmann::json;

struct Ran {
  int code = 0;
  std::string out, err;
};

Ran run_cli(FakeApi& api, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), {"-address", api.url()});
  std::ostringstream out, err;
  Ran r;
  r.code = run(args, env, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(CliNamespace, TheFlagOrTheEnvironmentNamesTheNamespaceOnEveryCall) {
  FakeApi api;
  api.on("GET", "/v1/volumes?namespace=team-a", {200, "[]"});
  api.on("GET", "/v1/volume/csi/data?namespace=team-b", {200, json{{"ID", "data"}, {"Namespace", "team-b"}}.dump()});
  auto flag = run_cli(api, {"-namespace", "team-a", "volume", "status"});
  EXPECT_EQ(flag.code, 0) << flag.err;
  auto env = run_cli(api, {"volume", "status", "data"}, {{"MOORING_NAMESPACE", "team-b"}});
  EXPECT_EQ(env.code, 0) << env.err;
  EXPECT_NE(env.out.find("Namespace"), std::string::npos) << env.out;
  EXPECT_NE(env.out.find("team-b"), std::string::npos) << env.out;
  // The flag wins over the environment.
  auto both = run_cli(api, {"-namespace", "team-a", "volume", "status"}, {{"MOORING_NAMESPACE", "team-b"}});
  EXPECT_EQ(both.code, 0) << both.err;
  ASSERT_EQ(api.requests().size(), 3u);
  EXPECT_EQ(api.requests()[2].target, "/v1/volumes?namespace=team-a");
}

TEST(CliNamespace, EveryNamespaceListsShowWhichOneEachItemIsIn) {
  FakeApi api;
  api.on("GET", "/v1/volumes?namespace=*",
         {200, json::array({{{"ID", "data"}, {"Name", "data"}, {"Namespace", "default"}, {"PluginID", "hostpath"}},
                            {{"ID", "data"}, {"Name", "data"}, {"Namespace", "team-a"}, {"PluginID", "hostpath"}}})
                   .dump()});
  auto r = run_cli(api, {"-namespace", "*", "volume", "status"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "ID    Name  Namespace  Plugin ID  Schedulable  Access Mode  Readers  Writers");
  EXPECT_NE(r.out.find("team-a"), std::string::npos) << r.out;
}

TEST(CliNamespace, AMalformedNamespaceIsAUsageErrorAndSendsNothing) {
  FakeApi api;
  auto r = run_cli(api, {"-namespace", "team a&x=1", "volume", "status"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-namespace: invalid namespace"), std::string::npos) << r.err;
  EXPECT_TRUE(api.requests().empty());
}

const json kTeamA = {{"Name", "team-a"},
                     {"Description", "the A team"},
                     {"Quota", {{"MaxVolumes", 5}, {"MaxCapacityBytes", 1 << 30}, {"MaxRunningAllocations", nullptr}}},
                     {"CreateIndex", 3},
                     {"ModifyIndex", 4},
                     {"Usage", {{"Volumes", 2}, {"CapacityBytes", 512 << 20}, {"RunningAllocations", 7}}}};

TEST(CliNamespaceCommands, ListAndStatusShowTheQuotaBesideWhatItHolds) {
  FakeApi api;
  api.on("GET", "/v1/namespaces", {200, json::array({{{"Name", "default"}, {"Description", "d"}}, kTeamA}).dump()});
  api.on("GET", "/v1/namespace/team-a", {200, kTeamA.dump()});
  auto list = run_cli(api, {"namespace", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("team-a"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("the A team"), std::string::npos) << list.out;
  auto status = run_cli(api, {"namespace", "status", "team-a"});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find("2 of 5"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("512.0 MiB of 1.0 GiB"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("7 of unlimited"), std::string::npos) << status.out;
}

TEST(CliNamespaceCommands, ApplyChangesOnlyWhatItsFlagsName) {
  FakeApi api;
  api.on("GET", "/v1/namespace/team-a", {200, kTeamA.dump()});
  api.on("PUT", "/v1/namespace/team-a", {200, kTeamA.dump()});
  auto r = run_cli(api, {"namespace", "apply", "-max-running-allocs", "3", "-max-capacity", "none", "team-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto reqs = api.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].method, "PUT");
  auto sent = json::parse(reqs[1].body);
  EXPECT_EQ(sent["Description"], "the A team");  // kept
  EXPECT_EQ(sent["Quota"]["MaxVolumes"], 5);     // kept
  EXPECT_TRUE(sent["Quota"]["MaxCapacityBytes"].is_null());
  EXPECT_EQ(sent["Quota"]["MaxRunningAllocations"], 3);
  EXPECT_FALSE(sent.contains("Usage"));  // what the read showed is not sent back
}

TEST(CliNamespaceCommands, ApplyMakesANewNamespaceWhenThereIsNone) {
  FakeApi api;  // GET /v1/namespace/team-b: 404
  api.on("PUT", "/v1/namespace/team-b", {200, json{{"Name", "team-b"}}.dump()});
  auto r = run_cli(api, {"namespace", "apply", "-description", "B", "-max-capacity", "10GiB", "team-b"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Successfully applied namespace \"team-b\""), std::string::npos) << r.out;
  auto sent = json::parse(api.requests().back().body);
  EXPECT_EQ(sent["Description"], "B");
  EXPECT_EQ(sent["Quota"]["MaxCapacityBytes"], 10ll << 30);
}

TEST(CliNamespaceCommands, ABadLimitIsRefusedBeforeAnythingIsWritten) {
  FakeApi api;
  api.on("GET", "/v1/namespace/team-a", {200, kTeamA.dump()});
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"-max-volumes", "-1"}, {"-max-volumes", "3x"}, {"-max-running-allocs", "lots"}, {"-max-capacity", "big"}}) {
    auto r = run_cli(api, {"namespace", "apply", flag, value, "team-a"});
    EXPECT_NE(r.code, 0) << flag << " " << value;
    EXPECT_NE(r.err.find(flag + ":"), std::string::npos) << r.err;
  }
  for (const auto& req : api.requests()) EXPECT_EQ(req.method, "GET");
}

TEST(CliNamespaceCommands, DeleteSendsTheDeleteAndShowsARefusal) {
  FakeApi api;
  api.on("DELETE", "/v1/namespace/team-a",
         {409, json{{"Error", "namespace \"team-a\" still holds 2 volume(s) and 0 allocation(s)"}}.dump()});
  auto r = run_cli(api, {"namespace", "delete", "team-a"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("still holds 2 volume(s)"), std::string::npos) << r.err;
  api.on("DELETE", "/v1/namespace/team-b", {200, json{{"Name", "team-b"}, {"Deleted", true}}.dump()});
  auto ok = run_cli(api, {"namespace", "delete", "team-b"});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

}  // namespace
}  // namespace mooring::cli
