// Every endpoint over real sockets: shapes, errors that change nothing, blocking queries, CORS.
#include <future>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string volume_body(const std::string& id, const std::string& plugin = "hostpath",
                        const std::string& mode = "single-node-writer") {
  return json{{"Volumes",
               {{{"ID", id},
                 {"Name", id + "-name"},
                 {"PluginID", plugin},
                 {"ExternalID", "ext-" + id},
                 {"RequestedCapabilities", {{{"AccessMode", mode}, {"AttachmentMode", "file-system"}}}},
                 {"MountOptions", {{"FSType", "ext4"}, {"MountFlags", {"password=topsecret"}}}},
                 {"Secrets", {{"token", "s3cr3t-token"}}},
                 {"Parameters", {{"tier", "gold"}}}}}}}
      .dump();
}

json parse(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

// The API's one path (Api::handle), run on `io` to its answer without a server.
http::Response answer(boost::asio::io_context& io, api::Api& api, http::Request r) {
  auto f = boost::asio::co_spawn(io, api.handle(std::move(r)), boost::asio::use_future);
  io.restart();
  while (f.wait_for(0s) != std::future_status::ready) io.run_one();
  return f.get();
}

}  // namespace

class ApiHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Batch b;
    domain::Node n;
    n.id = "node-1";
    n.name = "first";
    n.status = domain::NodeStatus::ready;
    fixtures::put_running(b, {fixtures::plugin("hostpath", "node-1")}, nullptr, {n});
    server.seed(std::move(b));
    server.start(config);
    port = server.port;
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {},
                  const std::map<std::string, std::string>& headers = {}) {
    return http_request(port, method, target, body, headers);
  }

  // Index and transaction count: a rejected request must leave both alone.
  std::pair<std::uint64_t, std::size_t> fingerprint() {
    server.settle();
    return server.on_io([this] { return std::make_pair(server.store.index(), server.backend.transactions.size()); });
  }

  http::ServerConfig config;
  ApiServer server;
  std::uint16_t port = 0;
};

TEST_F(ApiHttpTest, RegisterThenReadVolumeWithSecretsRedacted) {
  auto put = call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1"));
  ASSERT_EQ(put.status, 200u) << put.body;
  EXPECT_FALSE(put.header("x-mooring-index").empty());
  EXPECT_EQ(put.body.find("s3cr3t-token"), std::string::npos);

  auto get = call("GET", "/v1/volume/csi/vol-1");
  ASSERT_EQ(get.status, 200u) << get.body;
  auto v = parse(get);
  EXPECT_EQ(v["ID"], "vol-1");
  EXPECT_EQ(v["PluginID"], "hostpath");
  EXPECT_EQ(v["ExternalID"], "ext-vol-1");
  EXPECT_EQ(v["Provider"], "hostpath.mooring.dev");
  EXPECT_EQ(v["Schedulable"], true);
  EXPECT_EQ(v["NodesHealthy"], 1);
  EXPECT_FALSE(v.contains("Secrets"));
  EXPECT_EQ(v["MountOptions"]["MountFlags"], json::array({"[REDACTED]"}));
  EXPECT_TRUE(v["Claims"].is_array());
  EXPECT_EQ(get.body.find("s3cr3t-token"), std::string::npos);
  EXPECT_EQ(get.body.find("topsecret"), std::string::npos);
  EXPECT_EQ(get.header("x-nomad-index"), get.header("x-mooring-index"));
}

// PUT /v1/volumes registers several volumes in one transaction, all or nothing.
TEST_F(ApiHttpTest, BulkRegisterIsAllOrNothing) {
  json body = json::parse(volume_body("bulk-1"));
  body["Volumes"].push_back(json::parse(volume_body("bulk-2"))["Volumes"][0]);
  const auto before = fingerprint();
  auto put = call("PUT", "/v1/volumes", body.dump());
  ASSERT_EQ(put.status, 200u) << put.body;
  EXPECT_EQ(fingerprint().second, before.second + 1) << "one transaction for the batch";
  EXPECT_EQ(call("GET", "/v1/volume/csi/bulk-1").status, 200u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/bulk-2").status, 200u);
  EXPECT_EQ(put.body.find("s3cr3t-token"), std::string::npos);

  // One bad volume (unknown plugin) refuses the whole batch, naming it; the good one is not written.
  json bad = json::parse(volume_body("bulk-3"));
  bad["Volumes"].push_back(json::parse(volume_body("bulk-4", "no-such-plugin"))["Volumes"][0]);
  const auto unchanged = fingerprint();
  auto refused = call("POST", "/v1/volumes", bad.dump());
  EXPECT_EQ(refused.status / 100, 4u) << refused.body;
  EXPECT_NE(refused.body.find("bulk-4"), std::string::npos) << refused.body;
  EXPECT_EQ(fingerprint(), unchanged);
  EXPECT_EQ(call("GET", "/v1/volume/csi/bulk-3").status, 404u);
}

// Repeated reads are answered from the read cache while nothing changed, and every write shows.
TEST_F(ApiHttpTest, RepeatedReadsAreConsistentWithEveryWrite) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/c-1", volume_body("c-1")).status, 200u);
  auto first = call("GET", "/v1/volumes?prefix=c-");
  auto again = call("GET", "/v1/volumes?prefix=c-");
  ASSERT_EQ(first.status, 200u);
  EXPECT_EQ(first.body, again.body);
  EXPECT_EQ(first.header("x-mooring-index"), again.header("x-mooring-index"));
  ASSERT_EQ(call("PUT", "/v1/volume/csi/c-2", volume_body("c-2")).status, 200u);
  auto after = call("GET", "/v1/volumes?prefix=c-");
  EXPECT_EQ(parse(after).size(), 2u) << after.body;
  EXPECT_NE(after.header("x-mooring-index"), first.header("x-mooring-index"));
  EXPECT_EQ(parse(call("GET", "/v1/volumes?prefix=c-1")).size(), 1u) << "the query is part of the key";
  ASSERT_EQ(call("DELETE", "/v1/volume/csi/c-1").status, 200u);
  EXPECT_EQ(parse(call("GET", "/v1/volumes?prefix=c-")).size(), 1u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/c-1").status, 404u);
}

TEST_F(ApiHttpTest, UpdateKeepsSecretsAndRefusesImmutableChanges) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  auto body = json::parse(volume_body("vol-1"));
  body["Volumes"][0].erase("Secrets");
  body["Volumes"][0]["Name"] = "renamed";
  body["Volumes"][0]["MountOptions"]["MountFlags"] = {"[REDACTED]"};
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", body.dump()).status, 200u);
  auto secrets = server.on_io([this] { return server.store.volume("vol-1")->secrets; });
  EXPECT_EQ(secrets.at("token"), "s3cr3t-token");
  EXPECT_EQ(parse(call("GET", "/v1/volume/csi/vol-1"))["Name"], "renamed");

  auto before = fingerprint();
  body["Volumes"][0]["ExternalID"] = "other";
  auto r = call("PUT", "/v1/volume/csi/vol-1", body.dump());
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(parse(r)["Error"].get<std::string>().find("ExternalID"), std::string::npos);
  body["Volumes"][0]["ExternalID"] = "ext-vol-1";
  body["Volumes"][0]["PluginID"] = "missing";
  r = call("PUT", "/v1/volume/csi/vol-1", body.dump());
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("no CSI plugin named \\\"missing\\\""), std::string::npos) << r.body;
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(ApiHttpTest, CapabilityChangeWhileInUseIs409) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  server.on_io([this] {
    auto v = *server.store.volume("vol-1");
    v.claims["a1"] = domain::Claim{.allocation_id = "a1", .node_id = "node-1", .mode = domain::ClaimMode::write,
                                   .access_mode = domain::AccessMode::single_node_writer,
                                   .attachment_mode = domain::AttachmentMode::file_system};
    v.access_mode = domain::AccessMode::single_node_writer;
    v.attachment_mode = domain::AttachmentMode::file_system;
    Batch b;
    b.put(v);
    return server.store.commit(std::move(b)).ok();
  });
  auto before = fingerprint();
  auto r = call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1", "hostpath", "multi-node-reader-only"));
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_EQ(fingerprint(), before);
  auto v = parse(call("GET", "/v1/volume/csi/vol-1"));
  ASSERT_EQ(v["Claims"].size(), 1u);
  EXPECT_EQ(v["Claims"][0]["AllocationID"], "a1");
  EXPECT_EQ(v["Claims"][0]["State"], "taken");
  EXPECT_TRUE(v["WriteAllocs"].contains("a1"));
  // Deregistration: refused in use, even forced while the claimant is not terminal (unknown
  // allocations count as gone, so give it a running one).
  server.on_io([this] {
    auto a = fixtures::allocation("a1", "node-1");
    a.client_status = domain::ClientStatus::running;
    Batch b;
    b.put(a);
    return server.store.commit(std::move(b)).ok();
  });
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1").status, 409u);
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1?force=true").status, 409u);
  server.on_io([this] {
    auto a = *server.store.allocation("a1");
    a.client_status = domain::ClientStatus::complete;
    Batch b;
    b.put(a);
    return server.store.commit(std::move(b)).ok();
  });
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1").status, 409u);
  // Forced, but the claim still needs the node's unmount (its node is up): refused, naming the
  // step, so nothing stays mounted with no claim to undo it.
  before = fingerprint();
  auto forced = call("DELETE", "/v1/volume/csi/vol-1?force=true");
  EXPECT_EQ(forced.status, 409u);
  EXPECT_NE(parse(forced).value("Error", "").find(
                "release is not finished: allocation \"a1\" (taken): unmount on node \"node-1\""),
            std::string::npos)
      << forced.body;
  EXPECT_EQ(fingerprint(), before);
  // Once the release has done its steps, force drops what is left with the volume.
  server.on_io([this] {
    auto v = *server.store.volume("vol-1");
    v.claims.at("a1").state = domain::ClaimState::controller_detached;
    Batch b;
    b.put(v);
    return server.store.commit(std::move(b)).ok();
  });
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1?force=true").status, 200u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1").status, 404u);
}

// purge=true: the claims of terminal allocations are released first (the claim GC's job), and the
// volume takes no claim or update meanwhile; asked again, the answer is the same.
TEST_F(ApiHttpTest, PurgeMarksTheVolumeAndLeavesTheReleaseToTheClaimGc) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  server.on_io([this] {
    auto v = *server.store.volume("vol-1");
    v.claims["a1"] = domain::Claim{.allocation_id = "a1", .node_id = "node-1", .mode = domain::ClaimMode::write,
                                   .access_mode = domain::AccessMode::single_node_writer,
                                   .attachment_mode = domain::AttachmentMode::file_system};
    auto a = fixtures::allocation("a1", "node-1");
    a.client_status = domain::ClientStatus::complete;
    Batch b;
    b.put(v);
    b.put(a);
    return server.store.commit(std::move(b)).ok();
  });
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1?force=true").status, 409u);
  auto purge = call("DELETE", "/v1/volume/csi/vol-1?purge=true");
  ASSERT_EQ(purge.status, 202u) << purge.body;
  EXPECT_TRUE(parse(purge).value("Deregistering", false));
  auto v = parse(call("GET", "/v1/volume/csi/vol-1"));
  EXPECT_TRUE(v.value("Deregistering", false));
  EXPECT_EQ(v["Claims"][0]["State"], "unpublishing") << "handed to the release";
  auto before = fingerprint();
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1?purge=true").status, 202u);
  auto update = call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1"));
  EXPECT_EQ(update.status, 409u);
  EXPECT_NE(update.body.find("being deregistered"), std::string::npos) << update.body;
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1?purge=maybe").status, 400u);
}

TEST_F(ApiHttpTest, BadRegistrationsGet4xxAndChangeNothing) {
  auto before = fingerprint();
  struct Case {
    std::string method, target, body;
    unsigned status;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"PUT", "/v1/volume/csi/vol-1", "{not json", 400, "not valid JSON"},
      {"PUT", "/v1/volume/csi/vol-1", "[]", 400, "JSON object"},
      {"PUT", "/v1/volume/csi/vol-1", "", 400, "empty"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","Bogus":1}]})", 400, "Bogus"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","ExternalID":"e","RequestedCapabilities":[{"AccessMode":"single-node-writer","AttachmentMode":"file-system"}]}]})", 400, "PluginID"},
      {"PUT", "/v1/volume/csi/vol-1", volume_body("vol-2"), 400, "does not match"},
      {"PUT", "/v1/volume/csi/vol-1", volume_body("vol-1", "nope"), 400, "no CSI plugin"},
      {"PUT", "/v1/volume/csi/vol-1", volume_body("vol-1", "hostpath", "single-writer"), 400, "single-writer"},
      {"PUT", "/v1/volume/csi/..%2F..%2Fetc", volume_body("../../etc"), 400, "invalid volume id"},
      {"GET", "/v1/volume/csi/..%2Fetc", "", 400, "invalid volume id"},
      {"DELETE", "/v1/volume/csi/a%00b", "", 400, "percent-encoding"},
      {"GET", "/v1/volume/csi/missing", "", 404, "volume not found: missing"},
      {"DELETE", "/v1/volume/csi/missing", "", 404, "volume not found: missing"},
      {"GET", "/v1/volumes?per_page=abc", "", 400, "per_page"},
      {"GET", "/v1/volumes?index=x", "", 400, "index"},
      {"GET", "/v1/volumes?index=-1", "", 400, "index"},
      {"GET", "/v1/volumes?index=+1", "", 400, "index"},
      {"GET", "/v1/volumes?index=99999999999999999999999", "", 400, "index"},
      {"GET", "/v1/volumes?per_page=-3", "", 400, "per_page"},
      {"GET", "/v1/volumes?index=3&wait=-5s", "", 400, "wait"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","RequestedCapacityMin":1e400}]})", 400, "out of range"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","RequestedCapacityMin":-1}]})", 400, "RequestedCapacityMin"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","RequestedCapacityMin":1.5}]})", 400, "RequestedCapacityMin"},
      {"PUT", "/v1/volume/csi/vol-1", R"({"Volumes":[{"ID":"vol-1","RequestedCapacityMax":18446744073709551615}]})", 400, "RequestedCapacityMax"},
      {"POST", "/v1/allocations", R"({"Allocation":{"Name":"x","Task":{"Command":"/bin/true","KillTimeout":"-1s"}}})", 400, "KillTimeout"},
      {"POST", "/v1/allocations", R"({"Allocation":{"Name":"x","StopAfterClientDisconnect":1e400}})", 400, "out of range"},
      {"GET", "/v1/volumes?index=3&wait=soon", "", 400, "wait"},
      {"GET", "/v1/volumes?type=host", "", 400, "type"},
      {"DELETE", "/v1/volume/csi/vol-1?force=maybe", "", 400, "force"},
      {"GET", "/v1/nothing", "", 404, "no such endpoint"},
  };
  for (const auto& c : cases) {
    auto r = call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << " -> " << r.body;
    EXPECT_NE(r.body.find(c.needle), std::string::npos) << c.method << " " << c.target << " -> " << r.body;
    EXPECT_TRUE(parse(r).contains("Error")) << r.body;
  }
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(ApiHttpTest, HugeBodyGets413AndChangesNothing) {
  auto before = fingerprint();
  std::string huge = R"({"Volumes":[{"ID":"vol-1","Name":")" + std::string(2 * 1024 * 1024, 'x') + R"("}]})";
  auto r = call("PUT", "/v1/volume/csi/vol-1", huge);
  EXPECT_EQ(r.status, 413u) << r.error;
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(ApiHttpTest, WrongMethodGets405WithAllow) {
  auto r = call("PATCH", "/v1/volume/csi/vol-1");
  EXPECT_EQ(r.status, 405u);
  EXPECT_EQ(r.header("allow"), "GET, PUT, POST, DELETE, OPTIONS");
}

TEST_F(ApiHttpTest, ListsFilterAndPaginate) {
  for (const auto* id : {"a-1", "a-2", "a-3", "b-1"})
    ASSERT_EQ(call("PUT", std::string("/v1/volume/csi/") + id, volume_body(id)).status, 200u);
  auto all = parse(call("GET", "/v1/volumes"));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]["ID"], "a-1");
  EXPECT_FALSE(all[0].contains("Secrets"));
  EXPECT_EQ(parse(call("GET", "/v1/volumes?prefix=a-")).size(), 3u);
  EXPECT_EQ(parse(call("GET", "/v1/volumes?plugin_id=other")).size(), 0u);
  EXPECT_EQ(parse(call("GET", "/v1/volumes?type=csi&plugin_id=hostpath")).size(), 4u);
  auto p1 = call("GET", "/v1/volumes?prefix=a-&per_page=2");
  ASSERT_EQ(parse(p1).size(), 2u);
  EXPECT_EQ(p1.header("x-mooring-nexttoken"), "a-3");
  EXPECT_EQ(p1.header("x-nomad-nexttoken"), "a-3");
  auto p2 = call("GET", "/v1/volumes?prefix=a-&per_page=2&next_token=a-3");
  ASSERT_EQ(parse(p2).size(), 1u);
  EXPECT_EQ(parse(p2)[0]["ID"], "a-3");
  EXPECT_EQ(p2.header("x-mooring-nexttoken"), "");
  // node_id: volumes claimed from that node.
  server.on_io([this] {
    auto v = *server.store.volume("b-1");
    v.claims["x"] = domain::Claim{.allocation_id = "x", .node_id = "node-9"};
    Batch b;
    b.put(v);
    return server.store.commit(std::move(b)).ok();
  });
  auto by_node = parse(call("GET", "/v1/volumes?node_id=node-9"));
  ASSERT_EQ(by_node.size(), 1u);
  EXPECT_EQ(by_node[0]["ID"], "b-1");
}

TEST_F(ApiHttpTest, PluginsAndNodes) {
  auto plugins = parse(call("GET", "/v1/plugins?type=csi"));
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0]["ID"], "hostpath");
  EXPECT_EQ(plugins[0]["NodesHealthy"], 1);
  auto p = call("GET", "/v1/plugin/csi/hostpath");
  ASSERT_EQ(p.status, 200u);
  EXPECT_TRUE(parse(p)["Nodes"].contains("node-1"));
  EXPECT_EQ(call("GET", "/v1/plugin/csi/nope").status, 404u);
  auto nodes = parse(call("GET", "/v1/nodes"));
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["ID"], "node-1");
  EXPECT_EQ(nodes[0]["Status"], "ready");
  EXPECT_EQ(parse(call("GET", "/v1/node/node-1"))["Name"], "first");
  EXPECT_EQ(call("GET", "/v1/node/nope").status, 404u);
  EXPECT_EQ(call("GET", "/v1/node/..").status, 400u);
}

TEST_F(ApiHttpTest, AllocationSubmitReadListStop) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  json alloc = {{"Allocation",
                 {{"Name", "web"},
                  {"StopAfterClientDisconnect", "30s"},
                  {"Volumes",
                   {{"data",
                     {{"Type", "csi"}, {"Source", "vol-1"}, {"AccessMode", "single-node-writer"},
                      {"AttachmentMode", "file-system"}}}}},
                  {"Task", {{"Command", "/bin/sleep"}, {"Args", {"100"}}}}}}};
  auto r = call("POST", "/v1/allocations", alloc.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  std::string id = parse(r)["ID"];
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(parse(r)["NodeID"], "node-1");  // placed on the only node with the plugin
  auto got = parse(call("GET", "/v1/allocation/" + id));
  EXPECT_EQ(got["Name"], "web");
  EXPECT_EQ(got["DesiredStatus"], "run");
  EXPECT_EQ(got["ClientStatus"], "pending");
  EXPECT_EQ(got["Volumes"]["data"]["Source"], "vol-1");
  EXPECT_EQ(got["StopAfterClientDisconnect"], "30s");
  EXPECT_EQ(parse(call("GET", "/v1/allocations")).size(), 1u);
  EXPECT_EQ(parse(call("GET", "/v1/allocations?node_id=node-1")).size(), 1u);
  EXPECT_EQ(parse(call("GET", "/v1/allocations?node_id=node-2")).size(), 0u);

  auto stop = call("POST", "/v1/allocation/" + id + "/stop");
  ASSERT_EQ(stop.status, 200u) << stop.body;
  got = parse(call("GET", "/v1/allocation/" + id));
  EXPECT_EQ(got["DesiredStatus"], "stop");
  EXPECT_EQ(got["ClientStatus"], "pending");  // placed: the node reports when it has stopped
  auto again = fingerprint();
  EXPECT_EQ(call("POST", "/v1/allocation/" + id + "/stop").status, 200u);  // idempotent
  EXPECT_EQ(fingerprint(), again);
  EXPECT_EQ(call("POST", "/v1/allocation/nope/stop").status, 404u);
  EXPECT_EQ(call("GET", "/v1/allocation/nope").status, 404u);

  // With an explicit node it stays pending on that node.
  alloc["Allocation"]["NodeID"] = "node-1";
  auto placed = parse(call("POST", "/v1/allocations", alloc.dump()));
  EXPECT_EQ(placed["NodeID"], "node-1");
  EXPECT_EQ(parse(call("GET", "/v1/allocations?node_id=node-1")).size(), 2u);
}

// A submit whose answer was lost is sent again with the same Idempotency-Key: the first answer
// comes back and no second allocation exists. The key cannot be reused for another request.
TEST_F(ApiHttpTest, ASubmitRetriedWithItsIdempotencyKeyGetsTheFirstAnswer) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  json alloc = {{"Allocation",
                 {{"Name", "web"},
                  {"Volumes",
                   {{"data",
                     {{"Source", "vol-1"}, {"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
  const std::map<std::string, std::string> key = {{"Idempotency-Key", "submit-web-1"}};
  auto first = call("POST", "/v1/allocations", alloc.dump(), key);
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_TRUE(first.header("idempotent-replayed").empty());
  auto before = fingerprint();
  auto retry = call("POST", "/v1/allocations", alloc.dump(), key);
  ASSERT_EQ(retry.status, 200u) << retry.body;
  EXPECT_EQ(retry.body, first.body);
  EXPECT_EQ(retry.header("x-mooring-index"), first.header("x-mooring-index"));
  EXPECT_EQ(retry.header("idempotent-replayed"), "true");
  EXPECT_EQ(fingerprint(), before) << "a replay writes nothing";
  EXPECT_EQ(parse(call("GET", "/v1/allocations")).size(), 1u);

  // The same key with another body: refused, naming the first request; nothing changes.
  alloc["Allocation"]["Name"] = "other";
  auto reuse = call("POST", "/v1/allocations", alloc.dump(), key);
  EXPECT_EQ(reuse.status, 422u);
  EXPECT_NE(reuse.body.find("submit-web-1"), std::string::npos) << reuse.body;
  EXPECT_NE(reuse.body.find("POST /v1/allocations"), std::string::npos) << reuse.body;
  EXPECT_EQ(fingerprint(), before);

  // A bad key is a 400; without a key every submit is a new allocation, as before.
  EXPECT_EQ(call("POST", "/v1/allocations", alloc.dump(), {{"Idempotency-Key", "has space"}}).status, 400u);
  EXPECT_EQ(call("POST", "/v1/allocations", alloc.dump()).status, 200u);
  EXPECT_EQ(call("POST", "/v1/allocations", alloc.dump()).status, 200u);
  EXPECT_EQ(parse(call("GET", "/v1/allocations")).size(), 3u);

  // A refusal is not kept: the same key works once the request can succeed.
  json missing = alloc;
  missing["Allocation"]["Volumes"]["data"]["Source"] = "vol-2";
  const std::map<std::string, std::string> key2 = {{"Idempotency-Key", "submit-later"}};
  EXPECT_EQ(call("POST", "/v1/allocations", missing.dump(), key2).status, 400u);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2", "hostpath", "multi-node-multi-writer")).status, 200u);
  missing["Allocation"]["Volumes"]["data"]["AccessMode"] = "multi-node-multi-writer";
  EXPECT_EQ(call("POST", "/v1/allocations", missing.dump(), key2).status, 200u);

  // Other writes take a key too: a repeated stop answers as the first did.
  const std::string id = parse(first)["ID"];
  auto stop = call("POST", "/v1/allocation/" + id + "/stop", "", {{"Idempotency-Key", "stop-1"}});
  ASSERT_EQ(stop.status, 200u);
  EXPECT_EQ(call("POST", "/v1/allocation/" + id + "/stop", "", {{"Idempotency-Key", "stop-1"}}).body, stop.body);
}

// Task.SecretEnv is accepted on submit and kept (for the node), but the API shows its key names
// only; Task.Env stays readable. No answer, list or event carries a SecretEnv value.
TEST_F(ApiHttpTest, SecretEnvIsAcceptedButOnlyItsKeyNamesAreEverReturned) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  json alloc = {{"Allocation",
                 {{"Name", "web"},
                  {"Volumes",
                   {{"data",
                     {{"Type", "csi"}, {"Source", "vol-1"}, {"AccessMode", "single-node-writer"},
                      {"AttachmentMode", "file-system"}}}}},
                  {"Task",
                   {{"Command", "/bin/sleep"},
                    {"Env", {{"MODE", "blue"}}},
                    {"SecretEnv", {{"DB_PASSWORD", "env-secret-9c1d"}}}}}}}};
  auto r = call("POST", "/v1/allocations", alloc.dump(), {{"Idempotency-Key", "secret-env-1"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body.find("env-secret-9c1d"), std::string::npos);
  const std::string id = parse(r)["ID"];
  auto got = call("GET", "/v1/allocation/" + id);
  EXPECT_EQ(parse(got)["Task"]["SecretEnv"], (json{{"DB_PASSWORD", "[REDACTED]"}}));
  EXPECT_EQ(parse(got)["Task"]["Env"]["MODE"], "blue");
  for (const auto* target : {"/v1/allocations", "/v1/events"}) {
    auto listed = call("GET", target);
    EXPECT_EQ(listed.body.find("env-secret-9c1d"), std::string::npos) << target;
  }
  auto replay = call("POST", "/v1/allocations", alloc.dump(), {{"Idempotency-Key", "secret-env-1"}});
  EXPECT_EQ(replay.body.find("env-secret-9c1d"), std::string::npos);
  server.settle();
  const auto kept = server.on_io([&] { return server.store.allocation(id)->task->secret_env; });
  EXPECT_EQ(kept, (std::map<std::string, std::string>{{"DB_PASSWORD", "env-secret-9c1d"}}));
}

TEST_F(ApiHttpTest, BadAllocationsGet400AndChangeNothing) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  auto before = fingerprint();
  auto vol = [](std::string source, std::string mode) {
    return json{{"Source", source}, {"AccessMode", mode}, {"AttachmentMode", "file-system"}};
  };
  std::vector<std::pair<json, std::string>> cases = {
      {json{{"Allocation", {{"Name", "w"}, {"Volumes", {{"d", vol("missing", "single-node-writer")}}}}}}, "volume not found"},
      {json{{"Allocation", {{"Name", "w"}, {"Volumes", {{"d", vol("vol-1", "multi-node-multi-writer")}}}}}}, "does not support"},
      {json{{"Allocation", {{"Name", "w"}, {"NodeID", "node-404"}}}}, "node not found"},
      {json{{"Allocation", {{"Name", "w"}, {"NodeID", "../x"}}}}, "NodeID"},
      {json{{"Allocation", {{"Name", "w"}, {"Volumes", {{"d", {{"AccessMode", "single-node-writer"}}}}}}}}, "Source"},
      {json{{"Allocation", {{"Name", "w"}, {"Volumes", {{"d", vol("../../etc", "single-node-writer")}}}}}}, "Source"},
      {json{{"Allocation", {{"Name", "w"}, {"Unknown", true}}}}, "Unknown"},
      {json{{"Nope", {}}}, "Nope"},
  };
  for (const auto& [body, needle] : cases) {
    auto r = call("POST", "/v1/allocations", body.dump());
    EXPECT_EQ(r.status, 400u) << body.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << body.dump() << " -> " << r.body;
  }
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(ApiHttpTest, EventsRecordWrites) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  ASSERT_EQ(call("DELETE", "/v1/volume/csi/vol-1").status, 200u);
  auto events = parse(call("GET", "/v1/events?topic=Volume"));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["Type"], "VolumeRegistered");
  EXPECT_EQ(events[1]["Type"], "VolumeDeregistered");
  EXPECT_EQ(events[1]["Key"], "vol-1");
  auto last = parse(call("GET", "/v1/events?per_page=1"));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["Type"], "VolumeDeregistered");
}

TEST_F(ApiHttpTest, BlockingQueryWakesOnChange) {
  auto first = call("GET", "/v1/volumes");
  std::string index = first.header("x-mooring-index");
  auto t0 = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return call("GET", "/v1/volumes?index=" + index + "&wait=60s"); });
  // Make sure the query is parked before writing.
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  auto r = waiter.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  ASSERT_EQ(r.status, 200u);
  EXPECT_GT(std::stoull(r.header("x-mooring-index")), std::stoull(index));
  EXPECT_EQ(parse(r).size(), 1u);
}

// A blocking read of one volume waits for that volume: other volumes' changes leave it parked
// (each wake-up is an answer to render and a client to wake), its own change or its removal
// answers it.
TEST_F(ApiHttpTest, BlockingQueryOnOneVolumeWakesOnlyForThatVolume) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  auto first = call("GET", "/v1/volume/csi/vol-1");
  const std::string index = first.header("x-mooring-index");
  auto waiter = std::async(std::launch::async, [&] {
    return call("GET", "/v1/volume/csi/vol-1?index=" + index + "&wait=60s");
  });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2")).status, 200u);  // durable once answered
  EXPECT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "woken by another volume's change";

  auto body = json::parse(volume_body("vol-1"));
  body["Volumes"][0]["Name"] = "renamed";
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", body.dump()).status, 200u);
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  auto r = waiter.get();
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(parse(r)["Name"], "renamed");
  EXPECT_GT(std::stoull(r.header("x-mooring-index")), std::stoull(index));

  // Gone: the waiter is answered (404), not left waiting for a volume that will not change.
  const std::string again = r.header("x-mooring-index");
  auto gone = std::async(std::launch::async, [&] {
    return call("GET", "/v1/volume/csi/vol-1?index=" + again + "&wait=60s");
  });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("DELETE", "/v1/volume/csi/vol-1").status, 200u);
  ASSERT_EQ(gone.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(gone.get().status, 404u);
}

// A volume not stored yet: the query waits for its table, as a list does.
TEST_F(ApiHttpTest, BlockingQueryOnAMissingVolumeWaitsForItsTable) {
  auto first = call("GET", "/v1/volumes");
  const std::string index = first.header("x-mooring-index");
  auto waiter = std::async(std::launch::async, [&] {
    return call("GET", "/v1/volume/csi/vol-1?index=" + index + "&wait=60s");
  });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1")).status, 200u);
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(waiter.get().status, 200u);
}

TEST_F(ApiHttpTest, BlockingQueryTimesOutCleanly) {
  auto first = call("GET", "/v1/volumes");
  std::string index = first.header("x-mooring-index");
  auto t0 = std::chrono::steady_clock::now();
  auto r = call("GET", "/v1/volumes?index=" + index + "&wait=300ms");
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("x-mooring-index"), index);
  EXPECT_GE(elapsed, 280ms);
  EXPECT_LT(elapsed, 20s);
  EXPECT_EQ(server.on_io([this] { return server.store.waiter_count(); }), 0u);
}

TEST_F(ApiHttpTest, ShutdownAnswersParkedBlockingQueries) {
  auto first = call("GET", "/v1/events");
  auto waiter = std::async(std::launch::async, [&] {
    return call("GET", "/v1/events?index=" + first.header("x-mooring-index") + "&wait=10m");
  });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  auto t0 = std::chrono::steady_clock::now();
  server.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
  EXPECT_EQ(waiter.get().status, 200u);
}

TEST_F(ApiHttpTest, CorsForDashboards) {
  // No foreign origin may read unless listed (--cors-read-origin): the browser withholds the answer.
  auto get = call("GET", "/v1/volumes", {}, {{"Origin", "https://dash.example"}});
  EXPECT_EQ(get.header("access-control-allow-origin"), "");
  auto pre = call("OPTIONS", "/v1/volume/csi/x", {},
                  {{"Origin", "https://dash.example"}, {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pre.status, 204u);
  EXPECT_EQ(pre.header("access-control-allow-methods"), "");
  EXPECT_EQ(pre.header("allow"), "GET, PUT, POST, DELETE, OPTIONS");
  auto before = fingerprint();
  auto put = call("PUT", "/v1/volume/csi/vol-1", volume_body("vol-1"), {{"Origin", "https://evil.example"}});
  EXPECT_EQ(put.status, 403u);
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("OPTIONS", "/v1/nope", {}, {{"Origin", "https://dash.example"}}).status, 404u);
}

TEST_F(ApiHttpTest, HealthAndReadiness) {
  auto h = call("GET", "/v1/status/health");
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(parse(h)["Status"], "ok");
  auto r = call("GET", "/v1/status/ready");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(parse(r)["Status"], "ready");
}

TEST(ApiNotLoaded, EverythingButHealthIs503) {
  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  FakeController controller;
  volumes::VolumeLifecycle volumes{io.get_executor(), store, controller};
  api::Api api{store, volumes};
  http::Request r;
  r.method = "GET";
  r.target = "/v1/volumes";
  EXPECT_EQ(answer(io, api, r).status, 503u);
  r.target = "/v1/status/ready";
  EXPECT_EQ(answer(io, api, r).status, 503u);
  r.target = "/v1/status/health";
  EXPECT_EQ(answer(io, api, r).status, 200u);
}

// Heartbeats that change nothing are not committed, so the stored LastHeartbeat is the last
// registration or report; the API shows when the leader last heard the node when that is later.
TEST(ApiNodes, LastHeartbeatIsWhenTheLeaderLastHeardTheNode) {
  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  ASSERT_TRUE(store.load());
  const auto stored = domain::from_unix_ms(1'700'000'000'000);
  Batch b;
  for (const char* id : {"heard", "silent"}) {
    domain::Node n;
    n.id = id;
    n.status = domain::NodeStatus::ready;
    n.last_heartbeat = stored;
    b.put(n);
  }
  ASSERT_TRUE(store.commit(std::move(b)));
  FakeController controller;
  volumes::VolumeLifecycle volumes{io.get_executor(), store, controller};
  const auto heard = stored + std::chrono::minutes(5);
  api::ApiOptions options;
  options.last_heard = [&](const std::string& id) -> std::optional<domain::Time> {
    if (id == "heard") return heard;
    return std::nullopt;
  };
  api::Api api{store, volumes, options};
  auto get = [&](const std::string& target) {
    http::Request r;
    r.method = "GET";
    r.target = target;
    auto res = answer(io, api, r);
    EXPECT_EQ(res.status, 200u) << target << ": " << res.body;
    return json::parse(res.body);
  };
  EXPECT_EQ(get("/v1/node/heard")["LastHeartbeat"], domain::format_time(heard));
  EXPECT_EQ(get("/v1/node/silent")["LastHeartbeat"], domain::format_time(stored));
  for (const auto& n : get("/v1/nodes"))
    EXPECT_EQ(n["LastHeartbeat"], domain::format_time(n["ID"] == "heard" ? heard : stored)) << n.dump();
  EXPECT_EQ(store.node("heard")->last_heartbeat, stored) << "a read changes nothing";

  // An older memory (a registration committed since) does not hide the stored time.
  options.last_heard = [&](const std::string&) -> std::optional<domain::Time> { return stored - std::chrono::minutes(1); };
  api::Api older{store, volumes, options};
  http::Request r;
  r.method = "GET";
  r.target = "/v1/node/heard";
  EXPECT_EQ(json::parse(answer(io, older, r).body)["LastHeartbeat"], domain::format_time(stored));
}

}  // namespace mooring::controlplane
