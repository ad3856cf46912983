// Test support: an API server with ACLs on over a real socket, seeded with plugin "hostpath",
// node "node-1" and volume "vol-1", and the calls the ACL and namespace tests make with tokens.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::support {

using json = nlohmann::json;

// PUT /v1/volumes body registering one hostpath volume (single-node-writer, file-system).
inline std::string volume_body(const std::string& id) {
  return json{{"Volumes",
               {{{"ID", id},
                 {"PluginID", "hostpath"},
                 {"ExternalID", "ext-" + id},
                 {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
      .dump();
}

inline json parse(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

class AclApiFixture : public ::testing::Test {
 protected:
  explicit AclApiFixture(api::ApiOptions options = {.acl = true}) : server(std::move(options)) {}
  void SetUp() override {
    Batch b;
    domain::Node n;
    n.id = "node-1";
    n.status = domain::NodeStatus::ready;
    fixtures::put_running(b, {fixtures::plugin("hostpath", "node-1")}, nullptr, {n});
    b.put(fixtures::volume("vol-1"));
    server.seed(std::move(b));
    server.start();
    port = server.port;
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {},
                  const std::string& token = {}) {
    std::map<std::string, std::string> headers;
    if (!token.empty()) headers["X-Mooring-Token"] = token;
    return http_request(port, method, target, body, headers);
  }

  std::string bootstrap() {
    auto r = call("POST", "/v1/acl/bootstrap");
    EXPECT_EQ(r.status, 200u) << r.body;
    return parse(r)["SecretID"];
  }

  // A client token with one policy of these rules.
  std::string token_with(const std::string& mgmt, const std::string& policy, const json& rules) {
    auto p = call("PUT", "/v1/acl/policy/" + policy, json{{"Name", policy}, {"Rules", rules}}.dump(), mgmt);
    EXPECT_EQ(p.status, 200u) << p.body;
    auto t = call("PUT", "/v1/acl/token", json{{"Name", policy + "-token"}, {"Type", "client"}, {"Policies", {policy}}}.dump(),
                  mgmt);
    EXPECT_EQ(t.status, 200u) << t.body;
    return parse(t)["SecretID"];
  }

  std::pair<std::uint64_t, std::size_t> fingerprint() {
    server.settle();
    return server.on_io([this] { return std::make_pair(server.store.index(), server.backend.transactions.size()); });
  }

  ApiServer server;
  std::uint16_t port = 0;
};

}  // namespace mooring::controlplane::support
