// The real mooring-controlplane binary with --acl: every route (walked from the route table)
// answers 401 without a token, a read-only token gets 403 on every write and the state does not
// move, bootstrap works once (also after a restart), an expired token is refused, and no SecretID
// reaches the log or the database files.
#include <filesystem>
#include <fstream>
#include <atomic>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/api/api.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "/v1/volume/csi/:id/create" -> "/v1/volume/csi/x/create".
std::string concrete(const std::string& pattern) {
  return std::regex_replace(pattern, std::regex(":[a-z]+"), "x");
}

}  // namespace

class AclBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data = tmp / "data";
    auto backend = SqliteBackend::open(data);
    ASSERT_TRUE(backend) << backend.error();
    boost::asio::io_context io;
    StateStore store{io.get_executor(), **backend};
    ASSERT_TRUE(store.load());
    Batch b;
    auto plugin = fixtures::plugin("hostpath", "node-1");
    b.put(fixtures::ready_node(plugin, "node-1"));  // the plugin's aggregate follows its instance
    b.put(fixtures::volume("vol-1"));
    auto team = fixtures::volume("vol-1");
    team.ns = "team-a";
    team.external_id = "team-a-ext";
    b.put(team);
    ASSERT_TRUE(store.commit(std::move(b)));
  }

  void start() {
    ++runs;
    process.reset();
    process = std::make_unique<test::ChildProcess>(test::SpawnOptions{
        .binary = MOORING_CONTROLPLANE_BIN,
        .args = {"--data-dir", data.string(), "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--acl", "--insecure",
                 "--heartbeat-ttl", "1h", "--log-level", "debug"},
        .output_file = tmp / "controlplane.log"});
    const std::regex re("http api listening.* port=([0-9]+)");
    port = 0;
    for (int i = 0; i < 3000 && port == 0; ++i) {
      const auto out = process->output();
      std::size_t seen = 0;
      for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
        if (++seen == runs) port = static_cast<std::uint16_t>(std::stoi((*it)[1].str()));
      if (port == 0) std::this_thread::sleep_for(10ms);
    }
    ASSERT_NE(port, 0) << process->output();
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {},
                  const std::string& token = {}) {
    std::map<std::string, std::string> headers;
    if (!token.empty()) headers["X-Mooring-Token"] = token;
    return http_request(port, method, target, body, headers);
  }

  // What a reader can see of the state: the index and every list.
  std::string observed(const std::string& token) {
    std::string out = json::parse(call("GET", "/v1/status/ready").body)["Index"].dump();
    for (const char* list : {"/v1/volumes", "/v1/volume/csi/vol-1", "/v1/nodes", "/v1/plugins", "/v1/allocations"})
      out += "\n" + call("GET", list, {}, token).body;
    return out;
  }

  test::TempDir tmp{"mooring-acl-bin"};
  fs::path data;
  std::unique_ptr<test::ChildProcess> process;
  std::size_t runs = 0;
  std::uint16_t port = 0;
};

TEST_F(AclBinaryTest, EveryRouteRefusesARequestWithoutAToken) {
  start();
  std::size_t checked = 0;
  for (const auto& r : api::Api::route_table()) {
    if (r.need.kind == acl::Need::Kind::anyone) continue;
    auto res = call(r.method, concrete(r.pattern), "{}");
    EXPECT_EQ(res.status, 401u) << r.method << " " << r.pattern << ": " << res.body;
    ++checked;
  }
  EXPECT_GT(checked, 30u);
  EXPECT_EQ(call("GET", "/v1/status/health").status, 200u);
}

TEST_F(AclBinaryTest, AReadOnlyTokenGets403OnEveryWriteAndTheStateDoesNotMove) {
  start();
  auto boot = call("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(boot.status, 200u) << boot.body;
  const std::string mgmt = json::parse(boot.body)["SecretID"];
  auto policy = call("PUT", "/v1/acl/policy/reader",
                     R"({"Description":"read everything","Rules":{"Namespace":{"*":{"Policy":"read"}},"Plugin":"read",
                        "Node":"read","Operator":"read"}})",
                     mgmt);
  ASSERT_EQ(policy.status, 200u) << policy.body;
  auto tok = call("PUT", "/v1/acl/token", R"({"Name":"ro","Type":"client","Policies":["reader"]})", mgmt);
  ASSERT_EQ(tok.status, 200u) << tok.body;
  const std::string reader = json::parse(tok.body)["SecretID"];

  const auto before = observed(reader);
  ASSERT_NE(before.find("vol-1"), std::string::npos) << before;
  std::size_t writes = 0;
  for (const auto& r : api::Api::route_table()) {
    if (r.method == "GET" || r.need.kind == acl::Need::Kind::anyone) continue;
    auto res = call(r.method, concrete(r.pattern) + "?force=true", "{}", reader);
    EXPECT_EQ(res.status, 403u) << r.method << " " << r.pattern << ": " << res.body;
    EXPECT_NE(res.body.find("permission denied: token \\\"ro\\\" lacks "), std::string::npos) << res.body;
    ++writes;
  }
  EXPECT_GT(writes, 15u);
  // Writes on the real objects too, not just on ids that do not exist.
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1", {}, reader).status, 403u);
  EXPECT_EQ(call("DELETE", "/v1/node/node-1", {}, reader).status, 403u);
  EXPECT_EQ(observed(reader), before);

  auto self = call("GET", "/v1/acl/token/self", {}, reader);
  ASSERT_EQ(self.status, 200u) << self.body;
  EXPECT_EQ(json::parse(self.body)["Name"], "ro");
  EXPECT_EQ(self.body.find(reader), std::string::npos);

  // The audit log names the refused token by its AccessorID, never by its secret.
  const std::string accessor = json::parse(tok.body)["AccessorID"];
  const auto audit = test::read_file(data / "audit.log");
  EXPECT_EQ(audit.find(reader), std::string::npos);
  EXPECT_EQ(audit.find(mgmt), std::string::npos);
  std::size_t refused = 0;
  std::istringstream lines(audit);
  for (std::string line; std::getline(lines, line);) {
    auto entry = json::parse(line);
    if (entry["Status"] != 403) continue;
    ++refused;
    EXPECT_EQ(entry["Actor"]["Type"], "token") << line;
    EXPECT_EQ(entry["Actor"]["ID"], accessor) << line;
  }
  EXPECT_EQ(refused, writes + 2);
}

TEST_F(AclBinaryTest, BootstrapOnceEvenAfterARestartAndExpiredTokensAre401AndNoSecretIsWrittenAnywhere) {
  start();
  auto boot = call("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(boot.status, 200u) << boot.body;
  const std::string mgmt = json::parse(boot.body)["SecretID"];
  EXPECT_EQ(call("POST", "/v1/acl/bootstrap").status, 400u);
  ASSERT_EQ(call("PUT", "/v1/acl/policy/reader", R"({"Rules":{"Namespace":{"default":{"Policy":"read"}}}})", mgmt).status,
            200u);
  auto short_lived =
      call("PUT", "/v1/acl/token", R"({"Name":"brief","Policies":["reader"],"ExpirationTTL":"1s"})", mgmt);
  ASSERT_EQ(short_lived.status, 200u) << short_lived.body;
  const std::string brief = json::parse(short_lived.body)["SecretID"];
  auto kept = call("PUT", "/v1/acl/token", R"({"Name":"kept","Policies":["reader"]})", mgmt);
  const std::string keeper = json::parse(kept.body)["SecretID"];
  EXPECT_EQ(call("GET", "/v1/volumes", {}, brief).status, 200u);
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(call("GET", "/v1/volumes", {}, brief).status, 401u);

  ASSERT_TRUE(process->terminate());
  ASSERT_TRUE(process->wait_for_exit(20s));
  start();
  EXPECT_EQ(call("POST", "/v1/acl/bootstrap").status, 400u);
  EXPECT_EQ(call("GET", "/v1/volumes", {}, keeper).status, 200u);
  EXPECT_EQ(call("GET", "/v1/acl/tokens", {}, mgmt).status, 200u);

  const auto log = process->output();
  ASSERT_NE(log.find("acl bootstrap token created"), std::string::npos);
  std::string files;
  for (const auto& e : fs::directory_iterator(data)) files += slurp(e.path());
  for (const auto& secret : {mgmt, brief, keeper}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "a SecretID is in the log";
    EXPECT_EQ(files.find(secret), std::string::npos) << "a SecretID is in the data dir";
  }
}

TEST_F(AclBinaryTest, ANamespaceLimitedTokenSeesOnlyItsNamespaceInListsBlockingQueriesEventsAndTheAuditLog) {
  start();
  auto boot = call("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(boot.status, 200u) << boot.body;
  const std::string mgmt = json::parse(boot.body)["SecretID"];
  // team-a holds a seeded volume, so the control plane recorded it at start; team-b is made here.
  ASSERT_EQ(call("PUT", "/v1/namespace/team-b", "{}", mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/acl/policy/team-a", R"({"Rules":{"Namespace":{"team-a":{"Policy":"write"}}}})", mgmt).status,
            200u);
  auto tok = call("PUT", "/v1/acl/token", R"({"Name":"team-a","Policies":["team-a"]})", mgmt);
  ASSERT_EQ(tok.status, 200u) << tok.body;
  const std::string team = json::parse(tok.body)["SecretID"];
  const std::string volume = R"({"Volumes":[{"ID":"vol-2","PluginID":"hostpath","ExternalID":"e2",)"
                             R"("RequestedCapabilities":[{"AccessMode":"single-node-writer","AttachmentMode":"file-system"}]}]})";

  auto mine = json::parse(call("GET", "/v1/volumes?namespace=*", {}, team).body);
  ASSERT_EQ(mine.size(), 1u) << mine.dump();
  EXPECT_EQ(mine[0]["Namespace"], "team-a");
  EXPECT_EQ(json::parse(call("GET", "/v1/volume/csi/vol-1?namespace=team-a", {}, team).body)["ExternalID"], "team-a-ext");
  EXPECT_EQ(call("GET", "/v1/volumes", {}, team).status, 403u);
  EXPECT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume, team).status, 403u);

  // A blocking query over every namespace wakes for another namespace's write, and shows none of it.
  auto first = call("GET", "/v1/volumes?namespace=*", {}, team);
  const auto index = first.header("x-mooring-index");
  std::atomic<bool> answered{false};
  HttpResult woke;
  std::thread waiter([&] {
    woke = call("GET", "/v1/volumes?namespace=*&index=" + index + "&wait=20s", {}, team);
    answered = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(answered);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2?namespace=team-b", volume, mgmt).status, 200u);
  waiter.join();
  ASSERT_EQ(woke.status, 200u) << woke.body;
  EXPECT_GT(std::stoull(woke.header("x-mooring-index")), std::stoull(index));
  EXPECT_EQ(json::parse(woke.body).size(), 1u) << woke.body;

  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-3?namespace=team-a", volume, team).status, 400u);  // body says vol-2
  // Its own backend volume: one external id is registered once, whatever the namespace.
  std::string own = volume;
  own.replace(own.find("\"e2\""), 4, "\"e2-team-a\"");
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2?namespace=team-a", own, team).status, 200u);
  auto events = json::parse(call("GET", "/v1/events?namespace=*", {}, team).body);
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_EQ(e["Namespace"], "team-a") << e.dump();

  // The audit log names the namespace each write acted in.
  std::set<std::string> audited;
  std::istringstream lines(test::read_file(data / "audit.log"));
  for (std::string line; std::getline(lines, line);) {
    auto entry = json::parse(line);
    if (entry["Path"] == "/v1/volume/csi/vol-2" && entry["Status"] == 200) audited.insert(entry["Namespace"]);
  }
  EXPECT_EQ(audited, (std::set<std::string>{"team-a", "team-b"}));
}

}  // namespace mooring::controlplane
