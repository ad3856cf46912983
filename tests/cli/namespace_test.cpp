// The CLI and namespaces, in process against the fake control plane: -namespace (or
// MOORING_NAMESPACE) goes on every call as ?namespace=, '*' lists show a Namespace column, and a
// malformed namespace is a usage error before anything is sent.
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
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "ID    Name  Namespace  Plugin ID  Schedulable  Access Mode  Readers  Writers");
  EXPECT_NE(r.out.find("team-a"), std::string::npos) << r.out;
}

TEST(CliNamespace, AMalformedNamespaceIsAUsageErrorAndSendsNothing) {
  FakeApi api;
  auto r = run_cli(api, {"-namespace", "team a&x=1", "volume", "status"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-namespace: invalid namespace"), std::string::npos) << r.err;
  EXPECT_TRUE(api.requests().empty());
}

}  // namespace
}  // namespace mooring::cli
