// The node agent's metrics room: the gauges it computes from fingerprints and mount records, what
// one request gets, and the listener over a real loopback socket — plain HTTP there, refused on
// another address without the TLS files.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "services/nodeagent/metrics/agent_gauges.hpp"
#include "services/nodeagent/metrics/metrics_listener.hpp"
#include "tests/controlplane/support/http_client.hpp"

namespace mooring::nodeagent {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

::mooring::v1::PluginFingerprint fingerprint(const std::string& id, ::mooring::v1::PluginType type, bool healthy) {
  ::mooring::v1::PluginFingerprint fp;
  fp.set_plugin_id(id);
  fp.set_type(type);
  fp.set_healthy(healthy);
  return fp;
}

TEST(AgentGauges, HealthByKindAndPendingUnmountsPerPlugin) {
  auto gauges = agent_gauges("node-1",
                             {fingerprint("mono", ::mooring::v1::PLUGIN_TYPE_MONOLITH, true),
                              fingerprint("ctl", ::mooring::v1::PLUGIN_TYPE_CONTROLLER, false)},
                             {{"mono", 2}, {"gone", 1}});
  metrics::Registry r;
  const auto text = r.text(gauges);
  EXPECT_TRUE(has(text, R"(mooring_plugin_healthy{kind="controller",node="node-1",plugin="mono"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(mooring_plugin_healthy{kind="node",node="node-1",plugin="mono"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(mooring_plugin_healthy{kind="controller",node="node-1",plugin="ctl"} 0)")) << text;
  EXPECT_FALSE(has(text, R"(kind="node",node="node-1",plugin="ctl")")) << text;
  EXPECT_TRUE(has(text, R"(mooring_pending_unmounts{plugin="mono"} 2)")) << text;
  // A plugin no longer fingerprinted still owes its unmounts; a controller has no series.
  EXPECT_TRUE(has(text, R"(mooring_pending_unmounts{plugin="gone"} 1)")) << text;
  EXPECT_FALSE(has(text, R"(mooring_pending_unmounts{plugin="ctl"})")) << text;
}

TEST(AgentGauges, ANodePluginWithNothingOwedShowsZero) {
  metrics::Registry r;
  const auto text = r.text(agent_gauges("n", {fingerprint("hp", ::mooring::v1::PLUGIN_TYPE_NODE, true)}, {}));
  EXPECT_TRUE(has(text, R"(mooring_pending_unmounts{plugin="hp"} 0)")) << text;
}

TEST(MetricsAnswer, TextJsonAndErrors) {
  metrics::Registry r;
  r.counter("demo_total", "d").with({}).inc();
  GaugeSource none;
  auto text = answer_metrics("GET", "/metrics", r, none);
  EXPECT_EQ(text.status, 200u);
  EXPECT_EQ(text.content_type, metrics::kTextContentType);
  EXPECT_TRUE(has(text.body, "demo_total 1"));
  auto json = answer_metrics("GET", "/metrics?format=json", r, none);
  EXPECT_EQ(json.status, 200u);
  EXPECT_EQ(json.content_type, "application/json");
  EXPECT_EQ(answer_metrics("GET", "/metrics?format=xml", r, none).status, 400u);
  EXPECT_EQ(answer_metrics("GET", "/", r, none).status, 404u);
  auto post = answer_metrics("POST", "/metrics", r, none);
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(post.allow, "GET");
}

TEST(MetricsListener, LoopbackOnlyWithoutTls) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  boost::asio::io_context io;
  metrics::Registry r;
  MetricsListener open_to_all(io.get_executor(), r, {}, {.address = "0.0.0.0:0"});
  auto err = open_to_all.start();
  EXPECT_TRUE(has(err, "not a loopback address")) << err;
  EXPECT_TRUE(has(err, "--tls-cert-file")) << err;
  MetricsListener bad(io.get_executor(), r, {}, {.address = "nonsense"});
  EXPECT_TRUE(has(bad.start(), "is not HOST:PORT"));
}

TEST(MetricsListener, APortInUseIsRefusedSayingWhy) {
  boost::asio::io_context io;
  metrics::Registry r;
  MetricsListener first(io.get_executor(), r, {}, {.address = "127.0.0.1:0"});
  ASSERT_EQ(first.start(), "");
  const auto taken = "127.0.0.1:" + std::to_string(first.port());
  MetricsListener second(io.get_executor(), r, {}, {.address = taken});
  const auto err = second.start();
  EXPECT_TRUE(has(err, taken)) << err;
  EXPECT_TRUE(has(err, "in use")) << err;  // the bind's error, not the close()'s "Success"
}

TEST(MetricsListener, ServesTheRegistryAndTheGaugesOverLoopbackHttp) {
  boost::asio::io_context io;
  metrics::Registry r;
  r.counter("demo_total", "d").with({}).inc(5);
  int scrapes = 0;
  GaugeSource gauges = [&] {
    ++scrapes;
    return agent_gauges("node-1", {fingerprint("hp", ::mooring::v1::PLUGIN_TYPE_NODE, true)}, {});
  };
  MetricsListener listener(io.get_executor(), r, gauges, {.address = "127.0.0.1:0"});
  ASSERT_EQ(listener.start(), "");
  ASSERT_NE(listener.port(), 0);
  EXPECT_FALSE(listener.secure());
  std::thread runner([&] { io.run(); });
  const auto port = listener.port();
  auto res = controlplane::http_request(port, "GET", "/metrics");
  EXPECT_EQ(res.status, 200u) << res.error;
  EXPECT_TRUE(has(res.body, "demo_total 5")) << res.body;
  EXPECT_TRUE(has(res.body, R"(mooring_plugin_healthy{kind="node",node="node-1",plugin="hp"} 1)")) << res.body;
  EXPECT_TRUE(has(res.header("content-type"), "version=0.0.4"));
  // Kept alive: two scrapes on one connection.
  controlplane::HttpConnection conn(port);
  EXPECT_EQ(conn.request("GET", "/metrics").status, 200u);
  EXPECT_EQ(conn.request("GET", "/metrics?format=json").status, 200u);
  auto stopped = boost::asio::co_spawn(io, listener.stop(), boost::asio::use_future);
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  runner.join();
  EXPECT_EQ(scrapes, 3);
  EXPECT_NE(controlplane::http_request(port, "GET", "/metrics").status, 200u);  // closed
}

}  // namespace
}  // namespace mooring::nodeagent
