// HTTP room: the listener (server.hpp): accepting, the connection limits (evict an idle
// connection or refuse with a 503), the sessions it runs (session.cpp), TLS reloads and shutdown.
#include "services/controlplane/http/server.hpp"

#include <algorithm>
#include <exception>
#include <sstream>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "services/controlplane/http/server_impl.hpp"
#include "services/controlplane/http/tls_context.hpp"
#include "shared/log/log.hpp"
#include "shared/process/process_hygiene.hpp"

namespace mooring::controlplane::http {

namespace bhttp = boost::beast::http;

namespace {

const log::Logger logger{"http"};

// A refused connection gets its 503 at once, then lingers (session.cpp, Impl::linger) so that
// closing does not reset it. This many may linger at once; beyond that the socket is closed right
// after the 503.
constexpr std::size_t max_lingering = 64;

// Evictions and refusals come in floods; one warning per this period sums them up.
constexpr std::chrono::seconds pressure_log_period{10};

}  // namespace

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
                   if (s->lingering)
                     --self->lingering;
                   else
                     self->limits.remove(s->id);
                   self->sessions.erase(s->id);
                   self->finished();
                 }));
}

void Server::Impl::on_accept(tcp::socket socket) {
  error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec) return;                                  // the client is already gone
  process::close_on_exec(socket.native_handle());  // Asio accepts without SOCK_CLOEXEC
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
          ? "too many connections from " + client + " (per-client limit " + std::to_string(limits.max_per_client()) +
                "); retry later"
          : "too many connections (server limit " + std::to_string(limits.max_total()) + "); retry later";
  if (tls) {
    if (lingering >= max_lingering) return;  // closed as it goes out of scope
    auto s = std::make_shared<Session>(std::move(socket), next_id++, true, tls);
    s->refusal = message;
    spawn_session(std::move(s));
    return;
  }
  bhttp::response<bhttp::string_body> res{bhttp::status::service_unavailable, 11};
  set_common_headers(res, false);
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
  // Asio opens sockets without SOCK_CLOEXEC; a listening socket inherited by any exec'd process
  // keeps the port taken after we are gone.
  if (!process::close_on_exec(impl_->acceptor.native_handle()))
    return error_code(errno, boost::system::system_category());
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
