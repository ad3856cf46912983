// Runs a coroutine to completion on a test's io_context, with a time limit, rethrowing what it
// threw. The function object is kept alive by co_spawn, so a capturing lambda coroutine is safe.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <utility>

namespace mooring::nodeagent {

template <class F>
void run_async(boost::asio::io_context& io, F fn, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  bool done = false;
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(fn), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(done) << "the test coroutine did not finish within " << limit.count() << " ms";
  if (error) std::rethrow_exception(error);
}

// Lets whatever is queued on `io` run for `d`.
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

}  // namespace mooring::nodeagent
