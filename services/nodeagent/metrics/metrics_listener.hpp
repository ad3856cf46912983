// Metrics room of the node agent: a small HTTP listener for Prometheus (--metrics-addr, default
// 127.0.0.1:4703) serving GET /metrics (?format=json for JSON). It serves a scraper and nothing
// else: one request at a time per connection, small header limit, no body, short timeouts.
// Protection: on a loopback address plain HTTP (only this host reaches it); on any other address
// HTTPS with the node's certificate, and the scraper must present a certificate signed by the
// cluster CA (mutual TLS, like the agent's gRPC) — without the TLS files such an address is refused.
// Beast and OpenSSL stay in the .cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/metrics/registry.hpp"

namespace mooring::nodeagent {

// Gauges computed at each scrape from what the agent holds (plugin health, pending unmounts).
using GaugeSource = std::function<std::vector<metrics::GaugeSnapshot>()>;

struct MetricsListenerOptions {
  std::string address = "127.0.0.1:4703";  // HOST:PORT; port 0: any (tests)
  // The agent's mutual TLS files: required for a non-loopback address.
  std::string ca_file, cert_file, key_file;
};

// What one request gets, without I/O (unit-tested directly).
struct MetricsAnswer {
  unsigned status = 200;
  std::string content_type;
  std::string body;
  std::string allow;  // for 405
};
MetricsAnswer answer_metrics(std::string_view method, std::string_view target, const metrics::Registry& registry,
                             const GaugeSource& gauges);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

class MetricsListener {
 public:
  MetricsListener(boost::asio::any_io_executor executor, const metrics::Registry& registry, GaugeSource gauges,
                  MetricsListenerOptions options);
  ~MetricsListener();
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  // Binds and starts accepting; "" on success, else why not (naming the address).
  std::string start();
  std::uint16_t port() const;
  bool secure() const;
  // Closes the listener and every connection, and waits for their coroutines.
  boost::asio::awaitable<void> stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace mooring::nodeagent
