#include "cli/http_client.hpp"

#include "shared/tls/certificates.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/version.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>
#include <random>
#include <thread>

namespace mooring::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
namespace ssl = asio::ssl;

namespace {

constexpr std::uint64_t kBodyLimit = 64ull * 1024 * 1024;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

domain::Expected<Endpoint> parse_address(std::string_view text) {
  std::string_view rest = text;
  auto bad = [&](const std::string& why) { return domain::error("address \"" + std::string(text) + "\": " + why); };
  Endpoint e;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    e.tls = true;
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return bad("only https:// and http:// addresses are supported");
  }
  const std::string default_port = e.tls ? "443" : "80";
  while (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("expected http://HOST:PORT without a path");
  if (rest.empty()) return bad("no host");
  if (rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("unterminated [IPv6] host");
    e.host = std::string(rest.substr(1, close - 1));
    auto after = rest.substr(close + 1);
    if (after.empty())
      e.port = default_port;
    else if (after.front() == ':' && all_digits(after.substr(1)))
      e.port = std::string(after.substr(1));
    else
      return bad("expected [HOST]:PORT");
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      e.host = std::string(rest);
      e.port = default_port;
    } else {
      e.host = std::string(rest.substr(0, colon));
      e.port = std::string(rest.substr(colon + 1));
      if (!all_digits(e.port)) return bad("port \"" + e.port + "\" is not a number");
    }
  }
  if (e.host.empty()) return bad("no host");
  if (std::stoul(e.port.substr(0, 6)) > 65535 || e.port.size() > 5) return bad("port " + e.port + " is out of range");
  bool v6 = e.host.find(':') != std::string::npos;
  e.url = (e.tls ? "https://" : "http://") + (v6 ? "[" + e.host + "]" : e.host) + ":" + e.port;
  return e;
}

namespace {

// 128 random bits as hex: a fresh Idempotency-Key for one command's write.
std::string new_idempotency_key() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    auto word = rd();
    for (int j = 0; j < 8; ++j, word >>= 4) out.push_back(kHex[word & 15]);
  }
  return out;
}

bool has_header(const HttpRequest& r, std::string_view lower_name) {
  for (const auto& [k, v] : r.headers)
    if (lower(k) == lower_name) return true;
  return false;
}

}  // namespace

domain::Expected<HttpResponse> HttpClient::send(const HttpRequest& request) const {
  // Every write carries an Idempotency-Key, so a retry after a lost answer (a reset connection,
  // a control plane restarting) is answered with the first answer instead of acting twice.
  HttpRequest req = request;
  if (req.method != "GET" && req.method != "HEAD" && !has_header(req, "idempotency-key"))
    req.headers.emplace_back("Idempotency-Key", new_idempotency_key());
  constexpr int kAttempts = 4;
  auto delay = std::chrono::milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    bool permanent = false;
    auto res = send_once(req, permanent);
    const bool again = (!res && !permanent) || (res && res->status == 503);  // no answer, or still loading
    if (!again || attempt == kAttempts) return res;
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

namespace {

struct Exchange {
  HttpResponse out;
  std::string failure;  // empty: success
  bool connected = false;
  bool permanent = false;  // sending again cannot help (a certificate refused)
};

bhttp::request<bhttp::string_body> to_beast(const HttpRequest& request, const Endpoint& endpoint) {
  bhttp::request<bhttp::string_body> req;
  req.method(bhttp::string_to_verb(request.method));
  req.target(request.target);
  req.version(11);
  req.set(bhttp::field::host, endpoint.host + ":" + endpoint.port);
  req.set(bhttp::field::user_agent, "mooring-cli");
  req.set(bhttp::field::accept, "application/json");
  req.set(bhttp::field::connection, "close");
  for (const auto& [k, v] : request.headers) req.set(k, v);
  if (!request.body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = request.body;
  }
  req.prepare_payload();
  return req;
}

// The answer of a streamed request: headers, then the body handed to request.on_body as it comes
// (a non-2xx body, an error message, is kept in x.out.body instead).
template <class Stream>
asio::awaitable<void> read_streamed(Stream& stream, beast::flat_buffer& buffer, const HttpRequest& request,
                                    Exchange& x) {
  auto token = asio::as_tuple(asio::use_awaitable);
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, token);
  (void)hn;
  if (hec) {
    x.failure = hec == beast::error::timeout
                    ? "no answer within " + std::to_string(request.timeout.count() / 1000) + "s"
                    : "reading the answer failed: " + hec.message();
    co_return;
  }
  x.out.status = parser.get().result_int();
  for (const auto& field : parser.get())
    x.out.headers[lower(std::string(field.name_string()))] = std::string(field.value());
  const bool ok = x.out.status >= 200 && x.out.status < 300;
  std::array<char, 8192> piece;
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    beast::get_lowest_layer(stream).expires_after(request.timeout);  // the server sends heartbeats
    // read_some: a whole read would wait until the piece buffer is full, holding lines back.
    auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, token);
    (void)n;
    if (ec == bhttp::error::need_buffer) ec = {};
    const std::string_view got(piece.data(), piece.size() - parser.get().body().size);
    if (!got.empty()) {
      if (!ok)
        x.out.body.append(got);
      else if (!request.on_body(got))
        co_return;
    }
    if (ec) {
      if (ec != bhttp::error::end_of_stream && ec != asio::error::eof)
        x.failure = ec == beast::error::timeout
                        ? "the stream went silent for " + std::to_string(request.timeout.count() / 1000) + "s"
                        : "reading the stream failed: " + ec.message();
      co_return;
    }
  }
}

// One request and its answer over a connected stream (TCP or TLS).
template <class Stream>
asio::awaitable<void> request_response(Stream& stream, const HttpRequest& request, const Endpoint& endpoint,
                                       Exchange& x) {
  auto token = asio::as_tuple(asio::use_awaitable);
  auto req = to_beast(request, endpoint);
  auto [wec, w] = co_await bhttp::async_write(stream, req, token);
  if (wec) {
    x.failure = "sending the request failed: " + wec.message();
    co_return;
  }
  beast::flat_buffer buffer;
  if (request.on_body) {
    co_await read_streamed(stream, buffer, request, x);
    co_return;
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(kBodyLimit);
  auto [ec, r] = co_await bhttp::async_read(stream, buffer, parser, token);
  if (ec) {
    x.failure = ec == beast::error::timeout ? "no answer within " + std::to_string(request.timeout.count() / 1000) + "s"
                                            : "reading the answer failed: " + ec.message();
    co_return;
  }
  auto& res = parser.get();
  x.out.status = res.result_int();
  x.out.body = std::move(res.body());
  for (const auto& field : res) x.out.headers[lower(std::string(field.name_string()))] = std::string(field.value());
}

// A certificate from the Mooring CA names its role (shared/tls/identity.hpp). A node agent's
// certificate also carries "localhost" and serverAuth, so on a node it could pass the host-name
// check for the control plane: only spiffe://mooring/server may. A certificate with no Mooring
// identity (one from the operator's own CA, for the REST API alone) is judged by its name.
bool speaks_for_the_control_plane(X509* cert) {
  if (cert == nullptr) return false;
  const auto info = tls::inspect(cert);
  for (const auto& uri : info.uris) {
    if (!uri.starts_with(tls::kUriPrefix)) continue;
    const auto identity = tls::parse_identity_uri(uri);
    if (!identity || identity->role != tls::Role::server) return false;
  }
  return true;
}

// The client side of HTTPS: the peer's chain checked against the CA file (or the system's CAs),
// its certificate checked for the host name dialled and, if it is a Mooring one, for the
// control plane's identity.
domain::Expected<std::unique_ptr<ssl::context>> client_tls(const TlsClientFiles& files, const std::string& host) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  beast::error_code ec;
  ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (files.ca_file.empty())
    ctx->set_default_verify_paths(ec);
  else
    ctx->load_verify_file(files.ca_file, ec);
  if (ec)
    return domain::error("CA certificate " + (files.ca_file.empty() ? "(system)" : files.ca_file) + ": " +
                         ec.message());
  if (files.cert_file.empty() != files.key_file.empty())
    return domain::error("a client certificate needs its key (MOORING_CLIENT_CERT and MOORING_CLIENT_KEY)");
  if (!files.cert_file.empty()) {
    if (ctx->use_certificate_chain_file(files.cert_file, ec); ec)
      return domain::error("client certificate " + files.cert_file + ": " + ec.message());
    if (ctx->use_private_key_file(files.key_file, ssl::context::pem, ec); ec)
      return domain::error("client key " + files.key_file + ": " + ec.message());
  }
  ctx->set_verify_mode(ssl::verify_peer);
  ctx->set_verify_callback(
      [by_name = ssl::host_name_verification(host)](bool preverified, ssl::verify_context& vctx) mutable {
        if (!by_name(preverified, vctx)) return false;
        return X509_STORE_CTX_get_error_depth(vctx.native_handle()) != 0 ||
               speaks_for_the_control_plane(X509_STORE_CTX_get_current_cert(vctx.native_handle()));
      });
  return ctx;
}

// Resolves the endpoint and connects `stream` to it: the failure as text, empty on success.
asio::awaitable<std::string> connect_to(beast::tcp_stream& stream, const Endpoint& endpoint,
                                        std::chrono::milliseconds timeout) {
  auto token = asio::as_tuple(asio::use_awaitable);
  tcp::resolver resolver(stream.get_executor());
  auto [rec, endpoints] = co_await resolver.async_resolve(endpoint.host, endpoint.port, token);
  if (rec) co_return "cannot resolve " + endpoint.host + ": " + rec.message();
  stream.expires_after(timeout);
  auto [cec, _] = co_await stream.async_connect(endpoints, token);
  if (cec) co_return cec == beast::error::timeout ? "connection timed out" : cec.message();
  co_return "";
}

// Whether the server at a plain http:// address that closed without an answer speaks TLS: a
// TLS handshake (nothing verified, nothing sent after it) that completes, or that the server ends
// with a TLS alert of its own (one that wants a client certificate).
bool speaks_tls(const Endpoint& endpoint) {
  asio::io_context io{1};
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_none);
  bool tls = false;
  auto probe = [&]() -> asio::awaitable<void> {
    beast::tcp_stream stream(io);
    if (!(co_await connect_to(stream, endpoint, std::chrono::seconds(3))).empty()) co_return;
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), ctx);
    auto [ec] = co_await secure.async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    tls = !ec || (ec.category() == asio::error::get_ssl_category() &&
                  ERR_GET_REASON(static_cast<unsigned long>(ec.value())) >= SSL_AD_REASON_OFFSET);
    beast::error_code ignored;
    beast::get_lowest_layer(secure).socket().shutdown(tcp::socket::shutdown_both, ignored);
  };
  asio::co_spawn(io, probe(), [](std::exception_ptr) {});
  io.run();
  return tls;
}

// Which setting to change, in the words of where the address came from.
std::string address_setting(AddressOrigin origin) {
  return origin == AddressOrigin::flag ? "-address" : "MOORING_ADDR";
}

std::string unreachable(const Endpoint& e, const std::string& failure) {
  if (e.origin == AddressOrigin::fallback)
    return "cannot reach the control plane at " + e.url + ", the default address: " + failure +
           ". Is it running? If it runs elsewhere, set MOORING_ADDR (or -address), e.g. export "
           "MOORING_ADDR=https://HOST:4700";
  const auto setting = address_setting(e.origin);
  return "cannot reach the control plane at " + e.url + " (" + setting + "): " + failure + ". Is it running, and is " +
         setting + " its address?";
}

}  // namespace

domain::Expected<HttpResponse> HttpClient::send_once(const HttpRequest& request, bool& permanent) const {
  permanent = false;
  std::unique_ptr<ssl::context> tls;
  if (endpoint_.tls) {
    auto ctx = client_tls(tls_, endpoint_.host);
    permanent = !ctx;
    if (!ctx) return domain::error("cannot set up HTTPS to " + endpoint_.url + ": " + ctx.error());
    tls = std::move(*ctx);
  }
  asio::io_context io{1};
  Exchange x;

  auto exchange = [&]() -> asio::awaitable<void> {
    auto token = asio::as_tuple(asio::use_awaitable);
    beast::tcp_stream stream(io);
    x.failure = co_await connect_to(stream, endpoint_, request.timeout);
    if (!x.failure.empty()) co_return;
    stream.expires_after(request.timeout);
    x.connected = true;
    beast::error_code ignored;
    if (!tls) {
      co_await request_response(stream, request, endpoint_, x);
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *tls);
    beast::error_code ip_ec;
    asio::ip::make_address(endpoint_.host, ip_ec);
    if (ip_ec) ::SSL_set_tlsext_host_name(secure.native_handle(), endpoint_.host.c_str());  // SNI: names only
    auto [hec] = co_await secure.async_handshake(ssl::stream_base::client, token);
    if (hec) {
      x.permanent = true;
      x.failure =
          "TLS handshake failed: " + hec.message() +
          (hec.category() == asio::error::get_ssl_category() ? " (is MOORING_CACERT the CA that signed it?)" : "");
      co_return;
    }
    co_await request_response(secure, request, endpoint_, x);
    beast::get_lowest_layer(secure).socket().shutdown(tcp::socket::shutdown_both, ignored);
  };

  // Exceptions here are bugs (allocation failure, a Beast precondition): say so instead of aborting.
  asio::co_spawn(io, exchange(), [&](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      x.failure = std::string("internal error: ") + ex.what();
    }
  });
  io.run();
  if (x.failure.empty()) return std::move(x.out);
  permanent = x.permanent;
  // A TLS server closes on a plain HTTP request without a word ("end of stream"): say what to set.
  if (x.connected && !endpoint_.tls && x.out.status == 0 && speaks_tls(endpoint_)) {
    permanent = true;
    const auto https = "https://" + endpoint_.url.substr(std::string_view("http://").size());
    return domain::error(
        "the control plane at " + endpoint_.url +
        " speaks HTTPS: " + (endpoint_.origin == AddressOrigin::flag ? "use -address " : "set MOORING_ADDR=") + https +
        (tls_.ca_file.empty() ? " and MOORING_CACERT (or -ca-cert) to the CA that signed its certificate (make run: "
                                ".mooring/tls/ca.pem)"
                              : ""));
  }
  if (x.connected) return domain::error("the control plane at " + endpoint_.url + " did not answer: " + x.failure);
  return domain::error(unreachable(endpoint_, x.failure));
}

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace mooring::cli
