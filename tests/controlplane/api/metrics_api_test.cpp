// GET /v1/metrics over a real socket with ACLs on: operator:read (a token's or the anonymous
// policy's), 401/403 naming what is missing; the text carries the state's gauges, route templates
// instead of ids, and the JSON view.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/metrics/families.hpp"
#include "tests/controlplane/support/acl_api_fixture.hpp"

namespace mooring::controlplane {
namespace {

using json = nlohmann::json;

// Listed before the fixture: the families exist before its API is built (as main() does it).
struct MetricsOn {
  MetricsOn() { metrics::enable(metrics::Service::controlplane); }
};

class MetricsApiTest : MetricsOn, public support::AclApiFixture {};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(MetricsApiTest, NeedsOperatorReadFromATokenOrTheAnonymousPolicy) {
  const auto mgmt = bootstrap();
  auto anonymous = call("GET", "/v1/metrics");
  EXPECT_EQ(anonymous.status, 401u) << anonymous.body;
  const auto volumes_only = token_with(mgmt, "volumes", {{"Namespace", {{"*", {{"Policy", "read"}}}}}});
  auto refused = call("GET", "/v1/metrics", "", volumes_only);
  EXPECT_EQ(refused.status, 403u);
  EXPECT_TRUE(has(refused.body, "lacks operator:read")) << refused.body;
  const auto scraper = token_with(mgmt, "scraper", {{"Operator", "read"}});
  auto ok = call("GET", "/v1/metrics", "", scraper);
  ASSERT_EQ(ok.status, 200u) << ok.body;
  EXPECT_TRUE(has(ok.header("content-type"), "text/plain; version=0.0.4"));
  // A Prometheus without a token, once the anonymous policy grants it.
  ASSERT_EQ(call("PUT", "/v1/acl/policy/anonymous", R"({"Rules":{"Operator":"read"}})", mgmt).status, 200u);
  EXPECT_EQ(call("GET", "/v1/metrics").status, 200u);
}

TEST_F(MetricsApiTest, ShowsTheStatesGaugesAndRouteTemplatesNeverIds) {
  const auto mgmt = bootstrap();
  ASSERT_EQ(call("GET", "/v1/volume/csi/vol-1", "", mgmt).status, 200u);
  ASSERT_EQ(call("GET", "/v1/volume/csi/no-such-volume", "", mgmt).status, 404u);
  ASSERT_EQ(call("GET", "/v1/no/such/route/abc123", "", mgmt).status, 404u);
  auto r = call("GET", "/v1/metrics", "", mgmt);
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto& text = r.body;
  EXPECT_TRUE(has(text, "mooring_claims{state=\"taken\"} 0")) << text;
  EXPECT_TRUE(has(text, "mooring_claims{state=\"ready-to-free\"} 0")) << text;
  EXPECT_TRUE(has(text, "mooring_plugin_healthy{kind=\"node\",node=\"node-1\",plugin=\"hostpath\"}")) << text;
  EXPECT_TRUE(has(text, "mooring_http_requests_seconds_count{code=\"200\",route=\"/v1/volume/csi/:id\"}")) << text;
  EXPECT_TRUE(has(text, "mooring_http_requests_seconds_count{code=\"404\",route=\"/v1/volume/csi/:id\"}")) << text;
  EXPECT_TRUE(has(text, "mooring_http_requests_seconds_count{code=\"404\",route=\"unmatched\"}")) << text;
  EXPECT_FALSE(has(text, "vol-1")) << text;
  EXPECT_FALSE(has(text, "no-such-volume")) << text;
  EXPECT_FALSE(has(text, "abc123")) << text;
  EXPECT_FALSE(has(text, mgmt)) << "a token in the metrics";
  EXPECT_TRUE(has(text, "# TYPE mooring_state_commit_seconds histogram")) << text;
  EXPECT_TRUE(has(text, "# TYPE process_resident_memory_bytes gauge")) << text;

  auto j = call("GET", "/v1/metrics?format=json", "", mgmt);
  ASSERT_EQ(j.status, 200u);
  auto families = json::parse(j.body);
  ASSERT_TRUE(families.is_array());
  bool claims = false;
  for (const auto& f : families)
    if (f["Name"] == "mooring_claims") claims = f["Type"] == "gauge" && f["Metrics"].size() == 5;
  EXPECT_TRUE(claims) << j.body;
  auto bad = call("GET", "/v1/metrics?format=yaml", "", mgmt);
  EXPECT_EQ(bad.status, 400u);
  EXPECT_TRUE(has(bad.body, "format")) << bad.body;
}

}  // namespace
}  // namespace mooring::controlplane
