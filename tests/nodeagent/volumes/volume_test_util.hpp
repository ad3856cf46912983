// Test helpers for the volumes room: drive a test-owned io_context until a coroutine finishes or
// a condition holds (the test thread owns the loop, so it can touch processes in between).
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

namespace mooring::nodeagent {

inline bool pump_until(boost::asio::io_context& io, const std::function<bool()>& done,
                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();
    if (io.run_for(std::chrono::milliseconds(10)) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline void pump_for(boost::asio::io_context& io, std::chrono::milliseconds duration) {
  pump_until(io, [] { return false; }, duration);
}

template <class T>
T run_awaitable(boost::asio::io_context& io, boost::asio::awaitable<T> op,
                std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  // Shared, so a coroutine that outlives a timed-out wait never writes into a dead stack frame.
  struct State {
    std::optional<T> out;
    std::exception_ptr error;
    bool finished = false;
  };
  auto state = std::make_shared<State>();
  boost::asio::co_spawn(io, std::move(op), [state](std::exception_ptr e, T value) {
    state->finished = true;
    state->error = e;
    if (!e) state->out.emplace(std::move(value));
  });
  if (!pump_until(io, [&] { return state->finished; }, timeout)) {
    throw std::runtime_error("coroutine did not finish in time");
  }
  if (state->error) std::rethrow_exception(state->error);
  return std::move(*state->out);
}

}  // namespace mooring::nodeagent
