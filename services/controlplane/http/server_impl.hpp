// HTTP room (internal): what server.cpp (accepting, connection limits, shutdown) and session.cpp
// (one connection: TLS handshake, the request loop, writing answers) share: a connection's
// Session and the server's state. Only those two files include it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/ssl.h>

#include "services/controlplane/http/connection_limits.hpp"
#include "services/controlplane/http/server.hpp"

namespace mooring::controlplane::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

inline constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// Headers on every answer, whoever made it: nosniff, so a browser never takes an answer for
// another type than it says (an error quoting input is not HTML); over HTTPS, HSTS (a year), so a
// browser that once reached the API securely never falls back to plain HTTP. Set after the
// handler's own headers, so each appears once.
template <class Message>
void set_common_headers(Message& res, bool secure) {
  res.set(beast::http::field::server, "mooring");
  res.set("X-Content-Type-Options", "nosniff");
  if (secure) res.set(beast::http::field::strict_transport_security, "max-age=31536000");
}

struct Session {
  // `tls`: the listener's context when it serves HTTPS (kept alive by the session, so a reload
  // never pulls it from under a connection), null for plain HTTP.
  Session(tcp::socket socket, std::uint64_t id_, bool lingering_, std::shared_ptr<ssl::context> tls)
      : id(id_), lingering(lingering_), tls_context(std::move(tls)) {
    if (tls_context)
      secure.emplace(beast::tcp_stream(std::move(socket)), *tls_context);
    else
      plain.emplace(std::move(socket));
  }
  // The TCP stream, where the timeouts and the socket are, whichever stream runs on it.
  beast::tcp_stream& transport() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  asio::cancellation_signal cancel;
  std::uint64_t id;  // in Impl::sessions and, unless lingering, in Impl::limits
  // Only sessions waiting for a request are cancelled by a graceful shutdown; a request being
  // handled or answered is allowed to finish, and so is one whose first bytes have arrived.
  bool waiting_for_request = true;
  bool request_begun = false;
  // Sending a streamed body: a graceful shutdown cancels it too, which ends the body cleanly.
  bool streaming = false;
  bool lingering;                   // refused: its 503 is written, the rest is read and dropped
  bool evicted = false;             // closed while idle to make room for a new connection
  std::string refusal;              // HTTPS only: the 503's message, written once the handshake is done
  std::string remote;               // the peer's "address:port"
  bool peer_control_plane = false;  // HTTPS: its verified certificate is a control plane's
  std::shared_ptr<ssl::context> tls_context;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
};

// Bytes of a request already received: in the kernel, or (HTTPS) decrypted and held by OpenSSL.
inline bool input_pending(Session& s) {
  error_code ec;
  if (s.transport().socket().available(ec) > 0 && !ec) return true;
  return s.secure && ::SSL_pending(s.secure->native_handle()) > 0;
}

struct Server::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, ServerConfig cfg, Handler h)
      : executor(ex),
        config(std::move(cfg)),
        handler(std::move(h)),
        acceptor(ex),
        limits(std::max<std::size_t>(config.max_connections, 1),
               std::max<std::size_t>(config.max_connections_per_client, 1)),
        idle(ex) {}

  asio::any_io_executor executor;
  ServerConfig config;
  Handler handler;
  tcp::acceptor acceptor;
  ConnectionLimits limits;
  std::unordered_map<std::uint64_t, std::shared_ptr<Session>> sessions;
  std::uint64_t next_id = 1;
  std::size_t lingering = 0;
  std::size_t active = 0;  // accept loop + sessions; shutdown waits for 0
  bool stopping = false;
  // Used as a condition variable: cancelled whenever `active` drops to zero.
  asio::steady_timer idle;
  std::chrono::steady_clock::time_point last_pressure_log{};
  std::size_t evicted_since_log = 0;
  std::size_t refused_since_log = 0;
  std::shared_ptr<ssl::context> tls;  // set by reload_tls(); null: plain HTTP

  std::chrono::milliseconds header_timeout() const { return std::min(config.header_timeout, config.read_timeout); }

  void finished() {
    if (--active == 0) idle.cancel();
  }

  // server.cpp: accepting, the connection limits, the sessions' registry.
  asio::awaitable<void> accept_loop();
  void on_accept(tcp::socket socket);
  void evict(std::uint64_t id);
  void refuse(tcp::socket socket, const std::string& client, ConnectionLimits::Refusal why);
  void note_pressure(bool refused);
  void spawn_session(std::shared_ptr<Session> s);

  // session.cpp: one connection.
  asio::awaitable<void> run_session(std::shared_ptr<Session> s);
  using TimePoint = std::chrono::steady_clock::time_point;
  template <class Stream>
  asio::awaitable<void> serve(Session& s, Stream& io, TimePoint header_deadline);
  asio::awaitable<void> linger(std::shared_ptr<Session> s);
  struct RequestFacts {
    unsigned version;
    bool keep_alive;
    bool head;
  };
  template <class Stream>
  asio::awaitable<bool> respond(Session& s, Stream& io, RequestFacts req, Response r);
  template <class Stream>
  asio::awaitable<void> respond_stream(Session& s, Stream& io, RequestFacts req, Response r);
  template <class Stream>
  asio::awaitable<void> respond_raw(Session& s, Stream& io, unsigned status, std::string_view message);
  // A request refused before the handler saw it: reported (config.refused), answered, and the
  // connection ended without reading anything of it as another request.
  template <class Stream>
  asio::awaitable<void> refuse_request(Session& s, Stream& io, Request known, unsigned status, std::string message);
  void report_refused(const Request& known, const Response& answer);
};

}  // namespace mooring::controlplane::http
