#include "shared/metrics/registry.hpp"

#include <cmath>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <nlohmann/json.hpp>

#include "shared/metrics/process_metrics.hpp"

namespace mooring::metrics {

void Counter::inc(double by) const {
  if (c_) c_->Increment(by);
}
void Gauge::set(double v) const {
  if (g_) g_->Set(v);
}
void Gauge::inc(double by) const {
  if (g_) g_->Increment(by);
}
void Gauge::dec(double by) const {
  if (g_) g_->Decrement(by);
}
void Histogram::observe(double value) const {
  if (h_) h_->Observe(value);
}

Counter CounterFamily::with(const Labels& labels) const { return f_ ? Counter(&f_->Add(labels)) : Counter(); }
Gauge GaugeFamily::with(const Labels& labels) const { return f_ ? Gauge(&f_->Add(labels)) : Gauge(); }
Histogram HistogramFamily::with(const Labels& labels) const {
  return f_ ? Histogram(&f_->Add(labels, *buckets_)) : Histogram();
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}
std::vector<double> fast_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

Registry::Registry() : registry_(std::make_unique<prometheus::Registry>()) {}
Registry::~Registry() = default;

CounterFamily Registry::counter(const std::string& name, const std::string& help) {
  return CounterFamily(&prometheus::BuildCounter().Name(name).Help(help).Register(*registry_));
}
GaugeFamily Registry::gauge(const std::string& name, const std::string& help) {
  return GaugeFamily(&prometheus::BuildGauge().Name(name).Help(help).Register(*registry_));
}
HistogramFamily Registry::histogram(const std::string& name, const std::string& help, std::vector<double> buckets) {
  return HistogramFamily(&prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_),
                         std::make_shared<const std::vector<double>>(std::move(buckets)));
}

namespace {

prometheus::MetricFamily one_value(std::string name, std::string help, prometheus::MetricType type, double v) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {std::move(m)}};
}

std::vector<prometheus::MetricFamily> collect(const prometheus::Registry& registry,
                                              const std::vector<GaugeSnapshot>& snapshots) {
  auto families = registry.Collect();
  for (const auto& s : snapshots) {
    prometheus::MetricFamily f{s.name, s.help, prometheus::MetricType::Gauge, {}};
    for (const auto& sample : s.samples) {
      prometheus::ClientMetric m;
      for (const auto& [k, v] : sample.labels) m.label.push_back({k, v});
      m.gauge.value = sample.value;
      f.metric.push_back(std::move(m));
    }
    families.push_back(std::move(f));
  }
  if (auto p = read_process_sample()) {
    using T = prometheus::MetricType;
    families.push_back(one_value("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                                 T::Counter, p->cpu_seconds));
    families.push_back(
        one_value("process_resident_memory_bytes", "Resident memory size in bytes.", T::Gauge, p->resident_bytes));
    families.push_back(
        one_value("process_virtual_memory_bytes", "Virtual memory size in bytes.", T::Gauge, p->virtual_bytes));
    families.push_back(one_value("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                                 T::Gauge, p->start_time_seconds));
    families.push_back(one_value("process_open_fds", "Number of open file descriptors.", T::Gauge, p->open_fds));
    families.push_back(one_value("process_max_fds", "Maximum number of open file descriptors.", T::Gauge, p->max_fds));
  }
  return families;
}

const char* type_name(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter: return "counter";
    case prometheus::MetricType::Gauge: return "gauge";
    case prometheus::MetricType::Histogram: return "histogram";
    case prometheus::MetricType::Summary: return "summary";
    default: return "untyped";
  }
}

}  // namespace

std::string Registry::text(const std::vector<GaugeSnapshot>& snapshots) const {
  return prometheus::TextSerializer().Serialize(collect(*registry_, snapshots));
}

nlohmann::json Registry::json(const std::vector<GaugeSnapshot>& snapshots) const {
  auto out = nlohmann::json::array();
  for (const auto& f : collect(*registry_, snapshots)) {
    auto metrics = nlohmann::json::array();
    for (const auto& m : f.metric) {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& l : m.label) labels[l.name] = l.value;
      nlohmann::json one{{"Labels", std::move(labels)}};
      switch (f.type) {
        case prometheus::MetricType::Counter: one["Value"] = m.counter.value; break;
        case prometheus::MetricType::Histogram: {
          one["Count"] = m.histogram.sample_count;
          one["Sum"] = m.histogram.sample_sum;
          auto buckets = nlohmann::json::array();
          for (const auto& b : m.histogram.bucket) {
            // +Inf is not JSON: the last bucket's bound is null (its count is Count).
            nlohmann::json bound = std::isinf(b.upper_bound) ? nlohmann::json(nullptr) : nlohmann::json(b.upper_bound);
            buckets.push_back({{"UpperBound", bound}, {"Count", b.cumulative_count}});
          }
          one["Buckets"] = std::move(buckets);
          break;
        }
        default: one["Value"] = m.gauge.value; break;
      }
      metrics.push_back(std::move(one));
    }
    out.push_back({{"Name", f.name}, {"Help", f.help}, {"Type", type_name(f.type)}, {"Metrics", std::move(metrics)}});
  }
  return out;
}

}  // namespace mooring::metrics
