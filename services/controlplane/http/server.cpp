#include "services/controlplane/http/server.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "services/controlplane/http/connection_limits.hpp"
#include "services/controlplane/http/stream_body.hpp"
#include "services/controlplane/http/tls_context.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

const log::Logger logger{"http"};

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// A refused connection gets its 503 at once; then what the client sends is read and dropped until
// it closes, for at most linger_timeout, so that closing does not reset the connection (a reset
// can destroy the 503 before the client reads it). This many may linger at once; beyond that the
// socket is closed right after the 503.
constexpr std::size_t max_lingering = 64;
constexpr std::chrono::seconds linger_timeout{1};

// Evictions and refusals come in floods; one warning per this period sums them up.
constexpr std::chrono::seconds pressure_log_period{10};

}  // namespace

struct Session {
  // `tls`: the listener's context when it serves HTTPS (kept alive by the session, so a reload
  // never pulls it from under a connection), null for plain HTTP.
  Session(tcp::socket socket, std::uint64_t id_, bool lingering_, std::shared_ptr<ssl::context> tls)
      : id(id_), lingering(lingering_), tls_context(std::move(tls)) {
    if (tls_context) secure.emplace(beast::tcp_stream(std::move(socket)), *tls_context);
    else plain.emplace(std::move(socket));
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
  bool lingering;        // refused: its 503 is written, the rest is read and dropped
  bool evicted = false;  // closed while idle to make room for a new connection
  std::string refusal;   // HTTPS only: the 503's message, written once the handshake is done
  std::string remote;    // the peer's "address:port"
  bool peer_control_plane = false;  // HTTPS: its verified certificate is a control plane's
  std::shared_ptr<ssl::context> tls_context;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
};

namespace {

// Bytes of a request already received: in the kernel, or (HTTPS) decrypted and held by OpenSSL.
bool input_pending(Session& s) {
  error_code ec;
  if (s.transport().socket().available(ec) > 0 && !ec) return true;
  return s.secure && ::SSL_pending(s.secure->native_handle()) > 0;
}

}  // namespace

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

  asio::awaitable<void> accept_loop();
  void on_accept(tcp::socket socket);
  void evict(std::uint64_t id);
  void refuse(tcp::socket socket, const std::string& client, ConnectionLimits::Refusal why);
  void note_pressure(bool refused);
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
  void spawn_session(std::shared_ptr<Session> s);
};

namespace {

Request to_request(bhttp::request<bhttp::string_body>&& req) {
  Request out;
  out.method = std::string(req.method_string());
  for (auto& c : out.method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out.target = std::string(req.target());
  out.path = std::string(out.target.substr(0, out.target.find('?')));
  for (const auto& f : req) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(f.value());
  }
  out.body = std::move(req.body());
  return out;
}

bhttp::status status_for_read_error(const error_code& ec) {
  if (ec == bhttp::error::body_limit) return bhttp::status::payload_too_large;
  if (ec == bhttp::error::header_limit) return bhttp::status::request_header_fields_too_large;
  return bhttp::status::bad_request;
}

bool is_disconnect(const error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted || ec == beast::error::timeout || ec == asio::error::broken_pipe ||
         ec == bhttp::error::partial_message || ec == asio::error::bad_descriptor || ec == ssl::error::stream_truncated;
}

}  // namespace

template <class Stream>
asio::awaitable<void> Server::Impl::respond_raw(Session& s, Stream& io, unsigned status, std::string_view message) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
  Response body = error_response(status, message);
  res.set(bhttp::field::server, "mooring");
  res.set(bhttp::field::content_type, "application/json");
  if (status == 503) res.set(bhttp::field::retry_after, "1");
  res.keep_alive(false);
  res.body() = std::move(body.body);
  res.prepare_payload();
  s.transport().expires_after(config.write_timeout);
  co_await bhttp::async_write(io, res, tuple_awaitable);
}

template <class Stream>
asio::awaitable<bool> Server::Impl::respond(Session& s, Stream& io, RequestFacts req, Response r) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(r.status), req.version};
  res.set(bhttp::field::server, "mooring");
  if (!r.body.empty() || r.status != 204) res.set(bhttp::field::content_type, r.content_type);
  if (r.index) {
    res.set("X-Mooring-Index", std::to_string(*r.index));
    res.set("X-Nomad-Index", std::to_string(*r.index));
  }
  for (auto& [k, v] : r.headers) res.insert(k, v);
  bool keep_alive = req.keep_alive && !r.close && !stopping;
  res.keep_alive(keep_alive);
  if (req.head) {
    res.content_length(r.body.size());
  } else {
    res.body() = std::move(r.body);
    res.prepare_payload();
  }
  s.transport().expires_after(config.write_timeout);
  auto [ec, n] = co_await bhttp::async_write(io, res, tuple_awaitable);
  (void)n;
  co_return !ec && keep_alive;
}

// A streamed response (Response::stream): the head, then the body (stream_body.hpp). The
// connection always closes afterwards.
template <class Stream>
asio::awaitable<void> Server::Impl::respond_stream(Session& s, Stream& io, RequestFacts req, Response r) {
  bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(r.status), req.version};
  res.set(bhttp::field::server, "mooring");
  res.set(bhttp::field::content_type, r.content_type);
  if (r.index) {
    res.set("X-Mooring-Index", std::to_string(*r.index));
    res.set("X-Nomad-Index", std::to_string(*r.index));
  }
  for (auto& [k, v] : r.headers) res.insert(k, v);
  res.keep_alive(false);
  const bool chunked = req.version >= 11;  // HTTP/1.0: the body simply ends when the connection does
  if (chunked) res.chunked(true);
  bhttp::response_serializer<bhttp::empty_body> head{res};
  s.transport().expires_after(config.write_timeout);
  auto [hec, hn] = co_await bhttp::async_write_header(io, head, tuple_awaitable);
  (void)hn;
  if (hec || req.head) co_return;
  s.streaming = true;
  co_await write_stream_body(io, s.transport(), r.stream, chunked, config.write_timeout, stopping, logger);
}

asio::awaitable<void> Server::Impl::run_session(std::shared_ptr<Session> s) {
  // Errors are values here (as_tuple); a cancelled session must still be able to write its last
  // response, so cancellation never throws.
  co_await asio::this_coro::throw_if_cancelled(false);
  // A new connection must deliver its first request's headers within header_timeout of now
  // (just after the accept). For HTTPS the handshake counts against it: a client stalling in the
  // handshake holds a slot no longer than one trickling its headers.
  const auto header_deadline = std::chrono::steady_clock::now() + header_timeout();
  if (!s->secure) {
    co_await serve(*s, *s->plain, header_deadline);
    co_return;
  }
  s->transport().expires_at(header_deadline);
  auto [ec] = co_await s->secure->async_handshake(ssl::stream_base::server, tuple_awaitable);
  if (ec) {
    logger.debug("tls handshake failed", {{"error", ec.message()}});
    co_return;
  }
  if (X509* cert = ::SSL_get1_peer_certificate(s->secure->native_handle())) {
    s->peer_control_plane = ::SSL_get_verify_result(s->secure->native_handle()) == X509_V_OK && is_control_plane(cert);
    ::X509_free(cert);
  }
  co_await serve(*s, *s->secure, header_deadline);
}

template <class Stream>
asio::awaitable<void> Server::Impl::serve(Session& session, Stream& io, TimePoint header_deadline) {
  auto* s = &session;
  beast::flat_buffer buffer;
  for (bool first = true;; first = false) {
    s->waiting_for_request = true;
    s->request_begun = false;
    // Shutting down: no further request on a kept-alive connection, but a new connection whose
    // request is already here is answered (a stream then ends at once with its last chunk).
    if (stopping && !(first && (buffer.size() > 0 || input_pending(*s)))) co_return;
    if (buffer.size() == 0) {
      // Idle until the first byte of the next request arrives; meanwhile the slot may be given to
      // a new connection (see ConnectionLimits). Read directly rather than waiting for
      // readability, so the stream's timeout applies.
      limits.set_idle(s->id, true);
      if (first) s->transport().expires_at(header_deadline);
      else s->transport().expires_after(config.read_timeout);
      auto [ec, n] = co_await io.async_read_some(buffer.prepare(4096), tuple_awaitable);
      limits.set_idle(s->id, false);
      if (ec || s->evicted) co_return;  // closed, timed out, evicted or shutting down
      buffer.commit(n);
      s->request_begun = true;
    } else {
      s->request_begun = true;
      limits.set_idle(s->id, false);  // a pipelined request is already here
    }
    if (!first) header_deadline = std::chrono::steady_clock::now() + header_timeout();
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(config.header_limit));
    parser.body_limit(config.body_limit);
    s->transport().expires_at(header_deadline);
    auto [ec, n] = co_await bhttp::async_read_header(io, buffer, parser, tuple_awaitable);
    (void)n;
    s->waiting_for_request = false;
    if (ec) {
      if (is_disconnect(ec)) co_return;
      co_await respond_raw(*s, io, static_cast<unsigned>(status_for_read_error(ec)), ec.message());
      co_return;
    }
    // curl and others send "Expect: 100-continue" for larger bodies and wait for this line.
    auto expect = parser.get()[bhttp::field::expect];
    if (!parser.is_done() && beast::iequals(expect, "100-continue")) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      s->transport().expires_after(config.write_timeout);
      auto [wec, wn] = co_await asio::async_write(io, asio::buffer(cont), tuple_awaitable);
      (void)wn;
      if (wec) co_return;
    }
    if (!parser.is_done()) {
      s->transport().expires_after(config.read_timeout);
      auto [bec, bn] = co_await bhttp::async_read(io, buffer, parser, tuple_awaitable);
      (void)bn;
      if (bec) {
        if (is_disconnect(bec)) co_return;
        co_await respond_raw(*s, io, static_cast<unsigned>(status_for_read_error(bec)), bec.message());
        co_return;
      }
    }
    auto req = parser.release();
    RequestFacts facts{req.version(), req.keep_alive(), req.method() == bhttp::verb::head};
    std::string method(req.method_string());
    std::string target(req.target());
    Response response;
    s->transport().expires_never();  // blocking queries may take minutes
    try {
      auto request = to_request(std::move(req));
      request.remote = s->remote;
      request.peer_control_plane = s->peer_control_plane;
      response = co_await handler(std::move(request));
    } catch (const boost::system::system_error& e) {
      // A handler cancelled by a forced shutdown is not a bug.
      if (e.code() != asio::error::operation_aborted)
        logger.error("request handler failed", {{"method", method}, {"target", target}, {"error", e.what()}});
      response = error_response(e.code() == asio::error::operation_aborted ? 503 : 500,
                                e.code() == asio::error::operation_aborted ? "shutting down" : "internal error");
    } catch (const std::exception& e) {
      logger.error("request handler failed", {{"method", method}, {"target", target}, {"error", e.what()}});
      response = error_response(500, "internal error");
    }
    if (response.stream) {
      co_await respond_stream(*s, io, facts, std::move(response));
      co_return;
    }
    if (!co_await respond(*s, io, facts, std::move(response))) co_return;
  }
}

asio::awaitable<void> Server::Impl::linger(std::shared_ptr<Session> s) {
  co_await asio::this_coro::throw_if_cancelled(false);
  std::array<char, 4096> scratch;
  std::size_t dropped = 0;
  s->transport().expires_after(linger_timeout);  // one deadline for the whole drain
  if (s->secure) {
    // HTTPS: the 503 can only be written once the handshake is done; then the connection ends.
    auto [ec] = co_await s->secure->async_handshake(ssl::stream_base::server, tuple_awaitable);
    if (!ec) co_await respond_raw(*s, *s->secure, 503, s->refusal);
    co_return;
  }
  while (dropped <= config.header_limit + config.body_limit) {
    auto [ec, n] = co_await s->plain->async_read_some(asio::buffer(scratch), tuple_awaitable);
    if (ec) co_return;
    dropped += n;
  }
}

void Server::Impl::spawn_session(std::shared_ptr<Session> s) {
  sessions.emplace(s->id, s);
  if (s->lingering) ++lingering;
  ++active;
  auto slot = s->cancel.slot();
  auto body = s->lingering ? linger(s) : run_session(s);
  asio::co_spawn(executor, std::move(body),
                 asio::bind_cancellation_slot(slot, [self = shared_from_this(), s](std::exception_ptr e) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       logger.error("http session failed", {{"error", ex.what()}});
                     }
                   }
                   error_code ignored;
                   s->transport().socket().shutdown(tcp::socket::shutdown_both, ignored);
                   s->transport().close();
                   if (s->lingering) --self->lingering;
                   else self->limits.remove(s->id);
                   self->sessions.erase(s->id);
                   self->finished();
                 }));
}

void Server::Impl::on_accept(tcp::socket socket) {
  error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec) return;  // the client is already gone
  // Answers go out as soon as they are written: with Nagle on, a TLS record that ends an answer
  // waited for the client's delayed ACK (~40 ms per request on a kept-alive connection).
  socket.set_option(tcp::no_delay(true), ec);
  const auto client = peer.address().to_string();
  const auto id = next_id++;
  auto admission = limits.admit(id, client);
  if (admission.evicted) {
    evict(*admission.evicted);
    note_pressure(false);
  }
  if (admission.refused) {
    refuse(std::move(socket), client, *admission.refused);
    note_pressure(true);
    return;
  }
  auto session = std::make_shared<Session>(std::move(socket), id, false, tls);
  session->remote = peer.address().is_v6() ? "[" + client + "]:" + std::to_string(peer.port())
                                           : client + ":" + std::to_string(peer.port());
  spawn_session(std::move(session));
}

void Server::Impl::evict(std::uint64_t id) {
  auto it = sessions.find(id);
  if (it == sessions.end()) return;
  // Closing frees the descriptor now; the session's pending read ends with operation_aborted.
  auto& s = *it->second;
  s.evicted = true;
  s.cancel.emit(asio::cancellation_type::terminal);
  error_code ignored;
  s.transport().socket().close(ignored);
}

void Server::Impl::refuse(tcp::socket socket, const std::string& client, ConnectionLimits::Refusal why) {
  const std::string message =
      why == ConnectionLimits::Refusal::per_client
          ? "too many connections from " + client + " (per-client limit " +
                std::to_string(limits.max_per_client()) + "); retry later"
          : "too many connections (server limit " + std::to_string(limits.max_total()) + "); retry later";
  if (tls) {
    if (lingering >= max_lingering) return;  // closed as it goes out of scope
    auto s = std::make_shared<Session>(std::move(socket), next_id++, true, tls);
    s->refusal = message;
    spawn_session(std::move(s));
    return;
  }
  bhttp::response<bhttp::string_body> res{bhttp::status::service_unavailable, 11};
  res.set(bhttp::field::server, "mooring");
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::retry_after, "1");
  res.keep_alive(false);
  res.body() = error_response(503, message).body;
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  const std::string bytes = out.str();
  // Answered before the request is read, without waiting: a new socket's send buffer takes a few
  // hundred bytes at once, and a client that is the cause of the pressure gets no slot to hold.
  error_code ec;
  socket.non_blocking(true, ec);
  if (!ec) socket.write_some(asio::buffer(bytes), ec);
  if (!ec) socket.shutdown(tcp::socket::shutdown_send, ec);
  if (ec || lingering >= max_lingering) {
    socket.close(ec);
    return;
  }
  spawn_session(std::make_shared<Session>(std::move(socket), next_id++, true, nullptr));
}

void Server::Impl::note_pressure(bool refused) {
  ++(refused ? refused_since_log : evicted_since_log);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_pressure_log < pressure_log_period) return;
  logger.warn("http connection limits reached: closing idle connections, refusing new ones if none is idle",
              {{"connections", limits.size()},
               {"max_connections", limits.max_total()},
               {"max_connections_per_client", limits.max_per_client()},
               {"idle_closed", evicted_since_log},
               {"refused", refused_since_log}});
  last_pressure_log = now;
  evicted_since_log = refused_since_log = 0;
}

asio::awaitable<void> Server::Impl::accept_loop() {
  asio::steady_timer backoff(executor);
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
    if (stopping) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
      // Out of descriptors (the process limit may be lower than max_connections): an idle
      // connection gives way, as it would at the connection limit.
      if (ec == asio::error::no_descriptors || ec == boost::system::errc::too_many_files_open_in_system) {
        if (auto id = limits.evict_oldest_idle()) {
          evict(*id);
          note_pressure(false);
          continue;
        }
      }
      // Wait a little rather than spin.
      logger.warn("accept failed", {{"error", ec.message()}});
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(tuple_awaitable);
      continue;
    }
    on_accept(std::move(socket));
  }
}

Server::Server(asio::any_io_executor executor, ServerConfig config, Handler handler)
    : impl_(std::make_shared<Impl>(executor, std::move(config), std::move(handler))) {}

Server::~Server() {
  // Normally shutdown() ran already. If not, close everything; the coroutines hold the Impl
  // alive until they finish.
  impl_->stopping = true;
  error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& [id, s] : impl_->sessions) {
    s->cancel.emit(asio::cancellation_type::terminal);
    s->transport().socket().close(ignored);
  }
}

error_code Server::listen() {
  error_code ec;
  auto address = asio::ip::make_address(impl_->config.address, ec);
  if (ec) return ec;
  tcp::endpoint ep{address, impl_->config.port};
  impl_->acceptor.open(ep.protocol(), ec);
  if (ec) return ec;
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return ec;
  impl_->acceptor.bind(ep, ec);
  if (ec) return ec;
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  return ec;
}

domain::Expected<void> Server::reload_tls() {
  if (!impl_->config.tls.enabled()) return {};
  auto ctx = make_server_tls(impl_->config.tls);
  if (!ctx) return domain::error(ctx.error());
  impl_->tls = std::move(*ctx);  // new connections use it; open ones keep theirs
  return {};
}

bool Server::secure() const { return impl_->tls != nullptr; }

std::uint16_t Server::port() const {
  error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void Server::start() {
  ++impl_->active;
  asio::co_spawn(impl_->executor, impl_->accept_loop(), [self = impl_](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        logger.error("http accept loop failed", {{"error", ex.what()}});
      }
    }
    self->finished();
  });
}

asio::awaitable<void> Server::shutdown(std::chrono::milliseconds grace) {
  auto self = impl_;
  self->stopping = true;
  error_code ignored;
  self->acceptor.close(ignored);
  for (auto& [id, s] : self->sessions)
    if (s->streaming || (s->waiting_for_request && !s->request_begun && !input_pending(*s)))
      s->cancel.emit(asio::cancellation_type::terminal);
  if (self->active > 0) {
    self->idle.expires_after(grace);
    co_await self->idle.async_wait(tuple_awaitable);
  }
  if (self->active > 0) {
    logger.warn("closing connections still busy after the grace period",
                {{"connections", self->sessions.size()}, {"grace", grace}});
    for (auto& [id, s] : self->sessions) {
      s->cancel.emit(asio::cancellation_type::terminal);
      s->transport().socket().close(ignored);
    }
    while (self->active > 0) {
      self->idle.expires_after(std::chrono::seconds(5));
      co_await self->idle.async_wait(tuple_awaitable);
    }
  }
}

std::size_t Server::connections() const { return impl_->limits.size(); }

}  // namespace mooring::controlplane::http
