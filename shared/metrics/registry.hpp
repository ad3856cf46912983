// Metrics room: Prometheus families recorded through prometheus-cpp's core, exposed as text by
// whichever HTTP listener the service has (no HTTP here). prometheus-cpp stays out of this header.
// A handle is one pointer; a default (null) handle, which is what metrics turned off gives, does
// nothing. Looking a labelled series up (Family::with) takes the family's lock and builds a label
// map, so hot paths look a series up once and keep the handle.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace mooring::metrics {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  Counter() = default;
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  void inc(double by = 1) const;
  explicit operator bool() const { return c_ != nullptr; }

 private:
  prometheus::Counter* c_ = nullptr;
};

class Gauge {
 public:
  Gauge() = default;
  explicit Gauge(prometheus::Gauge* g) : g_(g) {}
  void set(double v) const;
  void inc(double by = 1) const;
  void dec(double by = 1) const;
  explicit operator bool() const { return g_ != nullptr; }

 private:
  prometheus::Gauge* g_ = nullptr;
};

class Histogram {
 public:
  Histogram() = default;
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  void observe(double value) const;
  template <class Rep, class Period>
  void observe(std::chrono::duration<Rep, Period> d) const {
    if (h_) observe(std::chrono::duration<double>(d).count());
  }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  prometheus::Histogram* h_ = nullptr;
};

class CounterFamily {
 public:
  CounterFamily() = default;
  explicit CounterFamily(prometheus::Family<prometheus::Counter>* f) : f_(f) {}
  Counter with(const Labels& labels) const;  // null when the family is
  explicit operator bool() const { return f_ != nullptr; }

 private:
  prometheus::Family<prometheus::Counter>* f_ = nullptr;
};

class GaugeFamily {
 public:
  GaugeFamily() = default;
  explicit GaugeFamily(prometheus::Family<prometheus::Gauge>* f) : f_(f) {}
  Gauge with(const Labels& labels) const;
  explicit operator bool() const { return f_ != nullptr; }

 private:
  prometheus::Family<prometheus::Gauge>* f_ = nullptr;
};

class HistogramFamily {
 public:
  HistogramFamily() = default;
  HistogramFamily(prometheus::Family<prometheus::Histogram>* f, std::shared_ptr<const std::vector<double>> buckets)
      : f_(f), buckets_(std::move(buckets)) {}
  Histogram with(const Labels& labels) const;
  explicit operator bool() const { return f_ != nullptr; }

 private:
  prometheus::Family<prometheus::Histogram>* f_ = nullptr;
  std::shared_ptr<const std::vector<double>> buckets_;
};

// A gauge family computed when scraped from data its owner already holds (claims by state,
// plugin health): no series outlives the object it describes, and nothing is kept up to date
// on the hot paths.
struct GaugeSnapshot {
  struct Sample {
    Labels labels;
    double value = 0;
  };
  std::string name;
  std::string help;
  std::vector<Sample> samples;
};

// Latency buckets in seconds, 1 ms to 2 min: CSI calls and releases range from a bind mount
// (milliseconds) to a cloud attach (tens of seconds).
std::vector<double> latency_buckets();
// 100 µs to 2.5 s: HTTP answers and state commits.
std::vector<double> fast_buckets();

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily counter(const std::string& name, const std::string& help);
  GaugeFamily gauge(const std::string& name, const std::string& help);
  HistogramFamily histogram(const std::string& name, const std::string& help, std::vector<double> buckets);

  // The Prometheus text exposition (format 0.0.4) of every family, then the snapshots, then the
  // process_* families (process_metrics.hpp).
  std::string text(const std::vector<GaugeSnapshot>& snapshots = {}) const;
  // The same as JSON: [{"Name","Help","Type","Metrics":[{"Labels":{},"Value"} or
  // {"Labels","Count","Sum","Buckets":[{"UpperBound","Count"}]}]}].
  nlohmann::json json(const std::vector<GaugeSnapshot>& snapshots = {}) const;

 private:
  std::unique_ptr<prometheus::Registry> registry_;
};

// The content type of text().
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace mooring::metrics
