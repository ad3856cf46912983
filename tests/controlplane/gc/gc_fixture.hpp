// Test support for the GC room: a control plane core (store over an in-memory backend, change
// feed, agent router, claim GC, node-loss monitor) on its own io thread, fake node agents on
// real gRPC ports, and helpers to build nodes, plugins and claims.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/state/change_feed.hpp"
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/node_loss.hpp"
#include "services/controlplane/gc/release_calls.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "tests/controlplane/gc/fake_agent.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::testing {

using namespace std::chrono_literals;

inline gc::GcOptions fast_gc() {
  gc::GcOptions o;
  o.backoff.initial = 20ms;
  o.backoff.max = 200ms;
  o.sweep_period = 1h;
  o.node_wait_recheck = 500ms;
  return o;
}

// One control plane process's worth of objects over a shared backend (a restart makes a new one).
// The store runs with group commit, as in the binary: the router waits for durability.
struct Plane {
  // `calls`: the GC's agent calls go to this fake instead of through the router.
  Plane(asio::io_context& io, StateBackend& backend, gc::GcOptions options, gc::ReleaseCalls* calls = nullptr)
      : feed(backend),
        store(io.get_executor(), feed, StateOptions{.group_commit = true}),
        router(io.get_executor(), store, agentclient::AgentRouterOptions{.timeout_override = 3s}),
        router_calls(router),
        gc(io.get_executor(), store, feed, calls ? *calls : router_calls, options),
        loss(io.get_executor(), store, gc::NodeLossOptions{.max_wait = 200ms}) {
    if (!store.load()) throw std::runtime_error("load failed");
  }
  ChangeFeed feed;
  StateStore store;
  agentclient::AgentRouter router;
  gc::RouterReleaseCalls router_calls;
  gc::ClaimGc gc;
  gc::NodeLossMonitor loss;
};

class GcFixture : public ::testing::Test {
 protected:
  GcFixture() : work_(asio::make_work_guard(io)), thread_([this] { io.run(); }) {}

  ~GcFixture() override {
    shutdown_plane();
    work_.reset();
    io.stop();
    thread_.join();
  }

  template <class F>
  auto on_io(F f) {
    if (io.get_executor().running_in_this_thread()) return f();  // nested (a predicate using claim())
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    asio::post(io, [&task] { task(); });
    return fut.get();
  }

  // Waits until everything committed so far is durable: the store's writer thread has applied it
  // to `backend`, which the test may then read.
  void settle() {
    auto st = asio::co_spawn(
                  io, [this]() -> asio::awaitable<domain::Status> { co_return co_await plane->store.durable(plane->store.index()); },
                  asio::use_future)
                  .get();
    ASSERT_TRUE(st) << st.error();
  }

  void make_plane(gc::GcOptions options = fast_gc(), gc::ReleaseCalls* calls = nullptr) {
    plane = on_io([&] { return std::make_unique<Plane>(io, backend, options, calls); });
  }
  void start_gc() {
    on_io([&] {
      plane->gc.start();
      return 0;
    });
  }
  void start_loss() {
    on_io([&] {
      plane->loss.start();
      return 0;
    });
  }
  // Stops the GC and drops the plane, as a process exit would.
  void shutdown_plane() {
    if (!plane) return;
    asio::co_spawn(io, plane->gc.stop(), asio::use_future).get();
    asio::co_spawn(io, plane->loss.stop(), asio::use_future).get();
    on_io([&] {
      plane->store.release_waiters();
      plane.reset();
      return 0;
    });
  }

  // fixtures::put_running over the plane's store, read on the io thread.
  void put_running_on_io(Batch& b, const domain::Plugin& p, std::vector<domain::Node> nodes = {}) {
    on_io([&] {
      fixtures::put_running(b, {p}, &plane->store, std::move(nodes));
      return 0;
    });
  }

  std::uint64_t commit(Batch b) {
    return on_io([&] {
      auto r = plane->store.commit(std::move(b));
      if (!r) throw std::runtime_error(r.error());
      return *r;
    });
  }

  template <class Pred>
  bool eventually(Pred pred, std::chrono::milliseconds timeout = 15s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (on_io(pred)) return true;
      std::this_thread::sleep_for(10ms);
    }
    return on_io(pred);
  }

  std::optional<domain::Claim> claim(const std::string& volume, const std::string& alloc) {
    return on_io([&]() -> std::optional<domain::Claim> {
      const auto* v = plane->store.volume(volume);
      if (!v) return std::nullopt;
      auto it = v->claims.find(alloc);
      if (it == v->claims.end()) return std::nullopt;
      return it->second;
    });
  }
  bool freed(const std::string& volume, const std::string& alloc) { return !claim(volume, alloc).has_value(); }

  // ---- builders (public: the pure rule tests use them too) ----
 public:
  static domain::Node node(const std::string& id, const std::string& address,
                           domain::NodeStatus status = domain::NodeStatus::ready) {
    domain::Node n;
    n.id = id;
    n.name = id;
    n.address = address;
    n.status = status;
    n.last_heartbeat = domain::now();
    return n;
  }

  // A plugin with node instances on `node_ids` and controller instances (monoliths) on
  // `controller_nodes`; attach/detach as given.
  static domain::Plugin plugin(const std::string& id, const std::vector<std::string>& node_ids,
                               const std::vector<std::string>& controller_nodes, bool attach_detach = true) {
    domain::Plugin p;
    p.id = id;
    auto add = [&](const std::string& n, bool controller) {
      domain::PluginInstance i;
      i.plugin_id = id;
      i.node_id = n;
      i.type = controller ? domain::PluginType::controller : domain::PluginType::node;
      i.healthy = true;
      i.provider = "fake.mooring.dev";
      i.version = "1.0";
      i.requires_controller_plugin = !controller_nodes.empty();
      if (controller) {
        i.controller_info = domain::ControllerInfo{};
        i.controller_info->supports_attach_detach = attach_detach;
        i.controller_info->supports_create_delete = true;
        i.controller_info->supports_expand = true;
        i.controller_info->supports_create_delete_snapshot = true;
        i.controller_info->supports_list_snapshots = true;
        i.controller_info->supports_list_volumes = true;
      } else {
        i.node_info = domain::NodeInfo{};
        i.node_info->id = "csi-" + n;
      }
      domain::upsert_instance(p, i);
    };
    for (const auto& n : node_ids) add(n, false);
    for (const auto& n : controller_nodes) add(n, true);
    domain::recount(p);
    return p;
  }

  static domain::Volume volume(const std::string& id, const std::string& plugin_id,
                               std::vector<domain::Claim> claims = {}) {
    domain::Volume v;
    v.id = id;
    v.name = id;
    v.plugin_id = plugin_id;
    v.external_id = "ext-" + id;
    v.requested_capabilities = {{domain::AccessMode::single_node_writer, domain::AttachmentMode::file_system}};
    v.secrets = {{"token", "s3cret"}};
    for (auto& c : claims) v.claims[c.allocation_id] = c;
    if (!v.claims.empty()) {
      v.access_mode = domain::AccessMode::single_node_writer;
      v.attachment_mode = domain::AttachmentMode::file_system;
    }
    return v;
  }

  static domain::Allocation allocation(const std::string& id, const std::string& node, const std::string& volume_id,
                                       domain::ClientStatus status = domain::ClientStatus::running) {
    domain::Allocation a;
    a.id = id;
    a.name = "web";
    a.node_id = node;
    a.client_status = status;
    domain::VolumeRequest r;
    r.name = "data";
    r.source = volume_id;
    r.access_mode = domain::AccessMode::single_node_writer;
    r.attachment_mode = domain::AttachmentMode::file_system;
    a.volumes["data"] = r;
    return a;
  }

  asio::io_context io;
  FakeBackend backend;
  FakeAgents agents;
  std::unique_ptr<Plane> plane;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace mooring::controlplane::testing
