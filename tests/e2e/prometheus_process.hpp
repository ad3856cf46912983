// E2E support: a real Prometheus server (Debian's `prometheus`) on a free loopback port with a
// temp config and TSDB, scraping what the test names, and its HTTP query API. The process is
// killed and reaped with the object, so a failing test leaks nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"

namespace mooring::e2e {

class PrometheusProcess {
 public:
  // Why Prometheus (or promtool) cannot run here, for GTEST_SKIP; nullopt when both are installed.
  static std::optional<std::string> unavailable();

  // `scrape_configs`: the YAML list under `scrape_configs:` (each item indented by two spaces).
  // Scrapes every 500 ms.
  PrometheusProcess(std::filesystem::path dir, const std::string& scrape_configs);
  ~PrometheusProcess();

  // Starts it and waits until /-/ready answers; false (with the log in `why`) when it does not.
  bool start(std::string& why);
  std::uint16_t port() const { return port_; }
  // GET /api/v1/query?query=... -> data.result (null when the query failed).
  nlohmann::json query(const std::string& promql) const;
  std::string log() const;

 private:
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<test::ChildProcess> process_;
};

// `promtool check metrics` on `exposition` (fed on stdin): its exit code and what it printed.
struct PromtoolResult {
  int code = -1;
  std::string output;
};
PromtoolResult promtool_check_metrics(const std::string& exposition, const std::filesystem::path& scratch_dir);

}  // namespace mooring::e2e
