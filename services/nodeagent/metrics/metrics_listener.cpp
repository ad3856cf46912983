#include "services/nodeagent/metrics/metrics_listener.hpp"

#include <chrono>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <nlohmann/json.hpp>

#include "shared/async/task_group.hpp"
#include "shared/config/host_port.hpp"
#include "shared/log/log.hpp"
#include "shared/process/process_hygiene.hpp"

namespace mooring::nodeagent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

namespace {

const log::Logger logger{"metrics"};
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
// A scraper sends its request at once and reads the answer at once.
constexpr std::chrono::seconds kRequestTimeout{10};
constexpr std::size_t kHeaderLimit = 8 * 1024;

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto a = asio::ip::make_address(std::string(host), ec);
  return !ec && a.is_loopback();
}

MetricsAnswer answer_metrics(std::string_view method, std::string_view target, const metrics::Registry& registry,
                             const GaugeSource& gauges) {
  const auto q = target.find('?');
  const auto path = target.substr(0, q);
  const auto query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  auto json_error = [](unsigned status, const std::string& message) {
    return MetricsAnswer{status, "application/json", nlohmann::json{{"Error", message}}.dump(), ""};
  };
  if (path != "/metrics")
    return json_error(404, "no such endpoint: " + std::string(path) + " (metrics are at /metrics)");
  if (method != "GET") {
    auto a = json_error(405, "method " + std::string(method) + " not allowed on /metrics");
    a.allow = "GET";
    return a;
  }
  std::string_view format = "text";
  if (!query.empty()) {
    if (query == "format=json")
      format = "json";
    else if (query != "format=text")
      return json_error(400, "query " + std::string(query) + ": only format=text or format=json is understood");
  }
  const auto snapshots = gauges ? gauges() : std::vector<metrics::GaugeSnapshot>{};
  if (format == "json") return {200, "application/json", registry.json(snapshots).dump(), ""};
  return {200, metrics::kTextContentType, registry.text(snapshots), ""};
}

struct MetricsListener::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, const metrics::Registry& r, GaugeSource g, MetricsListenerOptions o)
      : registry(r), gauges(std::move(g)), options(std::move(o)), acceptor(ex), tasks(ex, "metrics-http") {}

  const metrics::Registry& registry;
  GaugeSource gauges;
  MetricsListenerOptions options;
  tcp::acceptor acceptor;
  std::shared_ptr<ssl::context> tls;  // null: plain HTTP
  async::TaskGroup tasks;             // last: destroyed (and cancelled) first

  std::optional<std::string> load_tls() {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    boost::system::error_code ec;
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                         ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                     ec);
    if (!ec) ctx->use_certificate_chain_file(options.cert_file, ec);
    if (ec) return "certificate " + options.cert_file + ": " + ec.message();
    ctx->use_private_key_file(options.key_file, ssl::context::pem, ec);
    if (ec) return "key " + options.key_file + ": " + ec.message();
    ctx->load_verify_file(options.ca_file, ec);
    if (ec) return "CA " + options.ca_file + ": " + ec.message();
    // Scrapers prove themselves with a certificate of the cluster CA.
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return "TLS verify mode: " + ec.message();
    tls = std::move(ctx);
    return std::nullopt;
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      beast::get_lowest_layer(stream).expires_after(kRequestTimeout);
      bhttp::request_parser<bhttp::empty_body> parser;
      parser.header_limit(kHeaderLimit);
      auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, tuple_awaitable);
      (void)n;
      if (ec) co_return;  // closed, timed out, cancelled, or not HTTP: nothing to answer
      const auto& req = parser.get();
      auto a = answer_metrics(std::string_view(req.method_string()), std::string_view(req.target()), registry, gauges);
      bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(a.status), req.version()};
      res.set(bhttp::field::server, "mooring-nodeagent");
      res.set(bhttp::field::content_type, a.content_type);
      if (!a.allow.empty()) res.set(bhttp::field::allow, a.allow);
      res.keep_alive(req.keep_alive());
      res.body() = std::move(a.body);
      res.prepare_payload();
      auto [wec, wn] = co_await bhttp::async_write(stream, res, tuple_awaitable);
      (void)wn;
      if (wec || !res.keep_alive()) co_return;
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    if (!tls) {
      beast::tcp_stream stream(std::move(socket));
      co_await serve(stream);
      boost::system::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *tls);
    beast::get_lowest_layer(stream).expires_after(kRequestTimeout);
    auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, tuple_awaitable);
    if (ec) {
      logger.debug("metrics TLS handshake failed", {{"error", ec.message()}});
      co_return;
    }
    co_await serve(stream);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(1));
    co_await stream.async_shutdown(tuple_awaitable);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        logger.warn("metrics accept failed", {{"error", ec.message()}});
        asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(100));
        co_await pause.async_wait(tuple_awaitable);
        continue;
      }
      process::close_on_exec(socket.native_handle());  // accepted without SOCK_CLOEXEC
      tasks.spawn("metrics-session",
                  [self = shared_from_this(), s = std::make_shared<tcp::socket>(std::move(socket))]() {
                    return self->session(std::move(*s));
                  });
    }
  }
};

MetricsListener::MetricsListener(asio::any_io_executor executor, const metrics::Registry& registry, GaugeSource gauges,
                                 MetricsListenerOptions options)
    : impl_(std::make_shared<Impl>(std::move(executor), registry, std::move(gauges), std::move(options))) {}

MetricsListener::~MetricsListener() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->tasks.cancel();
}

std::string MetricsListener::start() {
  const auto& addr = impl_->options.address;
  const auto where = config::parse_host_port(addr);
  if (!where) return "metrics address " + addr + " is not HOST:PORT";
  const auto& [host, port] = *where;
  if (!is_loopback_host(host)) {
    if (impl_->options.cert_file.empty() || impl_->options.key_file.empty() || impl_->options.ca_file.empty())
      return "metrics address " + addr +
             " is not a loopback address: serving metrics there needs the agent's TLS files (HTTPS, scrapers "
             "present a certificate of the cluster CA); use a 127.0.0.1 address or give --tls-ca-file, "
             "--tls-cert-file and --tls-key-file";
    if (auto err = impl_->load_tls()) return "metrics HTTPS on " + addr + ": " + *err;
  }
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return "metrics address " + addr + ": " + ec.message();
  tcp::endpoint ep{address, port};
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  // Asio opens sockets without SOCK_CLOEXEC: a plugin launched with this listener open kept
  // the port after an agent crash, and the restarted agent could not bind it (issue 40).
  if (!ec && !process::close_on_exec(a.native_handle())) ec.assign(errno, boost::system::system_category());
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    const auto why = ec.message();  // before close() overwrites ec
    a.close(ec);
    return "metrics address " + addr + ": " + why;
  }
  impl_->tasks.spawn("metrics-accept", [self = impl_]() { return self->accept_loop(); });
  return "";
}

std::uint16_t MetricsListener::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

bool MetricsListener::secure() const { return impl_->tls != nullptr; }

asio::awaitable<void> MetricsListener::stop() {
  auto self = impl_;
  boost::system::error_code ignored;
  self->acceptor.close(ignored);
  self->tasks.cancel();
  co_await self->tasks.join();
}

}  // namespace mooring::nodeagent
