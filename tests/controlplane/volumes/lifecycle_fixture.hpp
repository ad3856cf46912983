// Tests: the volume lifecycle without sockets — a store over an in-memory backend, a scripted
// controller, and a plugin "hostpath" whose controller on node n1 can do everything.
#pragma once

#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fake_controller.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

class VolumeLifecycleTest : public ::testing::Test {
 protected:
  VolumeLifecycleTest() {
    EXPECT_TRUE(store.load());
    auto plugin = fixtures::plugin("hostpath", "n1", true);
    for (auto* map : {&plugin.controllers, &plugin.nodes})
      for (auto& [id, inst] : *map) {
        auto& info = *inst.controller_info;
        info.supports_create_delete = info.supports_expand = info.supports_create_delete_snapshot =
            info.supports_clone = true;
      }
    Batch batch;
    fixtures::put_running(batch, {plugin}, nullptr, {node("n1", domain::NodeStatus::ready)});
    EXPECT_TRUE(store.commit(std::move(batch)));
  }

  static domain::Node node(std::string id, domain::NodeStatus status) {
    domain::Node n;
    n.id = std::move(id);
    n.status = status;
    return n;
  }

  void seed(Batch batch) { ASSERT_TRUE(store.commit(std::move(batch))); }

  // Runs the operation and every background task it started to the end.
  template <class T>
  T run(boost::asio::awaitable<T> op) {
    std::optional<T> out;
    boost::asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T value) {
      if (e) std::rethrow_exception(e);
      out = std::move(value);
    });
    io.run();
    io.restart();
    return std::move(*out);
  }

  void run_background() {
    io.run();
    io.restart();
  }

  // Who asks, with every right (ACLs off). A named member: a class temporary passed by value to
  // a coroutine is what GCC 12 mishandles.
  const volumes::Asker anyone = volumes::Asker::unrestricted();
  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
  FakeController controller;
  std::vector<std::string> retried;
  volumes::VolumeLifecycle lifecycle{io.get_executor(), store, controller,
                                     [this](const std::string& id) { retried.push_back(id); }};
};

}  // namespace mooring::controlplane
