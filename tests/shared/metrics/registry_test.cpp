// The registry's exposition: prometheus-cpp's text format with our snapshots and the process
// families, the JSON view, and null handles (metrics off) that record nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "shared/metrics/families.hpp"
#include "shared/metrics/registry.hpp"

namespace mooring::metrics {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(MetricsRegistry, TextShowsCountersGaugesAndHistogramsWithTheirLabels) {
  Registry r;
  auto retries = r.counter("mooring_gc_retries_total", "retries");
  retries.with({{"step", "node-detach"}}).inc();
  retries.with({{"step", "node-detach"}}).inc(2);
  r.gauge("demo_gauge", "a gauge").with({{"k", "v"}}).set(7);
  auto h = r.histogram("demo_seconds", "latency", {0.1, 1}).with({{"route", "/v1/volume/csi/:id"}});
  h.observe(0.05);
  h.observe(std::chrono::milliseconds(500));
  const auto text = r.text();
  EXPECT_TRUE(contains(text, "# TYPE mooring_gc_retries_total counter")) << text;
  EXPECT_TRUE(contains(text, "mooring_gc_retries_total{step=\"node-detach\"} 3")) << text;
  EXPECT_TRUE(contains(text, "demo_gauge{k=\"v\"} 7")) << text;
  EXPECT_TRUE(contains(text, "# TYPE demo_seconds histogram")) << text;
  EXPECT_TRUE(contains(text, "demo_seconds_bucket{route=\"/v1/volume/csi/:id\",le=\"0.1\"} 1")) << text;
  EXPECT_TRUE(contains(text, "demo_seconds_bucket{route=\"/v1/volume/csi/:id\",le=\"1\"} 2")) << text;
  EXPECT_TRUE(contains(text, "demo_seconds_count{route=\"/v1/volume/csi/:id\"} 2")) << text;
}

TEST(MetricsRegistry, SnapshotsAndProcessFamiliesAreAppended) {
  Registry r;
  GaugeSnapshot claims{"mooring_claims", "claims by state", {}};
  claims.samples.push_back({{{"state", "taken"}}, 3});
  claims.samples.push_back({{{"state", "freed"}}, 0});
  const auto text = r.text({claims});
  EXPECT_TRUE(contains(text, "# TYPE mooring_claims gauge")) << text;
  EXPECT_TRUE(contains(text, "mooring_claims{state=\"taken\"} 3")) << text;
  EXPECT_TRUE(contains(text, "mooring_claims{state=\"freed\"} 0")) << text;
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "process_start_time_seconds", "process_open_fds", "process_max_fds"})
    EXPECT_TRUE(contains(text, std::string("# TYPE ") + name)) << name;
}

TEST(MetricsRegistry, LabelValuesAreEscaped) {
  Registry r;
  r.gauge("demo", "d").with({{"plugin", "a\"b\\c\nd"}}).set(1);
  EXPECT_TRUE(contains(r.text(), R"(demo{plugin="a\"b\\c\nd"} 1)")) << r.text();
}

TEST(MetricsRegistry, JsonCarriesTheSameFamilies) {
  Registry r;
  r.counter("c_total", "c").with({{"a", "b"}}).inc(4);
  r.histogram("h_seconds", "h", {1}).with({}).observe(0.5);
  const auto j = r.json();
  ASSERT_TRUE(j.is_array());
  bool counter = false, histogram = false;
  for (const auto& f : j) {
    if (f["Name"] == "c_total") {
      counter = true;
      EXPECT_EQ(f["Type"], "counter");
      EXPECT_EQ(f["Metrics"][0]["Labels"]["a"], "b");
      EXPECT_EQ(f["Metrics"][0]["Value"], 4.0);
    }
    if (f["Name"] == "h_seconds") {
      histogram = true;
      EXPECT_EQ(f["Metrics"][0]["Count"], 1);
      EXPECT_EQ(f["Metrics"][0]["Buckets"][0]["UpperBound"], 1.0);
      EXPECT_TRUE(f["Metrics"][0]["Buckets"][1]["UpperBound"].is_null());  // +Inf
    }
  }
  EXPECT_TRUE(counter && histogram) << j.dump();
  EXPECT_NO_THROW((void)j.dump());
}

TEST(MetricsRegistry, NullHandlesRecordNothing) {
  Counter c;
  Gauge g;
  Histogram h;
  HistogramFamily f;
  EXPECT_FALSE(c);
  EXPECT_FALSE(f.with({{"a", "b"}}));
  c.inc();
  g.set(1);
  h.observe(1.0);
  h.observe(std::chrono::seconds(1));
}

TEST(MetricsFamilies, EnableAddsEachServicesFamiliesOnce) {
  // The process's set: the node agent's has no control plane families.
  auto& agent = enable(Service::nodeagent);
  EXPECT_EQ(families(), &agent);
  EXPECT_TRUE(agent.csi_rpc_seconds);
  EXPECT_TRUE(agent.csi_calls_deduplicated_total);
  enable(Service::nodeagent);  // again: no duplicate registration
  EXPECT_FALSE(agent.http_requests_seconds);
  EXPECT_FALSE(agent.state_commit_seconds);
  EXPECT_FALSE(contains(agent.registry.text(), "mooring_http_requests_seconds"));
  auto& cp = enable(Service::controlplane);
  EXPECT_EQ(&cp, &agent);
  EXPECT_TRUE(cp.http_requests_seconds && cp.state_commit_seconds && cp.claim_grant_seconds &&
              cp.claim_release_seconds && cp.gc_retries_total);
  enable(Service::controlplane);  // again: no duplicate registration (prometheus-cpp would throw)
  cp.csi_rpc_seconds.with({{"plugin", "hostpath"}, {"method", "NodePublishVolume"}, {"code", "OK"}}).observe(0.01);
  const auto text = cp.registry.text();
  EXPECT_TRUE(contains(text, "mooring_csi_rpc_seconds_count{code=\"OK\",method=\"NodePublishVolume\",plugin=\"hostpath\"} 1"))
      << text;
  EXPECT_TRUE(contains(text, "mooring_state_commit_seconds_count 0")) << text;
}

}  // namespace
}  // namespace mooring::metrics
