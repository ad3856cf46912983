// Test support: the real API behind the real HTTP server on an OS-chosen port, over a fake or
// SQLite backend and a scripted controller, with the io thread owned by the fixture. `on_io` runs code on the io thread
// (the store is single-threaded).
#pragma once

#include <future>
#include <memory>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include "services/controlplane/api/api.hpp"
#include "services/controlplane/http/server.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fake_controller.hpp"

namespace mooring::controlplane {

class ApiServer {
 public:
  // The store runs with group commit, as in the binary: every answer waits until it is durable.
  explicit ApiServer(api::ApiOptions options = {})
      : store(io.get_executor(), backend, StateOptions{.group_commit = true}),
        volumes(io.get_executor(), store, controller),
        api(store, volumes, options) {
    if (!store.load()) throw std::runtime_error("load failed");
  }
  ~ApiServer() { stop(); }

  // Seed state before start() (runs on the caller's thread; nothing else touches the store yet).
  std::uint64_t seed(Batch b) {
    auto r = store.commit(std::move(b));
    if (!r) throw std::runtime_error(r.error());
    return *r;
  }

  void start(http::ServerConfig config = {}) {
    config.port = 0;
    config.refused = [this](const http::Request& r, const http::Response& res) { api.record_refusal(r, res); };
    server = std::make_unique<http::Server>(io.get_executor(), config,
                                            [this](http::Request r) { return api.handle(std::move(r)); });
    if (auto tls = server->reload_tls(); !tls) throw std::runtime_error(tls.error());
    if (server->listen()) throw std::runtime_error("listen failed");
    server->start();
    port = server->port();
    const auto seeded = store.index();
    thread = std::thread([this] { io.run(); });
    // Seeded commits are flushed by the store's writer thread: durable before a test compares
    // the backend with what it sees next.
    if (!boost::asio::co_spawn(io, store.durable(seeded), boost::asio::use_future).get())
      throw std::runtime_error("seeded state not durable");
  }

  // Waits until everything committed so far is durable (the store's writer thread has flushed it),
  // so the backend can be compared with what the test did, including commits made with on_io.
  void settle() {
    auto st = boost::asio::co_spawn(
                  io, [this]() -> boost::asio::awaitable<domain::Status> { co_return co_await store.durable(store.index()); },
                  boost::asio::use_future)
                  .get();
    if (!st) throw std::runtime_error("state not durable: " + st.error());
  }

  template <class F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    boost::asio::post(io, [&task] { task(); });
    return fut.get();
  }

  void stop() {
    if (!thread.joinable()) return;
    on_io([this] {
      store.release_waiters();
      return 0;
    });
    boost::asio::co_spawn(io, server->shutdown(std::chrono::seconds(5)), boost::asio::use_future).get();
    thread.join();
  }

  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store;
  FakeController controller;
  volumes::VolumeLifecycle volumes;
  api::Api api;
  std::unique_ptr<http::Server> server;
  std::thread thread;
  std::uint16_t port = 0;
};

}  // namespace mooring::controlplane
