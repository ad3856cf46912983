#include "services/controlplane/ha/forwarder.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <openssl/ssl.h>

#include "services/controlplane/http/query.hpp"
#include "services/controlplane/http/tls_context.hpp"
#include "shared/process/process_hygiene.hpp"

namespace mooring::controlplane::ha {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr std::size_t kBodyLimit = 64 * 1024 * 1024;
constexpr std::string_view kNoAnswer = "no answer";

std::string seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// Headers that belong to one hop, not to the request or answer: never passed along.
bool hop_by_hop(std::string_view lower) {
  return lower == "connection" || lower == "keep-alive" || lower == "transfer-encoding" || lower == "te" ||
         lower == "upgrade" || lower == "proxy-connection" || lower == "content-length" || lower == "host";
}

struct Url {
  bool tls = false;
  std::string host, port;
};

std::optional<Url> parse_url(std::string_view url) {
  Url out;
  if (url.starts_with("https://")) {
    out.tls = true;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  out.host = std::string(url.substr(0, colon));
  out.port = std::string(url.substr(colon + 1));
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  return out;
}

// The leader's certificate carries the control plane's identity (spiffe://mooring/server) from our
// CA: enough without a name match, since the leader is dialled at the address it advertised
// (a pod IP in Kubernetes, which its certificate does not name). Other certificates must name
// the host dialled (http::is_control_plane).

http::Response unavailable(const std::string& leader_url, const std::string& why) {
  auto r = http::error_response(503, "this control plane is a standby and cannot reach the leader at " + leader_url +
                                         ": " + why + "; retry (a new leader is elected within seconds)");
  r.set_header("Retry-After", "1");
  return r;
}

}  // namespace

struct Forwarder::Impl {
  asio::any_io_executor executor;
  std::unique_ptr<ssl::context> tls;  // null: plaintext leaders only
  ForwardTimeouts timeouts;

  template <class Stream>
  asio::awaitable<std::optional<std::string>> exchange(Stream& stream, bhttp::request<bhttp::string_body>& req,
                                                       http::Response& out) {
    auto token = asio::as_tuple(asio::use_awaitable);
    if (auto [ec, n] = co_await bhttp::async_write(stream, req, token); ec)
      co_return ec == beast::error::timeout ? std::string(kNoAnswer) : "sending failed: " + ec.message();
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kBodyLimit);
    if (auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, token); ec)
      co_return ec == beast::error::timeout ? std::string(kNoAnswer) : "reading the answer failed: " + ec.message();
    auto& res = parser.get();
    out.status = res.result_int();
    out.body = std::move(res.body());
    for (const auto& field : res) {
      std::string name(field.name_string());
      std::string lower = name;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (hop_by_hop(lower) || lower == "server" || lower == "x-nomad-index") continue;
      if (lower == "content-type") {
        out.content_type = std::string(field.value());
      } else if (lower == "x-mooring-index") {
        try {
          out.index = std::stoull(std::string(field.value()));
        } catch (const std::exception&) {
        }
      } else {
        out.set_header(std::move(name), std::string(field.value()));
      }
    }
    co_return std::nullopt;
  }
};

domain::Expected<std::unique_ptr<Forwarder>> Forwarder::make(asio::any_io_executor executor, ForwardTls files,
                                                             ForwardTimeouts timeouts) {
  auto impl = std::make_unique<Impl>();
  impl->executor = std::move(executor);
  impl->timeouts = timeouts;
  if (!files.ca_file.empty()) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
    ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    beast::error_code ec;
    if (ctx->load_verify_file(files.ca_file, ec); ec)
      return domain::error("forwarding to the leader: CA " + files.ca_file + ": " + ec.message());
    if (!files.cert_file.empty()) {
      if (ctx->use_certificate_chain_file(files.cert_file, ec); ec)
        return domain::error("forwarding to the leader: certificate " + files.cert_file + ": " + ec.message());
      if (ctx->use_private_key_file(files.key_file, ssl::context::pem, ec); ec)
        return domain::error("forwarding to the leader: key " + files.key_file + ": " + ec.message());
    }
    ctx->set_verify_mode(ssl::verify_peer);
    impl->tls = std::move(ctx);
  }
  return std::unique_ptr<Forwarder>(new Forwarder(std::move(impl)));
}

Forwarder::Forwarder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Forwarder::~Forwarder() = default;

asio::awaitable<Forwarded> Forwarder::forward(std::string leader_url, http::Request request, std::string via) {
  auto url = parse_url(leader_url);
  if (!url) co_return Forwarded{unavailable(leader_url, "its advertised address is not http(s)://HOST:PORT")};
  if (url->tls && !impl_->tls)
    co_return Forwarded{unavailable(leader_url, "it serves HTTPS and this control plane has no CA to check it")};

  bhttp::request<bhttp::string_body> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  for (const auto& [k, v] : request.headers)
    if (!hop_by_hop(k) && !k.starts_with(kForwardedPrefix)) req.set(k, v);  // a client's own are not passed on
  req.set(bhttp::field::host, url->host + ":" + url->port);
  req.set("X-Forwarded-For", request.remote.substr(0, request.remote.rfind(':')));
  req.set(kForwardedFor, request.remote);
  if (!via.empty()) req.set(kForwardedBy, via);
  req.set(bhttp::field::connection, "close");
  req.body() = std::move(request.body);
  req.prepare_payload();

  // A blocking query is held by the leader for its wait (default 5 minutes, at most 10, as the
  // API does); the answer may take that long on top of the usual bound.
  auto answer = impl_->timeouts.answer;
  if (request.query.count("index")) {
    std::chrono::milliseconds wait = 5min;
    if (auto w = request.param("wait"))
      if (auto d = http::parse_duration(*w)) wait = std::min<std::chrono::milliseconds>(*d, 10min);
    answer += wait;
  }
  auto token = asio::as_tuple(asio::use_awaitable);
  tcp::resolver resolver(impl_->executor);
  auto [rec, endpoints] = co_await resolver.async_resolve(url->host, url->port, token);
  if (rec) co_return Forwarded{unavailable(leader_url, "cannot resolve " + url->host + ": " + rec.message())};
  beast::tcp_stream stream(impl_->executor);
  stream.expires_after(impl_->timeouts.connect);
  if (auto [cec, ep] = co_await stream.async_connect(endpoints, token); cec)
    co_return Forwarded{unavailable(leader_url, cec == beast::error::timeout
                                                    ? "no connection within " + seconds(impl_->timeouts.connect)
                                                    : cec.message())};
  process::close_on_exec(stream.socket().native_handle());  // Asio's connect opens it without SOCK_CLOEXEC
  stream.expires_after(answer);                             // the handshake and the whole exchange

  http::Response out;
  std::optional<std::string> failure;
  if (!url->tls) {
    failure = co_await impl_->exchange(stream, req, out);
  } else {
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *impl_->tls);
    secure.set_verify_callback(
        [by_name = ssl::host_name_verification(url->host)](bool preverified, ssl::verify_context& vctx) mutable {
          if (!preverified) return false;  // the chain must lead to our CA
          if (X509_STORE_CTX_get_error_depth(vctx.native_handle()) != 0) return true;
          return http::is_control_plane(X509_STORE_CTX_get_current_cert(vctx.native_handle())) ||
                 by_name(preverified, vctx);
        });
    beast::error_code ip_ec;
    asio::ip::make_address(url->host, ip_ec);
    if (ip_ec) ::SSL_set_tlsext_host_name(secure.native_handle(), url->host.c_str());
    if (auto [hec] = co_await secure.async_handshake(ssl::stream_base::client, token); hec)
      co_return Forwarded{unavailable(leader_url, hec == beast::error::timeout
                                                      ? "no TLS handshake within " + seconds(answer)
                                                      : "TLS handshake failed: " + hec.message())};
    failure = co_await impl_->exchange(secure, req, out);
  }
  if (failure) {
    if (*failure == kNoAnswer) *failure = "no answer within " + seconds(answer);
    co_return Forwarded{unavailable(leader_url, *failure)};
  }
  co_return Forwarded{std::move(out), true};
}

}  // namespace mooring::controlplane::ha
