// Test helper: run one coroutine to completion on a fresh io_context, rethrowing its exception.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <stdexcept>

namespace mooring::async {

inline void run_coro(boost::asio::io_context& io, boost::asio::awaitable<void> body,
                     std::chrono::seconds limit = std::chrono::seconds(30)) {
  bool done = false;
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    done = true;
    error = e;
  });
  io.run_for(limit);
  if (!done) throw std::runtime_error("coroutine did not finish in time");
  if (error) std::rethrow_exception(error);
}

}  // namespace mooring::async
