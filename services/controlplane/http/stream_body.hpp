// The body of a streamed response (Response::stream), for session.cpp only: each piece the
// producer returns is awaited beside a wait for the socket to turn readable, so a client that
// closes (or sends anything, which no client of a stream does) ends the stream at once rather
// than at the next heartbeat's failed write, and a vanished dashboard holds no slot and no
// waiter. HTTP/1.1 gets chunked encoding ending in the last chunk; HTTP/1.0's body simply ends
// with the connection.
#pragma once

#include <chrono>
#include <exception>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/chunk_encode.hpp>

#include "services/controlplane/http/message.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::http {

// Writes `next`'s pieces to `io` (whose TCP layer is `transport`) until the producer ends, fails,
// the client goes away or `stopping` turns true. A stalled reader is dropped after `write_timeout`.
template <class Stream>
boost::asio::awaitable<void> write_stream_body(Stream& io, boost::beast::tcp_stream& transport,
                                               const Response::NextPiece& next, bool chunked,
                                               std::chrono::milliseconds write_timeout, const bool& stopping,
                                               const log::Logger& logger) {
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
  auto& socket = transport.socket();
  bool client_gone = false;
  while (!stopping) {
    auto [order, failure, piece, wait_error] = co_await asio::experimental::make_parallel_group(
                                                   asio::co_spawn(socket.get_executor(), next(), asio::deferred),
                                                   socket.async_wait(asio::ip::tcp::socket::wait_read, asio::deferred))
                                                   .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    (void)wait_error;
    if (order[0] == 1) {
      client_gone = true;
      break;
    }
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const boost::system::system_error& e) {
        if (e.code() != asio::error::operation_aborted) logger.error("event stream failed", {{"error", e.what()}});
      } catch (const std::exception& e) {
        logger.error("event stream failed", {{"error", e.what()}});
      }
      break;
    }
    if (!piece) break;             // the producer ended the stream
    if (piece->empty()) continue;  // an empty chunk would end the body
    transport.expires_after(write_timeout);
    auto [wec, wn] = chunked ? co_await asio::async_write(io, bhttp::make_chunk(asio::buffer(*piece)), tuple_awaitable)
                             : co_await asio::async_write(io, asio::buffer(*piece), tuple_awaitable);
    (void)wn;
    if (wec) {
      client_gone = true;
      break;
    }
  }
  if (chunked && !client_gone) {
    transport.expires_after(write_timeout);
    co_await asio::async_write(io, bhttp::make_chunk_last(), tuple_awaitable);
  }
}

}  // namespace mooring::controlplane::http
