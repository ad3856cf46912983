#include "tests/e2e/prometheus_process.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/http_client.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/files.hpp"

namespace mooring::e2e {

namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";

}  // namespace

std::optional<std::string> PrometheusProcess::unavailable() {
  if (::access(kPrometheus, X_OK) != 0 || ::access(kPromtool, X_OK) != 0)
    return std::string("prometheus/promtool are not installed (apt-get install prometheus)");
  return std::nullopt;
}

PrometheusProcess::PrometheusProcess(std::filesystem::path dir, const std::string& scrape_configs)
    : dir_(std::move(dir)), port_(test::free_tcp_port()) {
  std::filesystem::create_directories(dir_ / "data");
  std::ofstream(dir_ / "prometheus.yml") << "global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n"
                                         << "scrape_configs:\n"
                                         << scrape_configs;
}

PrometheusProcess::~PrometheusProcess() = default;  // ChildProcess kills and reaps

bool PrometheusProcess::start(std::string& why) {
  test::SpawnOptions o;
  o.binary = kPrometheus;
  o.args = {"--config.file=" + (dir_ / "prometheus.yml").string(),
            "--storage.tsdb.path=" + (dir_ / "data").string(),
            "--web.listen-address=127.0.0.1:" + std::to_string(port_),
            "--log.level=warn"};
  o.output_file = dir_ / "prometheus.log";
  process_ = std::make_unique<test::ChildProcess>(o);
  for (int i = 0; i < 300; ++i) {
    if (!process_->running()) break;
    if (controlplane::http_request(port_, "GET", "/-/ready").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  why = "prometheus did not become ready:\n" + log();
  return false;
}

nlohmann::json PrometheusProcess::query(const std::string& promql) const {
  auto r = controlplane::http_request(port_, "GET", "/api/v1/query?query=" + cli::url_encode(promql));
  if (r.status != 200) return nullptr;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || j.value("status", "") != "success") return nullptr;
  return j["data"]["result"];
}

std::string PrometheusProcess::log() const { return test::read_file(dir_ / "prometheus.log"); }

PromtoolResult promtool_check_metrics(const std::string& exposition, const std::filesystem::path& scratch_dir) {
  const auto input = scratch_dir / "exposition.txt";
  std::ofstream(input) << exposition;
  const std::string cmd = std::string(kPromtool) + " check metrics < '" + input.string() + "' 2>&1";
  PromtoolResult out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.output.append(buf, n);
  const int status = ::pclose(p);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace mooring::e2e
