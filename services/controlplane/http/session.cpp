// HTTP room: one connection's life (server_impl.hpp): the TLS handshake, the request loop with its
// timeouts and limits, the answers (whole or streamed), and the drain of a refused connection.
#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <optional>
#include <tuple>
#include <vector>

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

struct Refusal {
  unsigned status;
  std::string message;
};

Refusal read_refusal(const error_code& ec, const ServerConfig& config) {
  if (ec == bhttp::error::body_limit)
    return {413, "request body larger than the limit of " + std::to_string(config.body_limit) + " bytes"};
  if (ec == bhttp::error::header_limit)
    return {431, "request line and headers larger than the limit of " + std::to_string(config.header_limit) + " bytes"};
  if (ec == bhttp::error::multiple_content_length)
    return {400, "malformed request: Content-Length given twice, differently"};
  return {400, "malformed request: " + ec.message()};
}

// The framing of a request's body must be unambiguous: either a Content-Length or exactly one
// "chunked" (RFC 9112 6.1, 6.3). Beast takes a Transfer-Encoding that does not end in chunked
// ("gzip", "xchunked", "chunked, identity") as no body at all, so what follows would be parsed as
// a second request: the request smuggling shape a proxy in front that reads it differently opens.
std::optional<Refusal> framing_refusal(const bhttp::request<bhttp::string_body>& req) {
  std::vector<std::string> codings;
  bool named = false;
  const auto [first, last] = req.equal_range(bhttp::field::transfer_encoding);
  for (auto field = first; field != last; ++field) {
    named = true;
    std::string_view rest = field->value();
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      auto coding = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) coding.remove_suffix(1);
      if (!coding.empty()) codings.emplace_back(coding.substr(0, 64));
    }
  }
  if (!named) return std::nullopt;
  if (req.version() < 11) return Refusal{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request"};
  for (const auto& coding : codings)
    if (!beast::iequals(coding, "chunked"))
      return Refusal{501, "Transfer-Encoding \"" + coding + "\" is not supported; only \"chunked\" is"};
  if (codings.size() != 1)
    return Refusal{400, "Transfer-Encoding must name \"chunked\" exactly once, got " + std::to_string(codings.size())};
  if (req.count(bhttp::field::content_length) > 0)
    return Refusal{400, "a request must not carry both Content-Length and Transfer-Encoding"};
  return std::nullopt;
}

// The method and path of a request line ("PUT /v1/x?y HTTP/1.1" -> PUT, /v1/x) from raw bytes,
// when the header could not be parsed; empty parts when they are not there.
std::pair<std::string, std::string> sniff_request_line(std::string_view raw) {
  const auto space = raw.find(' ');
  if (space == std::string_view::npos || space == 0 || space > 32) return {};
  const auto method = raw.substr(0, space);
  const bool token = std::all_of(method.begin(), method.end(), [](unsigned char c) { return std::isalpha(c); });
  if (!token) return {};
  auto rest = raw.substr(space + 1);
  rest = rest.substr(0, std::min<std::size_t>(rest.find_first_of(" ?\r\n"), 1024));
  return {std::string(method), std::string(rest)};
}

// What may be told of a request that was not read whole: its method and path (never the query,
// a header or the body), from the parsed header, or from the raw bytes when that failed.
Request known_of(const bhttp::request_parser<bhttp::string_body>& parser, const beast::flat_buffer& buffer,
                 const Session& s) {
  Request out;
  const auto& head = parser.get();
  if (!head.method_string().empty()) {
    out.method = std::string(head.method_string());
    out.target = std::string(head.target());
  } else {
    const auto data = buffer.cdata();
    std::tie(out.method, out.target) =
        sniff_request_line({static_cast<const char*>(data.data()), std::min<std::size_t>(data.size(), 1200)});
  }
  for (auto& c : out.method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out.target = out.target.substr(0, out.target.find('?'));
  out.path = out.target;
  out.remote = s.remote;
  out.secure = s.secure.has_value();
  out.peer_control_plane = s.peer_control_plane;
  return out;
}

bool is_disconnect(const error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted || ec == beast::error::timeout || ec == asio::error::broken_pipe ||
         ec == bhttp::error::partial_message || ec == asio::error::bad_descriptor || ec == ssl::error::stream_truncated;
}

// Reads and drops what the client sends until it closes, the stream's deadline passes, or more
// than `limit` bytes came.
template <class Stream>
asio::awaitable<void> drop_input(Stream& io, std::size_t limit) {
  std::array<char, 4096> scratch;
  for (std::size_t dropped = 0; dropped <= limit;) {
    auto [ec, n] = co_await io.async_read_some(asio::buffer(scratch), tuple_awaitable);
    if (ec) co_return;
    dropped += n;
  }
}

// Reads the body of a request whose header was read, answering "Expect: 100-continue" first
// (curl and others send it for larger bodies and wait for that line). A failed write of that
// line counts as the client gone.
template <class Stream>
asio::awaitable<error_code> read_body(Session& s, Stream& io, beast::flat_buffer& buffer,
                                      bhttp::request_parser<bhttp::string_body>& parser,
                                      std::chrono::milliseconds read_timeout, std::chrono::milliseconds write_timeout) {
  if (parser.is_done()) co_return error_code{};
  if (beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
    static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
    s.transport().expires_after(write_timeout);
    auto [wec, wn] = co_await asio::async_write(io, asio::buffer(cont), tuple_awaitable);
    (void)wn;
    if (wec) co_return error_code(asio::error::broken_pipe);
  }
  s.transport().expires_after(read_timeout);
  auto [ec, n] = co_await bhttp::async_read(io, buffer, parser, tuple_awaitable);
  (void)n;
  co_return ec;
}

}  // namespace

template <class Stream>
asio::awaitable<void> Server::Impl::respond_raw(Session& s, Stream& io, unsigned status, std::string_view message) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
  Response body = error_response(status, message);
  set_common_headers(res, s.secure.has_value());
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
  if (!r.body.empty() || r.status != 204) res.set(bhttp::field::content_type, r.content_type);
  if (r.index) {
    res.set("X-Mooring-Index", std::to_string(*r.index));
    res.set("X-Nomad-Index", std::to_string(*r.index));
  }
  for (auto& [k, v] : r.headers) res.insert(k, v);
  set_common_headers(res, s.secure.has_value());
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
  res.set(bhttp::field::content_type, r.content_type);
  if (r.index) {
    res.set("X-Mooring-Index", std::to_string(*r.index));
    res.set("X-Nomad-Index", std::to_string(*r.index));
  }
  for (auto& [k, v] : r.headers) res.insert(k, v);
  set_common_headers(res, s.secure.has_value());
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
      if (first)
        s->transport().expires_at(header_deadline);
      else
        s->transport().expires_after(config.read_timeout);
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
      auto why = read_refusal(ec, config);
      co_await refuse_request(*s, io, known_of(parser, buffer, *s), why.status, std::move(why.message));
      co_return;
    }
    if (auto why = framing_refusal(parser.get())) {
      co_await refuse_request(*s, io, known_of(parser, buffer, *s), why->status, std::move(why->message));
      co_return;
    }
    if (auto bec = co_await read_body(*s, io, buffer, parser, config.read_timeout, config.write_timeout)) {
      if (is_disconnect(bec)) co_return;
      auto why = read_refusal(bec, config);
      co_await refuse_request(*s, io, known_of(parser, buffer, *s), why.status, std::move(why.message));
      co_return;
    }
    Request known = known_of(parser, buffer, *s);  // for a handler that throws
    auto req = parser.release();
    RequestFacts facts{req.version(), req.keep_alive(), req.method() == bhttp::verb::head};
    Response response;
    s->transport().expires_never();  // blocking queries may take minutes
    try {
      auto request = to_request(std::move(req));
      request.remote = s->remote;
      request.peer_control_plane = s->peer_control_plane;
      request.secure = s->secure.has_value();
      response = co_await handler(std::move(request));
    } catch (...) {
      response = answer_exception(std::current_exception(), known);
      report_refused(known, response);
    }
    if (response.stream) {
      co_await respond_stream(*s, io, facts, std::move(response));
      co_return;
    }
    if (!co_await respond(*s, io, facts, std::move(response))) co_return;
  }
}

void Server::Impl::report_refused(const Request& known, const Response& answer) {
  if (!config.refused) return;
  try {
    config.refused(known, answer);
  } catch (const std::exception& e) {
    logger.error("reporting a refused request failed", {{"error", e.what()}});
  }
}

template <class Stream>
asio::awaitable<void> Server::Impl::refuse_request(Session& s, Stream& io, Request known, unsigned status,
                                                   std::string message) {
  report_refused(known, error_response(status, message));
  co_await respond_raw(s, io, status, message);
  // Nothing more of this connection is read as a request. What the client still sends is read
  // and dropped briefly, so that closing does not reset the connection (a reset can destroy the
  // answer before the client reads it); plain HTTP also says it is done writing first.
  s.transport().expires_after(linger_timeout);
  if (!s.secure) {
    error_code ignored;
    s.transport().socket().shutdown(tcp::socket::shutdown_send, ignored);
  }
  co_await drop_input(io, config.header_limit + config.body_limit);
}

asio::awaitable<void> Server::Impl::linger(std::shared_ptr<Session> s) {
  co_await asio::this_coro::throw_if_cancelled(false);
  s->transport().expires_after(linger_timeout);  // one deadline for the whole drain
  if (s->secure) {
    // HTTPS: the 503 can only be written once the handshake is done; then the connection ends.
    auto [ec] = co_await s->secure->async_handshake(ssl::stream_base::server, tuple_awaitable);
    if (!ec) co_await respond_raw(*s, *s->secure, 503, s->refusal);
    co_return;
  }
  co_await drop_input(*s->plain, config.header_limit + config.body_limit);
}

}  // namespace mooring::controlplane::http
