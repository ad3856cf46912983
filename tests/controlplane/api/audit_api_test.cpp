// The audit log of REST writes over real sockets, ACLs on: every PUT/POST/DELETE that reaches the
// server gets one line, including those refused before routing (413, 431, an unparsable request,
// an ambiguous Transfer-Encoding) and a 500; each create names the id it made (allocation,
// volume, snapshot, group snapshot, token, policy) and each snapshot delete the id it deleted;
// never a secret, a query string or a header value.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "services/controlplane/api/audit_writes.hpp"
#include "services/controlplane/audit/audit_log.hpp"
#include "shared/tls/certificates.hpp"
#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/files.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;

namespace {

std::unique_ptr<audit::AuditLog> open_log(const std::filesystem::path& path) {
  auto log = audit::AuditLog::open({path});
  if (!log) throw std::runtime_error(log.error());
  return std::move(*log);
}

json parse(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

}  // namespace

class AuditApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto plugin = fixtures::plugin("hostpath", "node-1", /*controller=*/true);
    for (auto* map : {&plugin.controllers, &plugin.nodes})
      for (auto& [id, inst] : *map) {
        auto& info = *inst.controller_info;
        info.supports_create_delete = info.supports_create_delete_snapshot = info.supports_group_snapshot =
            info.supports_list_snapshots = true;
      }
    Batch b;
    b.put(fixtures::ready_node(plugin, "node-1"));  // the plugin's aggregate follows its instance
    b.put(fixtures::volume("vol-1"));
    b.put(fixtures::volume("vol-2"));
    server.seed(std::move(b));
    http::ServerConfig config;
    config.body_limit = 4096;
    config.header_limit = 2048;
    server.start(config);
    mgmt = parse(call("POST", "/v1/acl/bootstrap"))["SecretID"];
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {},
                  std::map<std::string, std::string> headers = {}) {
    if (!mgmt.empty()) headers.emplace("X-Mooring-Token", mgmt);
    return http_request(server.port, method, target, body, headers);
  }

  template <class Rpc, class Resp>
  void script(Rpc FakeController::*rpc, Resp answer) {
    server.on_io([&] {
      (server.controller.*rpc).script.push_back(FakeController::ok(std::move(answer)));
      return 0;
    });
  }

  std::vector<json> lines() {
    std::vector<json> out;
    std::istringstream in(test::read_file(dir / "audit.log"));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
  // The one line of `method path` (the last when it was written several times).
  json line(const std::string& method, const std::string& path) {
    json found;
    for (auto& l : lines())
      if (l["Method"] == method && l.value("Path", "") == path) found = l;
    EXPECT_TRUE(found.is_object()) << "no audit line for " << method << " " << path << " in " << json(lines()).dump();
    return found;
  }

  test::TempDir dir{"mooring-audit-api"};
  std::unique_ptr<audit::AuditLog> log = open_log(dir / "audit.log");
  test::TestPki pki{dir / "pki"};  // the enrollment CA
  ApiServer server{api::ApiOptions{.audit = log.get(), .acl = true, .enrollment_ca = tls::ca_paths(pki.dir())}};
  std::string mgmt;
};

TEST_F(AuditApiTest, EachCreateNamesTheIdItMadeAndNeverItsSecret) {
  auto policy = call("PUT", "/v1/acl/policy/readers", R"({"Rules":{"Namespace":{"default":{"Policy":"read"}}}})");
  ASSERT_EQ(policy.status, 200u) << policy.body;
  auto token = call("PUT", "/v1/acl/token", R"({"Name":"reader","Policies":["readers"]})");
  ASSERT_EQ(token.status, 200u) << token.body;
  const std::string accessor = parse(token)["AccessorID"], secret = parse(token)["SecretID"];

  ::csi::v1::ValidateVolumeCapabilitiesResponse valid;  // registering asks the plugin to confirm the capabilities
  valid.mutable_confirmed();
  script(&FakeController::validations, valid);
  auto registered = call("PUT", "/v1/volume/csi/vol-3",
                         json{{"Volumes", {{{"ID", "vol-3"}, {"PluginID", "hostpath"}, {"ExternalID", "ext-3"},
                                            {"Secrets", {{"token", "vol-secret"}}},
                                            {"RequestedCapabilities",
                                             {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
                             .dump());
  ASSERT_EQ(registered.status, 200u) << registered.body;
  ::csi::v1::CreateVolumeResponse made;
  made.mutable_volume()->set_volume_id("ext-4");
  script(&FakeController::creates, made);
  auto created = call("PUT", "/v1/volume/csi/vol-4/create",
                      json{{"Volumes", {{{"ID", "vol-4"}, {"PluginID", "hostpath"},
                                         {"RequestedCapabilities",
                                          {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
                          .dump());
  ASSERT_EQ(created.status, 200u) << created.body;

  auto alloc = call("POST", "/v1/allocations",
                    json{{"Allocation", {{"Name", "web"}, {"Task", {{"Command", "/bin/true"},
                                                                    {"SecretEnv", {{"KEY", "task-secret"}}}}}}}}
                        .dump());
  ASSERT_EQ(alloc.status, 200u) << alloc.body;

  ::csi::v1::CreateSnapshotResponse snap;
  *snap.mutable_snapshot() = FakeController::ready_snapshot("snap-1", "ext-vol-1");
  script(&FakeController::snapshots, snap);
  auto snapshots = call("PUT", "/v1/volumes/snapshot?secret_query=query-secret",
                        R"({"Snapshots":[{"SourceVolumeID":"vol-1","Name":"nightly"}]})",
                        {{"X-Mooring-CSI-Secrets", "token=header-secret"}});
  ASSERT_EQ(snapshots.status, 200u) << snapshots.body;

  ::csi::v1::CreateVolumeGroupSnapshotResponse group;
  group.mutable_group_snapshot()->set_group_snapshot_id("group-1");
  group.mutable_group_snapshot()->set_ready_to_use(true);
  *group.mutable_group_snapshot()->add_snapshots() = FakeController::ready_snapshot("snap-a", "ext-vol-1", "group-1");
  *group.mutable_group_snapshot()->add_snapshots() = FakeController::ready_snapshot("snap-b", "ext-vol-2", "group-1");
  script(&FakeController::group_creates, group);
  auto grouped = call("PUT", "/v1/volumes/group-snapshot",
                      R"({"GroupSnapshot":{"Name":"g","SourceVolumeIDs":["vol-1","vol-2"]}})");
  ASSERT_EQ(grouped.status, 200u) << grouped.body;

  script(&FakeController::snapshot_deletes, ::csi::v1::DeleteSnapshotResponse{});
  ASSERT_EQ(call("DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id=snap-1").status, 200u);
  // The group delete finds its members, and so whose they are, in the plugin's snapshot list.
  ::csi::v1::ListSnapshotsResponse members;
  *members.add_entries()->mutable_snapshot() = FakeController::ready_snapshot("snap-a", "ext-vol-1", "group-1");
  *members.add_entries()->mutable_snapshot() = FakeController::ready_snapshot("snap-b", "ext-vol-2", "group-1");
  script(&FakeController::snapshot_lists, members);
  script(&FakeController::group_deletes, ::csi::v1::DeleteVolumeGroupSnapshotResponse{});
  auto ungrouped = call("DELETE", "/v1/volumes/group-snapshot?plugin_id=hostpath&group_snapshot_id=group-1");
  ASSERT_EQ(ungrouped.status, 200u) << ungrouped.body;

  const std::string bootstrap_accessor = line("POST", "/v1/acl/bootstrap")["Object"];
  EXPECT_EQ(bootstrap_accessor.size(), 36u);  // a UUID, never the management SecretID
  EXPECT_EQ(line("PUT", "/v1/acl/policy/readers")["Object"], "readers");
  EXPECT_EQ(line("PUT", "/v1/acl/token")["Object"], accessor);
  EXPECT_EQ(line("PUT", "/v1/volume/csi/vol-3")["Object"], "vol-3");
  EXPECT_EQ(line("PUT", "/v1/volume/csi/vol-4/create")["Object"], "vol-4");
  EXPECT_EQ(line("POST", "/v1/allocations")["Object"], parse(alloc)["ID"]);
  EXPECT_EQ(line("PUT", "/v1/volumes/snapshot")["Object"], "snap-1");
  EXPECT_EQ(line("PUT", "/v1/volumes/group-snapshot")["Object"], "group-1,snap-a,snap-b");
  EXPECT_EQ(line("DELETE", "/v1/volumes/snapshot")["Object"], "snap-1");
  EXPECT_EQ(line("DELETE", "/v1/volumes/group-snapshot")["Object"], "group-1");
  for (const auto& l : lines()) {
    EXPECT_EQ(l["Status"], 200) << l.dump();
    if (l["Path"] != "/v1/acl/bootstrap") {
      EXPECT_EQ(l["Actor"]["ID"], bootstrap_accessor) << l.dump();
    }
  }
  const auto text = test::read_file(dir / "audit.log");
  for (const auto& never : {secret, mgmt, std::string("vol-secret"), std::string("task-secret"),
                            std::string("query-secret"), std::string("header-secret")})
    EXPECT_EQ(text.find(never), std::string::npos) << never;
}

TEST_F(AuditApiTest, WritesRefusedBeforeRoutingAreAuditedWithWhatIsKnownOfThem) {
  auto big_body = call("PUT", "/v1/volume/csi/vol-9?namespace=team-a", std::string(8000, 'x'));
  EXPECT_EQ(big_body.status, 413u);
  auto big_header = call("POST", "/v1/allocations?x=query-secret", "{}", {{"X-Pad", std::string(4000, 'h')}});
  EXPECT_EQ(big_header.status, 431u);
  HttpConnection unparsable(server.port);
  EXPECT_EQ(unparsable.raw("DELETE /v1/volume/csi/vol-1?token=query-secret HTTP/1.1\r\nHost: a\r\nContent-Length: zz\r\n\r\n")
                .status,
            400u);
  HttpConnection garbage(server.port);
  EXPECT_EQ(garbage.raw("\x01\x02 not http at all\r\n\r\n").status, 400u);
  HttpConnection smuggler(server.port);
  EXPECT_EQ(smuggler.raw("POST /v1/allocations HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n").status, 501u);
  // A read refused the same way is not a write: no line.
  HttpConnection big_read(server.port);
  EXPECT_EQ(big_read.raw("GET /v1/volumes HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(4000, 'h') + "\r\n\r\n").status,
            431u);

  auto body_line = line("PUT", "/v1/volume/csi/vol-9");
  EXPECT_EQ(body_line["Status"], 413);
  EXPECT_EQ(body_line["Namespace"], "");  // not read: nothing of the query is
  EXPECT_TRUE(body_line["Remote"].get<std::string>().starts_with("127.0.0.1:")) << body_line.dump();
  EXPECT_EQ(body_line["Actor"]["Type"], "anonymous");  // no token was looked at
  EXPECT_EQ(line("POST", "/v1/allocations")["Status"], 501);  // the last POST: the smuggler's
  EXPECT_EQ(line("DELETE", "/v1/volume/csi/vol-1")["Status"], 400);
  std::vector<unsigned> statuses;
  for (const auto& l : lines()) {
    if (l["Method"] == "POST" && l["Path"] == "/v1/allocations") statuses.push_back(l["Status"]);
    EXPECT_NE(l["Method"], "GET") << l.dump();
  }
  EXPECT_EQ(statuses, (std::vector<unsigned>{431, 501}));
  for (const auto& l : lines()) EXPECT_NE(l["Method"], "") << l.dump();  // not HTTP at all: logged, not audited
  EXPECT_EQ(test::read_file(dir / "audit.log").find("query-secret"), std::string::npos);
}

TEST_F(AuditApiTest, AnAnswerThatThrowsIsA500AuditedWithItsCallerAndObject) {
  server.on_io([this] {
    server.controller.throw_next = true;
    return 0;
  });
  auto r = call("DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id=snap-9");
  EXPECT_EQ(r.status, 500u);
  EXPECT_EQ(parse(r)["Error"], "internal error");
  auto l = line("DELETE", "/v1/volumes/snapshot");
  EXPECT_EQ(l["Status"], 500);
  EXPECT_EQ(l["Object"], "snap-9");
  EXPECT_EQ(l["Actor"]["ID"], line("POST", "/v1/acl/bootstrap")["Object"]);
  // The server goes on answering.
  EXPECT_EQ(call("GET", "/v1/volumes").status, 200u);
}


// Enrollment asks for no ACL token (its credential is checked by the endpoint), yet the audit line
// names who asked: a management token's forced re-key as that token; an introduction's enrollment
// as anonymous, naming the introduction used in its object.
TEST_F(AuditApiTest, AnEnrollmentNamesTheManagementTokenOrTheIntroductionThatAsked) {
  const auto csr = [](const std::string& node) {
    auto pair = tls::create_csr({tls::Role::agent, node});
    EXPECT_TRUE(pair) << pair.error();
    return json{{"CSR", pair->csr_pem}};
  };
  auto rekey = call("POST", "/v1/node/node-7/enroll", csr("node-7").dump());
  ASSERT_EQ(rekey.status, 200u) << rekey.body;
  EXPECT_FALSE(parse(rekey).contains("IntroductionAccessorID"));
  const std::string mgmt_accessor = line("POST", "/v1/acl/bootstrap")["Object"];
  const auto by_mgmt = line("POST", "/v1/node/node-7/enroll");
  EXPECT_EQ(by_mgmt["Actor"]["Type"], "token") << by_mgmt.dump();
  EXPECT_EQ(by_mgmt["Actor"]["ID"], mgmt_accessor);
  EXPECT_EQ(by_mgmt["Object"], "node-7");

  auto intro = parse(call("POST", "/v1/node/node-8/intro"));
  auto body = csr("node-8");
  body["IntroToken"] = intro["SecretID"];
  auto enrolled = http_request(server.port, "POST", "/v1/node/node-8/enroll", body.dump(), {});
  ASSERT_EQ(enrolled.status, 200u) << enrolled.body;
  EXPECT_EQ(parse(enrolled)["IntroductionAccessorID"], intro["AccessorID"]);
  const auto by_intro = line("POST", "/v1/node/node-8/enroll");
  EXPECT_EQ(by_intro["Actor"]["Type"], "anonymous") << by_intro.dump();
  EXPECT_EQ(by_intro["Object"], "node-8 (introduction token " + intro["AccessorID"].get<std::string>() + ")");
  EXPECT_EQ(test::read_file(dir / "audit.log").find(intro["SecretID"].get<std::string>()), std::string::npos);
}


// Requests that are not HTTP at all are logged at most once a period, counting those left out.
TEST(UnparsedRefusalsTest, OneLineAPeriodCountingThoseLeftOut) {
  api::UnparsedRefusals refusals{std::chrono::seconds(60)};
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(refusals.take(t0), 0u);
  for (int i = 1; i <= 500; ++i) EXPECT_FALSE(refusals.take(t0 + std::chrono::milliseconds(i)));
  EXPECT_EQ(refusals.take(t0 + std::chrono::seconds(60)), 500u);
  EXPECT_FALSE(refusals.take(t0 + std::chrono::seconds(61)));
  EXPECT_FALSE(api::is_write(""));
  EXPECT_TRUE(api::is_write("DELETE"));
}

}  // namespace mooring::controlplane
