// Metrics end to end, with the real binaries over mutual TLS: both services' expositions pass
// `promtool check metrics` and show what one volume's life did (claim granted and released, CSI
// calls by plugin/method/code, route templates and never raw ids); the agent's listener is plain
// HTTP on loopback and HTTPS with client certificates elsewhere; a real Prometheus scrapes all
// three endpoints and answers a query about them through its HTTP API. Root only (bind mounts).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <utility>

#include "tests/controlplane/support/http_client.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/e2e/prometheus_process.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The value of the first sample line that starts with `series` ("name{labels}"), or -1.
double sample(const std::string& text, const std::string& series) {
  for (std::size_t at = text.find(series); at != std::string::npos; at = text.find(series, at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    const auto rest = text.substr(at + series.size());
    if (rest.empty() || rest[0] != ' ') continue;
    return std::stod(rest.substr(1, rest.find('\n')));
  }
  return -1;
}

class Metrics : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    if (auto why = PrometheusProcess::unavailable()) GTEST_SKIP() << *why;
    cluster = std::make_unique<Cluster>(ClusterOptions{.mutual_tls = true});
    cluster->start_controlplane();
    plain_port = test::free_tcp_port();
    NodeOptions plain;
    plain.agent_args = {"--metrics-addr", "127.0.0.1:" + std::to_string(plain_port)};
    cluster->start_node("node-1", plain);
    tls_port = test::free_tcp_port();
    NodeOptions tls;
    tls.agent_args = {"--metrics-addr", "0.0.0.0:" + std::to_string(tls_port)};
    cluster->start_node("node-2", tls);
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    if (HasFailure() && prometheus) std::cerr << "---- prometheus ----\n" << prometheus->log();
    prometheus.reset();
    cluster.reset();
  }

  // The agent's HTTPS listener, as a scraper with (or without) a certificate of the cluster CA:
  // curl, since the CLI's client accepts only the control plane's certificate. Its exit code
  // (0: answered 200) and what it printed.
  std::pair<int, std::string> agent_https(bool client_cert) {
    auto cli_cert = cluster->pki().cli();
    std::string cmd = "curl -sS --fail --max-time 10 --cacert '" + cli_cert.ca + "'";
    if (client_cert) cmd += " --cert '" + cli_cert.cert + "' --key '" + cli_cert.key + "'";
    cmd += " https://127.0.0.1:" + std::to_string(tls_port) + "/metrics 2>&1";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {-1, "popen failed"};
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }

  void expect_promtool_accepts(const std::string& exposition, const std::string& what) {
    auto r = promtool_check_metrics(exposition, cluster->dir());
    EXPECT_EQ(r.code, 0) << what << ": promtool check metrics said:\n" << r.output;
  }

  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<PrometheusProcess> prometheus;
  std::uint16_t plain_port = 0, tls_port = 0;
};

TEST_F(Metrics, BothServicesExposeValidFamiliesThatARealPrometheusScrapes) {
  // One volume's life on node-1: created, claimed (ControllerPublish, NodeStage/Publish), released.
  ASSERT_FALSE(cluster->create_volume("metered").is_null());
  auto alloc = cluster->run_alloc(allocation("m", "metered", "node-1", "sleep 600"));
  ASSERT_FALSE(alloc.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(alloc) == "running"; }));
  ASSERT_EQ(cluster->stop_alloc(alloc).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("metered") == 0; }));

  // ---- the control plane: GET /v1/metrics ----
  auto cp = cluster->request("GET", "/v1/metrics");
  ASSERT_EQ(cp.status, 200u) << cp.body << cp.error;
  EXPECT_TRUE(has(cp.header("content-type"), "text/plain; version=0.0.4")) << cp.header("content-type");
  const auto& text = cp.body;
  expect_promtool_accepts(text, "control plane");
  EXPECT_EQ(sample(text, "mooring_claims{state=\"taken\"}"), 0) << text;
  EXPECT_GE(sample(text, "mooring_claim_grant_seconds_count"), 1) << text;
  EXPECT_GE(sample(text, "mooring_claim_release_seconds_count"), 1) << text;
  EXPECT_GE(sample(text, "mooring_state_commit_seconds_count"), 1) << text;
  EXPECT_GE(sample(text, "mooring_csi_rpc_seconds_count{code=\"OK\",method=\"ControllerPublishVolume\",plugin=\"hostpath\"}"), 1)
      << text;
  EXPECT_GE(sample(text, "mooring_csi_rpc_seconds_count{code=\"OK\",method=\"ControllerUnpublishVolume\",plugin=\"hostpath\"}"), 1)
      << text;
  EXPECT_EQ(sample(text, "mooring_plugin_healthy{kind=\"node\",node=\"node-1\",plugin=\"hostpath\"}"), 1) << text;
  EXPECT_EQ(sample(text, "mooring_plugin_healthy{kind=\"controller\",node=\"node-2\",plugin=\"hostpath\"}"), 1) << text;
  // Route templates, never the ids in the paths.
  EXPECT_GE(sample(text, "mooring_http_requests_seconds_count{code=\"200\",route=\"/v1/volume/csi/:id\"}"), 1) << text;
  EXPECT_FALSE(has(text, "route=\"/v1/volume/csi/metered")) << text;
  EXPECT_FALSE(has(text, alloc)) << text;
  for (const char* family : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                             "process_max_fds", "process_start_time_seconds"})
    EXPECT_GT(sample(text, family), 0) << family;
  auto as_json = cluster->request("GET", "/v1/metrics?format=json");
  ASSERT_EQ(as_json.status, 200u);
  EXPECT_TRUE(json::parse(as_json.body, nullptr, false).is_array());
  EXPECT_EQ(cluster->request("GET", "/v1/metrics?format=xml").status, 400u);

  // ---- node-1's agent: plain HTTP on loopback ----
  auto agent = controlplane::http_request(plain_port, "GET", "/metrics");
  ASSERT_EQ(agent.status, 200u) << agent.body << agent.error;
  expect_promtool_accepts(agent.body, "node agent");
  EXPECT_GE(sample(agent.body, "mooring_csi_rpc_seconds_count{code=\"OK\",method=\"NodePublishVolume\",plugin=\"hostpath\"}"), 1)
      << agent.body;
  EXPECT_GE(sample(agent.body, "mooring_csi_rpc_seconds_count{code=\"OK\",method=\"Probe\",plugin=\"hostpath\"}"), 1)
      << agent.body;
  EXPECT_EQ(sample(agent.body, "mooring_plugin_healthy{kind=\"node\",node=\"node-1\",plugin=\"hostpath\"}"), 1) << agent.body;
  EXPECT_EQ(sample(agent.body, "mooring_pending_unmounts{plugin=\"hostpath\"}"), 0) << agent.body;
  EXPECT_FALSE(has(agent.body, "mooring_http_requests_seconds")) << "control plane families on the agent";
  EXPECT_EQ(controlplane::http_request(plain_port, "GET", "/other").status, 404u);
  EXPECT_EQ(controlplane::http_request(plain_port, "POST", "/metrics").status, 405u);

  // ---- node-2's agent on a non-loopback address: HTTPS, scrapers need a cluster certificate ----
  auto anonymous = agent_https(false);
  EXPECT_NE(anonymous.first, 0) << "served a scraper without a client certificate:\n" << anonymous.second;
  auto secure = agent_https(true);
  ASSERT_EQ(secure.first, 0) << secure.second;
  EXPECT_TRUE(has(secure.second, "mooring_plugin_healthy{kind=\"node\",node=\"node-2\",plugin=\"hostpath\"} 1"))
      << secure.second;

  // ---- a real Prometheus scraping all three ----
  const auto pki = cluster->pki().cli();
  const std::string scrape =
      "  - job_name: mooring-controlplane\n"
      "    metrics_path: /v1/metrics\n"
      "    scheme: https\n"
      "    tls_config: {ca_file: '" + pki.ca + "'}\n"
      "    static_configs: [{targets: ['127.0.0.1:" + std::to_string(cluster->http_port()) + "']}]\n"
      "  - job_name: mooring-nodeagent\n"
      "    static_configs: [{targets: ['127.0.0.1:" + std::to_string(plain_port) + "']}]\n"
      "  - job_name: mooring-nodeagent-tls\n"
      "    scheme: https\n"
      "    tls_config: {ca_file: '" + pki.ca + "', cert_file: '" + pki.cert + "', key_file: '" + pki.key + "'}\n"
      "    static_configs: [{targets: ['127.0.0.1:" + std::to_string(tls_port) + "']}]\n";
  prometheus = std::make_unique<PrometheusProcess>(cluster->dir() / "prometheus", scrape);
  std::string why;
  ASSERT_TRUE(prometheus->start(why)) << why;
  // Every target up, then one of our families through the query API, labelled by the scrape.
  json up;
  ASSERT_TRUE(Cluster::eventually([&] {
    up = prometheus->query("sum(up)");
    return up.is_array() && up.size() == 1 && up[0]["value"][1] == "3";
  })) << up.dump() << "\n" << prometheus->query("up").dump();
  json healthy;
  ASSERT_TRUE(Cluster::eventually([&] {
    healthy = prometheus->query("mooring_plugin_healthy{job=\"mooring-controlplane\",kind=\"node\",node=\"node-1\"}");
    return healthy.is_array() && healthy.size() == 1;
  })) << healthy.dump();
  EXPECT_EQ(healthy[0]["metric"]["plugin"], "hostpath");
  EXPECT_EQ(healthy[0]["value"][1], "1");
  auto publishes = prometheus->query(
      "mooring_csi_rpc_seconds_count{job=\"mooring-nodeagent\",method=\"NodePublishVolume\",code=\"OK\"}");
  ASSERT_TRUE(publishes.is_array() && publishes.size() == 1) << publishes.dump();
  EXPECT_EQ(publishes[0]["metric"]["plugin"], "hostpath");
}

}  // namespace
}  // namespace mooring::e2e
