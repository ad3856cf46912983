// The ControlPlane gRPC service against a real socket: registration and heartbeats feed the
// plugin API, liveness, the allocation long poll, status updates that release claims, and
// ClaimVolume's intent → publish → context path with every publish outcome.
#include <future>

#include "tests/controlplane/agentservice/agent_fixture.hpp"

#include <filesystem>
#include <sstream>

#include "services/controlplane/audit/audit_log.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

v1::PluginFingerprint fingerprint(const std::string& plugin, const std::string& node, bool controller,
                                  bool healthy = true) {
  v1::PluginFingerprint fp;
  fp.set_plugin_id(plugin);
  fp.set_type(controller ? v1::PLUGIN_TYPE_MONOLITH : v1::PLUGIN_TYPE_NODE);
  fp.set_healthy(healthy);
  fp.set_health_description(healthy ? "ok" : "probe failed");
  fp.set_provider("hostpath.mooring.dev");
  fp.set_version("0.1.0");
  fp.set_requires_controller_plugin(controller);
  if (controller) fp.mutable_controller_info()->set_supports_attach_detach(true);
  fp.mutable_node_info()->set_csi_node_id("csi-" + node);
  return fp;
}

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout = 10s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

std::string volume_body(const std::string& id, const std::string& mode = "single-node-writer") {
  return json{{"Volumes",
               {{{"ID", id},
                 {"PluginID", "hostpath"},
                 {"ExternalID", "ext-" + id},
                 {"RequestedCapabilities", {{{"AccessMode", mode}, {"AttachmentMode", "file-system"}}}}}}}}
      .dump();
}

}  // namespace

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { server.start(); }

  grpc::Status register_node(const std::string& id, std::vector<v1::PluginFingerprint> plugins) {
    v1::RegisterNodeRequest req;
    req.set_node_id(id);
    req.set_name("name-" + id);
    req.set_address("127.0.0.1:4702");
    req.set_agent_version("1.2.3");
    (*req.mutable_attributes())["arch"] = "amd64";
    for (auto& p : plugins) *req.add_plugins() = p;
    v1::RegisterNodeResponse resp;
    auto st = server.stub->RegisterNode(context().get(), req, &resp);
    if (st.ok()) {
      EXPECT_EQ(resp.heartbeat_ttl_ms(), server.liveness.pace().ttl.count());
    }
    return st;
  }

  v1::HeartbeatResponse heartbeat(const std::string& id, std::vector<v1::PluginFingerprint> plugins,
                                  std::vector<v1::NodeEvent> events = {}, grpc::Status* status = nullptr) {
    v1::HeartbeatRequest req;
    req.set_node_id(id);
    for (auto& p : plugins) *req.add_plugins() = p;
    for (auto& e : events) *req.add_events() = e;
    v1::HeartbeatResponse resp;
    auto st = server.stub->Heartbeat(context().get(), req, &resp);
    if (status) {
      *status = st;
    } else {
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
    return resp;
  }

  HttpResult http(const std::string& method, const std::string& target, const std::string& body = {}) {
    return http_request(server.http_port, method, target, body);
  }
  json get(const std::string& target) {
    auto r = http("GET", target);
    EXPECT_EQ(r.status, 200u) << target << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }

  // Registers node n1 running the plugin (a monolith with PUBLISH_UNPUBLISH when `controller`)
  // and volume `vol`.
  void cluster(bool controller, const std::string& vol = "vol-1", const std::string& mode = "single-node-writer") {
    ASSERT_TRUE(register_node("n1", {fingerprint("hostpath", "n1", controller)}).ok());
    // A plugin with a controller checks the registration (ValidateVolumeCapabilities): it agrees.
    if (controller)
      server.on_io([this] {
        server.api.controller.validations.script.push_back(FakeController::confirmed());
        return 0;
      });
    auto r = http("PUT", "/v1/volume/csi/" + vol, volume_body(vol, mode));
    ASSERT_EQ(r.status, 200u) << r.body;
  }

  std::string submit(const std::string& vol, const std::string& mode = "single-node-writer", bool read_only = false,
                     const std::string& node = "n1") {
    json body = {{"Allocation",
                  {{"Name", "web"},
                   {"NodeID", node},
                   {"Volumes",
                    {{"data",
                      {{"Type", "csi"},
                       {"Source", vol},
                       {"AccessMode", mode},
                       {"AttachmentMode", "file-system"},
                       {"ReadOnly", read_only}}}}}}}};
    auto r = http("POST", "/v1/allocations", body.dump());
    EXPECT_EQ(r.status, 200u) << r.body;
    return json::parse(r.body, nullptr, false).value("ID", "");
  }

  grpc::Status claim(const std::string& vol, const std::string& alloc, v1::ClaimVolumeResponse* out = nullptr,
                     v1::ClaimMode mode = v1::CLAIM_MODE_WRITE, std::chrono::milliseconds timeout = 10s,
                     const std::string& node = "n1") {
    v1::ClaimVolumeRequest req;
    req.set_volume_id(vol);
    req.set_alloc_id(alloc);
    req.set_node_id(node);
    req.set_mode(mode);
    req.set_access_mode(v1::ACCESS_MODE_SINGLE_NODE_WRITER);
    req.set_attachment_mode(v1::ATTACHMENT_MODE_FILE_SYSTEM);
    v1::ClaimVolumeResponse resp;
    auto st = server.stub->ClaimVolume(context(timeout).get(), req, &resp);
    if (out) *out = resp;
    return st;
  }

  grpc::Status update(const std::string& alloc, v1::ClientStatus status, const std::string& node = "n1") {
    v1::UpdateAllocationsRequest req;
    req.set_node_id(node);
    auto* u = req.add_updates();
    u->set_alloc_id(alloc);
    u->set_client_status(status);
    auto* e = u->add_events();
    e->set_type("Status");
    e->set_message("now " + v1::ClientStatus_Name(status));
    v1::UpdateAllocationsResponse resp;
    return server.stub->UpdateAllocations(context().get(), req, &resp);
  }

  grpc::Status unpublish(const std::string& vol, const std::string& alloc, const std::string& node = "n1") {
    v1::UnpublishVolumeRequest req;
    req.set_volume_id(vol);
    req.set_alloc_id(alloc);
    req.set_node_id(node);
    v1::UnpublishVolumeResponse resp;
    return server.stub->UnpublishVolume(context().get(), req, &resp);
  }

  json claims(const std::string& vol) { return get("/v1/volume/csi/" + vol)["Claims"]; }

  int calls() {
    return server.on_io([this] { return server.publisher.calls; });
  }

  std::size_t writes() {
    server.api.settle();
    return server.on_io([this] { return server.api.backend.transactions.size(); });
  }

  // Every call is audited, as in the binary, so a test can read what the log says.
  test::TempDir audit_dir{"mooring-audit"};
  std::unique_ptr<audit::AuditLog> audit_log = audit::AuditLog::open({audit_dir / "audit.log"}).value();
  NodeRegistrations registrations;  // read on the server's io thread (on_io)
  AgentServer server{LivenessOptions{.ttl = 10s},
                     AgentServiceOptions{.audit = audit_log.get(), .registrations = &registrations},
                     api::ApiOptions{.audit = audit_log.get()}};

  std::vector<json> audit_lines() {
    std::vector<json> out;
    std::istringstream in(test::read_file(audit_dir / "audit.log"));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

TEST_F(AgentServiceTest, RegisterStoresTheNodeAndItsPluginsAppearInThePluginApi) {
  ASSERT_TRUE(register_node("n1", {fingerprint("hostpath", "n1", true)}).ok());
  auto node = get("/v1/node/n1");
  EXPECT_EQ(node["Status"], "ready");
  EXPECT_EQ(node["Name"], "name-n1");
  EXPECT_EQ(node["Address"], "127.0.0.1:4702");
  EXPECT_EQ(node["Attributes"]["arch"], "amd64");
  EXPECT_EQ(node["Attributes"]["mooring.agent_version"], "1.2.3");
  auto p = get("/v1/plugin/csi/hostpath");
  EXPECT_EQ(p["Provider"], "hostpath.mooring.dev");
  EXPECT_EQ(p["ControllerRequired"], true);
  EXPECT_EQ(p["ControllersHealthy"], 1);
  EXPECT_EQ(p["NodesHealthy"], 1);
  EXPECT_EQ(p["Nodes"]["n1"]["NodeInfo"]["ID"], "csi-n1");

  // A second node whose plugin is unhealthy counts as expected, not healthy.
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false, false)}).ok());
  p = get("/v1/plugin/csi/hostpath");
  EXPECT_EQ(p["NodesExpected"], 2);
  EXPECT_EQ(p["NodesHealthy"], 1);
  heartbeat("n2", {fingerprint("hostpath", "n2", false, true)});
  EXPECT_EQ(get("/v1/plugin/csi/hostpath")["NodesHealthy"], 2);

  // Idempotent: registering again keeps one node and one instance.
  ASSERT_TRUE(register_node("n1", {fingerprint("hostpath", "n1", true)}).ok());
  EXPECT_EQ(get("/v1/nodes").size(), 2u);
  EXPECT_EQ(get("/v1/plugin/csi/hostpath")["NodesExpected"], 2);
}

// Each registration is a new agent for the node (the router resends a call that failed against
// the previous one); heartbeats are not, nor is a refused registration.
TEST_F(AgentServiceTest, EveryRegistrationOfANodeIsCountedHeartbeatsAreNot) {
  auto count = [&](const std::string& id) { return server.on_io([&] { return registrations.count(id); }); };
  EXPECT_EQ(count("n1"), 0u);
  ASSERT_TRUE(register_node("n1", {}).ok());
  heartbeat("n1", {});
  EXPECT_EQ(count("n1"), 1u);
  ASSERT_TRUE(register_node("n1", {}).ok());
  EXPECT_EQ(count("n1"), 2u);
  v1::RegisterNodeRequest no_address;
  no_address.set_node_id("n1");
  v1::RegisterNodeResponse resp;
  EXPECT_FALSE(server.stub->RegisterNode(context().get(), no_address, &resp).ok());
  EXPECT_EQ(count("n1"), 2u);
  EXPECT_EQ(count("n2"), 0u);
}

TEST_F(AgentServiceTest, PluginAbsentFromAHeartbeatIsRemovedAndTheLastInstanceDeletesIt) {
  ASSERT_TRUE(register_node("n1", {fingerprint("hostpath", "n1", true), fingerprint("other", "n1", false)}).ok());
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false)}).ok());
  heartbeat("n1", {fingerprint("hostpath", "n1", true)});
  EXPECT_EQ(http("GET", "/v1/plugin/csi/other").status, 404u);
  heartbeat("n1", {});
  auto p = get("/v1/plugin/csi/hostpath");
  EXPECT_EQ(p["ControllersExpected"], 0);
  EXPECT_EQ(p["NodesExpected"], 1);
  heartbeat("n2", {});
  EXPECT_EQ(http("GET", "/v1/plugin/csi/hostpath").status, 404u);
  EXPECT_TRUE(get("/v1/node/n1")["Plugins"].empty());
}

TEST_F(AgentServiceTest, HeartbeatFromAnUnknownNodeAnswersKnownFalse) {
  auto resp = heartbeat("stranger", {});
  EXPECT_FALSE(resp.known());
  EXPECT_EQ(resp.heartbeat_ttl_ms(), 10000);
  EXPECT_EQ(http("GET", "/v1/node/stranger").status, 404u);
  ASSERT_TRUE(register_node("stranger", {}).ok());
  EXPECT_TRUE(heartbeat("stranger", {}).known());
}

TEST_F(AgentServiceTest, UnchangedHeartbeatsWriteNothing) {
  ASSERT_TRUE(register_node("n1", {fingerprint("hostpath", "n1", true)}).ok());
  auto before = writes();
  for (int i = 0; i < 5; ++i) {
    auto fp = fingerprint("hostpath", "n1", true);
    fp.set_update_time_ms(1000 + i);  // a new fingerprint time alone is no change
    heartbeat("n1", {fp});
  }
  EXPECT_EQ(writes(), before);
  heartbeat("n1", {fingerprint("hostpath", "n1", true, false)});
  EXPECT_EQ(writes(), before + 1);
  EXPECT_EQ(get("/v1/plugin/csi/hostpath")["NodesHealthy"], 0);
}

TEST_F(AgentServiceTest, HeartbeatEventsAreKeptOnTheNodeAndAsEvents) {
  ASSERT_TRUE(register_node("n1", {}).ok());
  v1::NodeEvent e;
  e.set_time_ms(1700000000000);
  e.set_subsystem("plugin");
  e.set_message("plugin hostpath restarted");
  (*e.mutable_details())["plugin_id"] = "hostpath";
  heartbeat("n1", {}, {e});
  auto node = get("/v1/node/n1");
  ASSERT_FALSE(node["Events"].empty());
  EXPECT_EQ(node["Events"].back()["Message"], "plugin hostpath restarted");
  auto events = get("/v1/events?topic=Node&type=NodeEvent");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["Key"], "n1");
}

TEST_F(AgentServiceTest, BadNodeRequestsAreRejected) {
  auto st = register_node("../etc", {});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("node id"), std::string::npos) << st.error_message();
  v1::RegisterNodeRequest req;
  req.set_node_id("n1");
  v1::RegisterNodeResponse resp;
  st = server.stub->RegisterNode(context().get(), req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("address"), std::string::npos);
  auto bad = fingerprint("", "n1", false);
  EXPECT_EQ(register_node("n1", {bad}).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(http("GET", "/v1/node/n1").status, 404u);  // nothing written
}

TEST(AgentLiveness, NodeGoesDownAfterTheTtlAndComesBackOnHeartbeat) {
  AgentServer server{LivenessOptions{.ttl = 300ms}};
  server.start();
  v1::RegisterNodeRequest req;
  req.set_node_id("n1");
  req.set_address("127.0.0.1:4702");
  *req.add_plugins() = fingerprint("hostpath", "n1", true);
  v1::RegisterNodeResponse resp;
  ASSERT_TRUE(server.stub->RegisterNode(context().get(), req, &resp).ok());
  EXPECT_EQ(resp.heartbeat_ttl_ms(), 300);
  auto status = [&] {
    auto r = http_request(server.http_port, "GET", "/v1/node/n1");
    return json::parse(r.body, nullptr, false).value("Status", "");
  };
  std::string s;
  for (int i = 0; i < 1000 && (s = status()) != "down"; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(s, "down");
  auto plugin = json::parse(http_request(server.http_port, "GET", "/v1/plugin/csi/hostpath").body);
  EXPECT_EQ(plugin["NodesHealthy"], 0);
  EXPECT_EQ(plugin["ControllersHealthy"], 0);
  auto events = json::parse(http_request(server.http_port, "GET", "/v1/events?type=NodeDown").body);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0]["Message"].get<std::string>().find("no heartbeat"), std::string::npos);

  v1::HeartbeatRequest hb;
  hb.set_node_id("n1");
  *hb.add_plugins() = fingerprint("hostpath", "n1", true);
  v1::HeartbeatResponse hr;
  ASSERT_TRUE(server.stub->Heartbeat(context().get(), hb, &hr).ok());
  EXPECT_TRUE(hr.known());
  EXPECT_EQ(status(), "ready");
  plugin = json::parse(http_request(server.http_port, "GET", "/v1/plugin/csi/hostpath").body);
  EXPECT_EQ(plugin["NodesHealthy"], 1);
  server.stop();
}

TEST_F(AgentServiceTest, WatchAllocationsWakesOnANewAllocationForTheNode) {
  cluster(false);
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false)}).ok());
  v1::WatchAllocationsRequest first;
  first.set_node_id("n1");
  first.set_wait_ms(5000);
  v1::WatchAllocationsResponse look;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(server.stub->WatchAllocations(context().get(), first, &look).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);  // min_index 0 answers at once
  EXPECT_GE(look.index(), 1u);
  EXPECT_EQ(look.allocations_size(), 0);

  auto watcher = std::async(std::launch::async, [&] {
    v1::WatchAllocationsRequest req;
    req.set_node_id("n1");
    req.set_min_index(look.index());
    req.set_wait_ms(20000);
    v1::WatchAllocationsResponse resp;
    auto st = server.stub->WatchAllocations(context(30s).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  });
  std::this_thread::sleep_for(200ms);
  submit("vol-1", "single-node-writer", false, "n2");  // another node's: no wake
  EXPECT_EQ(watcher.wait_for(300ms), std::future_status::timeout);
  auto id = submit("vol-1", "single-node-writer", false, "n1");
  ASSERT_EQ(watcher.wait_for(10s), std::future_status::ready);
  auto resp = watcher.get();
  ASSERT_EQ(resp.allocations_size(), 1);
  EXPECT_EQ(resp.allocations(0).id(), id);
  EXPECT_EQ(resp.allocations(0).desired_status(), v1::DESIRED_STATUS_RUN);
  EXPECT_EQ(resp.allocations(0).volumes(0).source(), "vol-1");
  EXPECT_GT(resp.index(), look.index());
}

TEST_F(AgentServiceTest, WatchAllocationsTimesOutCleanlyWithTheCurrentSet) {
  cluster(false);
  auto id = submit("vol-1");
  v1::WatchAllocationsRequest req;
  req.set_node_id("n1");
  v1::WatchAllocationsResponse look;
  ASSERT_TRUE(server.stub->WatchAllocations(context().get(), req, &look).ok());
  ASSERT_EQ(look.allocations_size(), 1);
  req.set_min_index(look.index());
  req.set_wait_ms(400);
  v1::WatchAllocationsResponse resp;
  auto t0 = std::chrono::steady_clock::now();
  auto st = server.stub->WatchAllocations(context().get(), req, &resp);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_GE(took, 350ms);
  EXPECT_LT(took, 8s);
  EXPECT_EQ(resp.index(), look.index());
  ASSERT_EQ(resp.allocations_size(), 1);
  EXPECT_EQ(resp.allocations(0).id(), id);

  req.set_node_id("ghost");
  EXPECT_EQ(server.stub->WatchAllocations(context().get(), req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Task.SecretEnv reaches the node the allocation is placed on (its watch), and no other node's.
TEST_F(AgentServiceTest, SecretEnvGoesOnlyToTheNodeTheAllocationIsPlacedOn) {
  cluster(false);
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false)}).ok());
  json body = {{"Allocation",
                {{"Name", "web"},
                 {"NodeID", "n1"},
                 {"Task", {{"Command", "/bin/true"}, {"SecretEnv", {{"TOKEN", "watch-secret-51e"}}}}}}}};
  auto r = http("POST", "/v1/allocations", body.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  v1::WatchAllocationsRequest req;
  req.set_node_id("n1");
  v1::WatchAllocationsResponse resp;
  ASSERT_TRUE(server.stub->WatchAllocations(context().get(), req, &resp).ok());
  ASSERT_EQ(resp.allocations_size(), 1);
  EXPECT_EQ(resp.allocations(0).task().secret_env().at("TOKEN"), "watch-secret-51e");
  req.set_node_id("n2");
  v1::WatchAllocationsResponse other;
  ASSERT_TRUE(server.stub->WatchAllocations(context().get(), req, &other).ok());
  EXPECT_EQ(other.allocations_size(), 0);
  EXPECT_EQ(other.SerializeAsString().find("watch-secret-51e"), std::string::npos);
}

TEST_F(AgentServiceTest, UpdateAllocationsToTerminalMarksItsClaimsForRelease) {
  cluster(false);
  auto id = submit("vol-1");
  ASSERT_TRUE(claim("vol-1", id).ok());
  ASSERT_TRUE(update(id, v1::CLIENT_STATUS_RUNNING).ok());
  auto a = get("/v1/allocation/" + id);
  EXPECT_EQ(a["ClientStatus"], "running");
  EXPECT_EQ(a["Events"].back()["Message"], "now CLIENT_STATUS_RUNNING");
  ASSERT_EQ(claims("vol-1").size(), 1u);
  EXPECT_EQ(claims("vol-1")[0]["State"], "taken");

  ASSERT_TRUE(update(id, v1::CLIENT_STATUS_COMPLETE).ok());
  EXPECT_EQ(get("/v1/allocation/" + id)["ClientStatus"], "complete");
  auto c = claims("vol-1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["State"], "unpublishing");
  EXPECT_EQ(get("/v1/events?type=ClaimReleaseRequested").size(), 1u);

  // Terminal is final; a late "running" changes nothing.
  ASSERT_TRUE(update(id, v1::CLIENT_STATUS_RUNNING).ok());
  EXPECT_EQ(get("/v1/allocation/" + id)["ClientStatus"], "complete");

  // The watch still shows it while it holds a claim (the agent may have to unmount).
  v1::WatchAllocationsRequest req;
  req.set_node_id("n1");
  req.set_min_index(1000000);
  v1::WatchAllocationsResponse resp;
  ASSERT_TRUE(server.stub->WatchAllocations(context().get(), req, &resp).ok());
  ASSERT_EQ(resp.allocations_size(), 1);
  EXPECT_EQ(resp.allocations(0).client_status(), v1::CLIENT_STATUS_COMPLETE);
}

// An unknown allocation is one the allocation GC deleted (terminal, claim-free, long ago): a late
// report for it is acknowledged and changes nothing, or the agent would retry it forever and hold
// back every other report of the node.
TEST_F(AgentServiceTest, UpdateAllocationsRejectsForeignAllocationsAndIgnoresGoneOnes) {
  cluster(false);
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false)}).ok());
  auto id = submit("vol-1");
  auto before = writes();
  auto st = update(id, v1::CLIENT_STATUS_RUNNING, "n2");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("placed on node \"n1\""), std::string::npos) << st.error_message();
  EXPECT_TRUE(update("no-such-alloc", v1::CLIENT_STATUS_RUNNING).ok());
  EXPECT_EQ(update(id, v1::CLIENT_STATUS_RUNNING, "ghost").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(writes(), before);
}

TEST_F(AgentServiceTest, WritesAndStateChangingCallsAreAuditedWithoutSecrets) {
  cluster(false, "vol-a");
  json body = json::parse(volume_body("vol-s"));
  body["Volumes"][0]["Secrets"] = {{"token", "hunter2-in-body"}};
  auto put = http_request(server.http_port, "PUT", "/v1/volume/csi/vol-s?x=query-value", body.dump(),
                          {{"X-Mooring-CSI-Secrets", "token=hunter2-in-header"}});
  ASSERT_EQ(put.status, 200u) << put.body;
  EXPECT_EQ(http("PUT", "/v1/volume/csi/vol-bad", "{not json").status, 400u);
  heartbeat("n1", {fingerprint("hostpath", "n1", false)});
  get("/v1/volumes");
  const auto alloc = submit("vol-a");
  ASSERT_TRUE(claim("vol-a", alloc).ok());

  const auto lines = audit_lines();
  auto find = [&](const std::string& method, const std::string& object) -> json {
    for (const auto& l : lines)
      if (l["Method"] == method && l["Object"] == object) return l;
    ADD_FAILURE() << "no audit line for " << method << " " << object << " in " << json(lines).dump();
    return json::object();
  };
  auto reg = find("RegisterNode", "n1");
  EXPECT_EQ(reg["Transport"], "grpc");
  EXPECT_EQ(reg["Actor"]["Type"], "node");
  EXPECT_EQ(reg["Actor"]["ID"], "n1");
  EXPECT_EQ(reg["Status"], 0);
  auto vol = find("PUT", "vol-s");
  EXPECT_EQ(vol["Transport"], "http");
  EXPECT_EQ(vol["Path"], "/v1/volume/csi/vol-s");
  EXPECT_EQ(vol["Status"], 200);
  EXPECT_EQ(vol["Namespace"], "default");
  EXPECT_TRUE(vol["Remote"].get<std::string>().starts_with("127.0.0.1:")) << vol.dump();
  EXPECT_FALSE(vol["Time"].get<std::string>().empty());
  EXPECT_EQ(find("PUT", "vol-bad")["Status"], 400);           // refusals are audited too
  EXPECT_EQ(find("POST", alloc)["Path"], "/v1/allocations");  // a create names the id it made
  EXPECT_EQ(find("ClaimVolume", "vol-a")["Actor"]["ID"], "n1");
  for (const auto& l : lines) {
    EXPECT_NE(l["Method"], "GET") << l.dump();
    EXPECT_NE(l["Method"], "Heartbeat") << l.dump();  // only refused heartbeats are worth a line
    EXPECT_NE(l["Method"], "WatchAllocations") << l.dump();
  }
  const auto text = test::read_file(audit_dir / "audit.log");
  for (const char* secret : {"hunter2", "query-value"}) EXPECT_EQ(text.find(secret), std::string::npos) << secret;
  EXPECT_EQ(std::filesystem::status(audit_dir / "audit.log").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(AuditLog, AnUnwritablePathIsNamedInTheError) {
  auto log = audit::AuditLog::open({"/nonexistent-dir/audit.log"});
  ASSERT_FALSE(log);
  EXPECT_NE(log.error().find("/nonexistent-dir/audit.log"), std::string::npos) << log.error();
}

TEST_F(AgentServiceTest, ClaimOfAnUnknownVolumeIsNotFound) {
  cluster(false);
  auto id = submit("vol-1");
  auto st = claim("nope", id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "volume not found: nope");
  EXPECT_EQ(claim("vol-1", "no-alloc").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(claim("../x", id).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(claim("vol-1", id, nullptr, v1::CLAIM_MODE_UNSPECIFIED).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // An allocation claims only the volumes it requested, only from its own node.
  ASSERT_EQ(http("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2")).status, 200u);
  EXPECT_EQ(claim("vol-2", id).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(register_node("n2", {fingerprint("hostpath", "n2", false)}).ok());
  auto st2 = claim("vol-1", id, nullptr, v1::CLAIM_MODE_WRITE, 10s, "n2");
  EXPECT_EQ(st2.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(claims("vol-1").empty());
}

TEST_F(AgentServiceTest, MaxClaimsReachedIsRetryableAndNamesTheHolder) {
  cluster(false);
  auto first = submit("vol-1");
  auto second = submit("vol-1");
  ASSERT_TRUE(claim("vol-1", first).ok());
  auto before = writes();
  auto st = claim("vol-1", second);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("volume max claims reached"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find(first), std::string::npos) << st.error_message();
  EXPECT_EQ(writes(), before);  // a refused claim writes nothing
}

TEST_F(AgentServiceTest, NewClaimRecordsTheIntentThenPublishesAndReturnsTheContext) {
  cluster(true);
  auto id = submit("vol-1");
  v1::ClaimVolumeResponse resp;
  auto st = claim("vol-1", id, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(calls(), 1);
  EXPECT_FALSE(server.publisher.intent_missing);
  EXPECT_EQ(server.publisher.last_csi_node_id, "csi-n1");
  EXPECT_EQ(server.publisher.last_volume_external_id, "ext-vol-1");
  EXPECT_EQ(resp.volume().volume_id(), "vol-1");
  EXPECT_EQ(resp.volume().external_id(), "ext-vol-1");
  EXPECT_EQ(resp.volume().publish_context().at("device"), "/dev/fake-vol-1");
  EXPECT_EQ(resp.volume().access_mode(), v1::ACCESS_MODE_SINGLE_NODE_WRITER);
  EXPECT_FALSE(resp.volume().read_only());
  auto c = claims("vol-1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["State"], "taken");
  EXPECT_EQ(c[0]["LastError"], "");

  // Idempotent re-claim: same context, no second ControllerPublish.
  v1::ClaimVolumeResponse again;
  ASSERT_TRUE(claim("vol-1", id, &again).ok());
  EXPECT_EQ(calls(), 1);
  EXPECT_EQ(again.volume().publish_context().at("device"), "/dev/fake-vol-1");
}

TEST_F(AgentServiceTest, PluginWithoutPublishUnpublishIsNeverPublished) {
  cluster(false);
  auto id = submit("vol-1");
  v1::ClaimVolumeResponse resp;
  ASSERT_TRUE(claim("vol-1", id, &resp).ok());
  EXPECT_EQ(calls(), 0);
  EXPECT_TRUE(resp.volume().publish_context().empty());
}

TEST_F(AgentServiceTest, FinalPublishErrorFreesTheClaim) {
  cluster(true);
  auto id = submit("vol-1");
  server.publisher.respond = [](const domain::Volume&, const domain::Claim&) {
    PublishResult r;
    r.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad capability");
    return r;
  };
  auto st = claim("vol-1", id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("bad capability"), std::string::npos) << st.error_message();
  EXPECT_FALSE(server.publisher.intent_missing);
  EXPECT_TRUE(claims("vol-1").empty());
  EXPECT_EQ(get("/v1/volume/csi/vol-1")["AccessMode"], "");
  EXPECT_EQ(get("/v1/events?type=ClaimDropped").size(), 1u);
}

TEST_F(AgentServiceTest, UncertainPublishErrorLeavesTheClaimForRelease) {
  cluster(true);
  auto id = submit("vol-1");
  server.publisher.respond = [](const domain::Volume&, const domain::Claim&) {
    PublishResult r;
    r.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "controller slow");
    return r;
  };
  auto st = claim("vol-1", id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("being released"), std::string::npos) << st.error_message();
  auto c = claims("vol-1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["State"], "unpublishing");
  EXPECT_NE(c[0]["LastError"].get<std::string>().find("DEADLINE_EXCEEDED"), std::string::npos) << c[0];
  // The agent's retry waits for the release (retryable), and never publishes meanwhile.
  server.publisher.respond = nullptr;
  EXPECT_EQ(claim("vol-1", id).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(calls(), 1);
}

TEST_F(AgentServiceTest, PublishThatReachedNoControllerFreesTheClaim) {
  cluster(true);
  auto id = submit("vol-1");
  server.publisher.respond = [](const domain::Volume&, const domain::Claim&) {
    PublishResult r;
    r.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "no healthy controller");
    r.sent = false;
    return r;
  };
  EXPECT_EQ(claim("vol-1", id).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(claims("vol-1").empty());
  server.publisher.respond = nullptr;
  EXPECT_TRUE(claim("vol-1", id).ok());  // the retry succeeds
  EXPECT_EQ(calls(), 2);
}

// The agent stops waiting (its deadline) while the ControllerPublish is at the plugin: the call
// runs to its answer (claims/claim_path.cpp), and the agent's retry waits for it and is answered
// from it; no second ControllerPublish.
TEST_F(AgentServiceTest, AClaimantThatStopsWaitingDuringThePublishIsAnsweredFromItOnRetry) {
  cluster(true);
  auto id = submit("vol-1");
  server.publisher.delay = 3s;
  EXPECT_EQ(claim("vol-1", id, nullptr, v1::CLAIM_MODE_WRITE, 300ms).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The intent stays, marked as not yet confirmed.
  auto c = claims("vol-1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["State"], "taken");
  EXPECT_EQ(c[0]["LastError"], kPublishPending);
  server.on_io([this] {
    server.publisher.delay = 0ms;
    return 0;
  });
  v1::ClaimVolumeResponse resp;
  auto st = claim("vol-1", id, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(calls(), 1);
  EXPECT_EQ(resp.volume().publish_context().at("device"), "/dev/fake-vol-1");
  EXPECT_EQ(claims("vol-1")[0]["LastError"], "");
}

TEST_F(AgentServiceTest, UnpublishVolumeAdvancesToNodeDetachedAndNeverPublishes) {
  cluster(true);
  auto id = submit("vol-1");
  ASSERT_TRUE(claim("vol-1", id).ok());
  ASSERT_TRUE(update(id, v1::CLIENT_STATUS_COMPLETE).ok());
  ASSERT_TRUE(unpublish("vol-1", id).ok());
  auto c = claims("vol-1");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["State"], "node-detached");
  auto before = writes();
  EXPECT_TRUE(unpublish("vol-1", id).ok());  // idempotent
  EXPECT_EQ(writes(), before);
  EXPECT_TRUE(unpublish("vol-1", "unknown-alloc").ok());
  EXPECT_TRUE(unpublish("no-volume", id).ok());
  EXPECT_EQ(unpublish("vol-1", id, "n2").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(calls(), 1);  // a release never publishes
}

// The fencing token: every answer to a registration or heartbeat names the leader's epoch, which
// the agent keeps and checks the leader's calls against; a leader that does not know its epoch yet
// leaves it out (the agent keeps what it knows); a single control plane names the empty epoch.
TEST(AgentServiceEpochTest, RegistrationAndHeartbeatAnswersNameTheLeaderEpoch) {
  std::optional<domain::LeaderEpoch> epoch;
  AgentServer ha{LivenessOptions{.ttl = 10s}, AgentServiceOptions{.leader_epoch = [&] { return epoch; }}};
  ha.start();
  v1::RegisterNodeRequest reg;
  reg.set_node_id("n1");
  reg.set_address("127.0.0.1:4702");
  v1::RegisterNodeResponse reg_resp;
  ASSERT_TRUE(ha.stub->RegisterNode(context().get(), reg, &reg_resp).ok());
  EXPECT_FALSE(reg_resp.has_leader_epoch());
  ha.on_io([&] {
    epoch = domain::LeaderEpoch{.cluster = 0xabc, .revision = 77};
    return 0;
  });
  v1::HeartbeatRequest hb;
  hb.set_node_id("n1");
  v1::HeartbeatResponse hb_resp;
  ASSERT_TRUE(ha.stub->Heartbeat(context().get(), hb, &hb_resp).ok());
  ASSERT_TRUE(hb_resp.has_leader_epoch());
  EXPECT_EQ(hb_resp.leader_epoch().cluster_id(), 0xabcu);
  EXPECT_EQ(hb_resp.leader_epoch().revision(), 77);
  ASSERT_TRUE(ha.stub->RegisterNode(context().get(), reg, &reg_resp).ok());
  EXPECT_EQ(reg_resp.leader_epoch().revision(), 77);
  hb.set_node_id("stranger");  // answered known=false, with the epoch all the same
  ASSERT_TRUE(ha.stub->Heartbeat(context().get(), hb, &hb_resp).ok());
  EXPECT_FALSE(hb_resp.known());
  EXPECT_EQ(hb_resp.leader_epoch().revision(), 77);

  AgentServer single{LivenessOptions{.ttl = 10s}};
  single.start();
  ASSERT_TRUE(single.stub->RegisterNode(context().get(), reg, &reg_resp).ok());
  ASSERT_TRUE(reg_resp.has_leader_epoch());
  EXPECT_EQ(reg_resp.leader_epoch().cluster_id(), 0u);
  EXPECT_EQ(reg_resp.leader_epoch().revision(), 0);
}

}  // namespace mooring::controlplane
