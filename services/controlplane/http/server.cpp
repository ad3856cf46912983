#include "services/controlplane/http/server.hpp"

#include <cctype>
#include <exception>
#include <list>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "shared/log/log.hpp"

namespace mooring::controlplane::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

const log::Logger logger{"http"};

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// Connections over the limit still get a proper 503 to their first request; this many of those
// may be in progress at once, beyond that the socket is simply closed.
constexpr std::size_t max_rejecting = 64;

}  // namespace

struct Session {
  explicit Session(tcp::socket socket, bool reject) : stream(std::move(socket)), rejecting(reject) {}
  beast::tcp_stream stream;
  asio::cancellation_signal cancel;
  // Only sessions waiting for a request are cancelled by a graceful shutdown; a request being
  // handled or answered is allowed to finish.
  bool waiting_for_request = true;
  bool rejecting;  // over the connection limit: answer 503 and close
};

struct Server::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, ServerConfig cfg, Handler h)
      : executor(ex), config(std::move(cfg)), handler(std::move(h)), acceptor(ex), idle(ex) {}

  asio::any_io_executor executor;
  ServerConfig config;
  Handler handler;
  tcp::acceptor acceptor;
  std::list<std::shared_ptr<Session>> sessions;
  std::size_t active = 0;  // accept loop + sessions; shutdown waits for 0
  bool stopping = false;
  // Used as a condition variable: cancelled whenever `active` drops to zero.
  asio::steady_timer idle;

  std::size_t counted_sessions() const {
    std::size_t n = 0;
    for (const auto& s : sessions) n += s->rejecting ? 0 : 1;
    return n;
  }

  void finished() {
    if (--active == 0) idle.cancel();
  }

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> run_session(std::shared_ptr<Session> s);
  struct RequestFacts {
    unsigned version;
    bool keep_alive;
    bool head;
  };
  asio::awaitable<bool> respond(Session& s, RequestFacts req, Response r);
  asio::awaitable<void> respond_raw(Session& s, unsigned status, std::string_view message);
  void spawn_session(tcp::socket socket);
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
         ec == bhttp::error::partial_message || ec == asio::error::bad_descriptor;
}

}  // namespace

asio::awaitable<void> Server::Impl::respond_raw(Session& s, unsigned status, std::string_view message) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
  Response body = error_response(status, message);
  res.set(bhttp::field::server, "mooring");
  res.set(bhttp::field::content_type, "application/json");
  if (status == 503) res.set(bhttp::field::retry_after, "1");
  res.keep_alive(false);
  res.body() = std::move(body.body);
  res.prepare_payload();
  s.stream.expires_after(config.write_timeout);
  co_await bhttp::async_write(s.stream, res, tuple_awaitable);
}

asio::awaitable<bool> Server::Impl::respond(Session& s, RequestFacts req, Response r) {
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
  s.stream.expires_after(config.write_timeout);
  auto [ec, n] = co_await bhttp::async_write(s.stream, res, tuple_awaitable);
  (void)n;
  co_return !ec && keep_alive;
}

asio::awaitable<void> Server::Impl::run_session(std::shared_ptr<Session> s) {
  // Errors are values here (as_tuple); a cancelled session must still be able to write its last
  // response, so cancellation never throws.
  co_await asio::this_coro::throw_if_cancelled(false);
  beast::flat_buffer buffer;
  for (;;) {
    s->waiting_for_request = true;
    if (stopping && !s->rejecting) co_return;
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(config.header_limit));
    parser.body_limit(config.body_limit);
    s->stream.expires_after(config.read_timeout);
    auto [ec, n] = co_await bhttp::async_read_header(s->stream, buffer, parser, tuple_awaitable);
    (void)n;
    s->waiting_for_request = false;
    if (ec) {
      if (is_disconnect(ec)) co_return;
      co_await respond_raw(*s, static_cast<unsigned>(status_for_read_error(ec)), ec.message());
      co_return;
    }
    if (s->rejecting) {
      co_await respond_raw(*s, 503, "too many connections; retry later");
      co_return;
    }
    // curl and others send "Expect: 100-continue" for larger bodies and wait for this line.
    auto expect = parser.get()[bhttp::field::expect];
    if (!parser.is_done() && beast::iequals(expect, "100-continue")) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      s->stream.expires_after(config.write_timeout);
      auto [wec, wn] = co_await asio::async_write(s->stream, asio::buffer(cont), tuple_awaitable);
      (void)wn;
      if (wec) co_return;
    }
    if (!parser.is_done()) {
      s->stream.expires_after(config.read_timeout);
      auto [bec, bn] = co_await bhttp::async_read(s->stream, buffer, parser, tuple_awaitable);
      (void)bn;
      if (bec) {
        if (is_disconnect(bec)) co_return;
        co_await respond_raw(*s, static_cast<unsigned>(status_for_read_error(bec)), bec.message());
        co_return;
      }
    }
    auto req = parser.release();
    RequestFacts facts{req.version(), req.keep_alive(), req.method() == bhttp::verb::head};
    std::string method(req.method_string());
    std::string target(req.target());
    Response response;
    s->stream.expires_never();  // blocking queries may take minutes
    try {
      response = co_await handler(to_request(std::move(req)));
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
    if (!co_await respond(*s, facts, std::move(response))) co_return;
  }
}

void Server::Impl::spawn_session(tcp::socket socket) {
  bool reject = counted_sessions() >= config.max_connections;
  if (reject && sessions.size() - counted_sessions() >= max_rejecting) {
    error_code ignored;
    socket.close(ignored);
    return;
  }
  auto s = std::make_shared<Session>(std::move(socket), reject);
  sessions.push_back(s);
  auto it = std::prev(sessions.end());
  ++active;
  auto slot = s->cancel.slot();
  asio::co_spawn(executor, run_session(s),
                 asio::bind_cancellation_slot(slot, [self = shared_from_this(), it](std::exception_ptr e) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       logger.error("http session failed", {{"error", ex.what()}});
                     }
                   }
                   error_code ignored;
                   (*it)->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
                   (*it)->stream.close();
                   self->sessions.erase(it);
                   self->finished();
                 }));
}

asio::awaitable<void> Server::Impl::accept_loop() {
  asio::steady_timer backoff(executor);
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
    if (stopping) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
      // Typically EMFILE: wait a little rather than spin.
      logger.warn("accept failed", {{"error", ec.message()}});
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(tuple_awaitable);
      continue;
    }
    spawn_session(std::move(socket));
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
  for (auto& s : impl_->sessions) {
    s->cancel.emit(asio::cancellation_type::terminal);
    s->stream.socket().close(ignored);
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
  for (auto& s : self->sessions)
    if (s->waiting_for_request) s->cancel.emit(asio::cancellation_type::terminal);
  if (self->active > 0) {
    self->idle.expires_after(grace);
    co_await self->idle.async_wait(tuple_awaitable);
  }
  if (self->active > 0) {
    logger.warn("closing connections still busy after the grace period",
                {{"connections", self->sessions.size()}, {"grace", grace}});
    for (auto& s : self->sessions) {
      s->cancel.emit(asio::cancellation_type::terminal);
      s->stream.socket().close(ignored);
    }
    while (self->active > 0) {
      self->idle.expires_after(std::chrono::seconds(5));
      co_await self->idle.async_wait(tuple_awaitable);
    }
  }
}

std::size_t Server::connections() const { return impl_->counted_sessions(); }

}  // namespace mooring::controlplane::http
