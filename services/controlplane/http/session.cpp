// HTTP room: one connection's life (server_impl.hpp): the TLS handshake, the request loop with its
// timeouts and limits, the answers (whole or streamed), and the drain of a refused connection.
#include <algorithm>
#include <array>
#include <cctype>
#include <exception>

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "services/controlplane/http/server_impl.hpp"
#include "services/controlplane/http/stream_body.hpp"
#include "services/controlplane/http/tls_context.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::http {

namespace bhttp = boost::beast::http;

namespace {

const log::Logger logger{"http"};

// A refused connection gets its 503 at once; then what the client sends is read and dropped until
// it closes, for at most this long, so that closing does not reset the connection (a reset can
// destroy the 503 before the client reads it).
constexpr std::chrono::seconds linger_timeout{1};

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

}  // namespace mooring::controlplane::http
