// Bench: the claim GC storm. The control plane's own GC pieces (state store over the real SQLite
// backend, or with --etcd URL over the real etcd backend on a running etcd cluster; change feed,
// agent router, claim GC) in this process; simulated nodes are real gRPC servers on loopback that
// answer NodeDetachVolume and ControllerUnpublishVolume at once.
//
// N volumes each hold one claim of a running allocation; then the allocations end the way node
// agents report it (allocation complete + claim unpublishing, 100 per transaction) and we time
// until every claim is freed. Every release step is a real durable commit and a real RPC.
// Reference, measured in the same run: the time the storm spent inside the backend's commits (the
// durable-write floor of a design that persists each step before the next); bench/run_bench.py
// also runs it on both backends and prints etcd beside SQLite.
// Work per change: ClaimGc::volumes_examined() per volume, and single releases timed against a
// background of N idle volumes, at two sizes.
//
// Output: one JSON object on stdout.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "mooring/v1/nodeagent.grpc.pb.h"
#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/state/change_feed.hpp"
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/release_calls.hpp"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/log/log.hpp"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace mooring;
using namespace mooring::controlplane;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A simulated node agent: answers the two release RPCs at once, on gRPC's own threads.
class SimAgent final : public v1::NodeAgent::CallbackService {
 public:
  grpc::ServerUnaryReactor* NodeDetachVolume(grpc::CallbackServerContext* ctx, const v1::NodeDetachVolumeRequest*,
                                             v1::NodeDetachVolumeResponse*) override {
    detaches.fetch_add(1, std::memory_order_relaxed);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* ControllerUnpublishVolume(grpc::CallbackServerContext* ctx,
                                                      const v1::ControllerUnpublishVolumeRequest*,
                                                      ::csi::v1::ControllerUnpublishVolumeResponse*) override {
    unpublishes.fetch_add(1, std::memory_order_relaxed);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  std::atomic<std::uint64_t> detaches{0}, unpublishes{0};
};

struct SimNode {
  std::string id;
  std::string address;
  std::unique_ptr<SimAgent> agent;
  std::unique_ptr<grpc::Server> server;
};

// Times every transaction on its way to the real backend.
class TimedBackend final : public StateBackend {
 public:
  explicit TimedBackend(StateBackend& inner) : inner_(inner) {}
  domain::Expected<Snapshot> load() override { return inner_.load(); }
  domain::Status apply(const Transaction& tx) override {
    auto t0 = Clock::now();
    auto st = inner_.apply(tx);
    count(bench::ms_since(t0), 1);
    return st;
  }
  domain::Status apply_group(std::span<const Transaction> txs) override {
    auto t0 = Clock::now();
    auto st = inner_.apply_group(txs);
    count(bench::ms_since(t0), txs.size());
    return st;
  }
  // Written by the store's writer thread, read by the bench's.
  struct Totals {
    double apply_ms = 0;
    std::uint64_t transactions = 0;
    std::uint64_t flushes = 0;  // SQLite transactions (fsyncs): fewer than `transactions` with group commit
  };
  Totals totals() const {
    std::lock_guard lock(mutex_);
    return totals_;
  }

 private:
  void count(double ms, std::size_t transactions) {
    std::lock_guard lock(mutex_);
    totals_.apply_ms += ms;
    totals_.transactions += transactions;
    ++totals_.flushes;
  }
  StateBackend& inner_;
  mutable std::mutex mutex_;
  Totals totals_;
};

domain::Claim claim(const std::string& alloc, const std::string& node) {
  domain::Claim c;
  c.allocation_id = alloc;
  c.node_id = node;
  c.external_node_id = "csi-" + node;
  c.mode = domain::ClaimMode::write;
  c.access_mode = domain::AccessMode::single_node_writer;
  c.attachment_mode = domain::AttachmentMode::file_system;
  c.state = domain::ClaimState::taken;
  c.create_time = c.update_time = domain::now();
  return c;
}

domain::Volume volume(const std::string& id) {
  domain::Volume v;
  v.id = id;
  v.name = id;
  v.plugin_id = "sim";
  v.external_id = "ext-" + id;
  v.provider = "sim.mooring.dev";
  v.requested_capabilities = {{domain::AccessMode::single_node_writer, domain::AttachmentMode::file_system}};
  v.secrets = {{"token", "bench"}};
  return v;
}

domain::Allocation allocation(const std::string& id, const std::string& node, const std::string& volume_id) {
  domain::Allocation a;
  a.id = id;
  a.name = "bench";
  a.node_id = node;
  a.desired_status = domain::DesiredStatus::run;
  a.client_status = domain::ClientStatus::running;
  domain::VolumeRequest r;
  r.name = "data";
  r.source = volume_id;
  r.access_mode = domain::AccessMode::single_node_writer;
  r.attachment_mode = domain::AttachmentMode::file_system;
  a.volumes["data"] = r;
  return a;
}

// CPU time of this process so far (every thread: the store's writer, gRPC's), ms.
double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1000.0 + static_cast<double>(t.tv_usec) / 1000.0; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

std::string vol_id(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gv-%06zu", i);
  return buf;
}
std::string alloc_id(std::size_t i, int round) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ga-%d-%06zu", round, i);
  return buf;
}

struct Options {
  std::size_t volumes = 10000;
  int nodes = 10;
  std::size_t per_commit = 100;  // allocations ending per transaction (one node's status report)
  int singles = 100;             // single releases timed after the storm
  std::string etcd;              // "etcd://h:p,.../prefix": the etcd backend instead of SQLite
};

// One control plane core over a fresh SQLite data dir, or a fresh prefix of an etcd cluster.
class Harness {
 public:
  Harness(const Options& o, const fs::path& dir) : opt_(o), dir_(dir) {
    for (int i = 0; i < o.nodes; ++i) {
      SimNode n;
      n.id = "sim-" + std::to_string(i);
      n.agent = std::make_unique<SimAgent>();
      grpc::ServerBuilder b;
      int port = 0;
      b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      b.RegisterService(n.agent.get());
      n.server = b.BuildAndStart();
      if (!n.server || port == 0) throw std::runtime_error("cannot start a simulated agent");
      n.address = "127.0.0.1:" + std::to_string(port);
      nodes_.push_back(std::move(n));
    }
    if (o.etcd.empty()) {
      auto backend = SqliteBackend::open(dir_);
      if (!backend) throw std::runtime_error("sqlite: " + backend.error());
      backend_ = std::move(*backend);
    } else {
      // A prefix of its own per run, so runs never see each other's state.
      auto options = parse_etcd_url(o.etcd + "/gc-" + std::to_string(o.volumes) + "-" + std::to_string(::getpid()));
      if (!options) throw std::runtime_error(options.error());
      auto backend = EtcdBackend::open(std::move(*options));
      if (!backend) throw std::runtime_error("etcd: " + backend.error());
      backend_ = std::move(*backend);
    }
    timed_ = std::make_unique<TimedBackend>(*backend_);
    thread_ = std::thread([this] { io_.run(); });
    on_io([&] {
      feed_ = std::make_unique<ChangeFeed>(*timed_);
      StateOptions options;
      options.group_commit = true;  // as the binary runs it
      store_ = std::make_unique<StateStore>(io_.get_executor(), *feed_, options);
      if (!store_->load()) throw std::runtime_error("load failed");
      router_ = std::make_unique<agentclient::AgentRouter>(io_.get_executor(), *store_);
      release_calls_ = std::make_unique<gc::RouterReleaseCalls>(*router_);
      gc_ = std::make_unique<gc::ClaimGc>(io_.get_executor(), *store_, *feed_, *release_calls_, gc::GcOptions{});
      return 0;
    });
  }

  ~Harness() {
    if (gc_) asio::co_spawn(io_, gc_->stop(), asio::use_future).get();
    on_io([&] {
      store_->release_waiters();
      gc_.reset();
      release_calls_.reset();
      router_.reset();
      store_.reset();
      feed_.reset();
      return 0;
    });
    work_.reset();
    io_.stop();
    thread_.join();
    for (auto& n : nodes_) n.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  template <class F>
  decltype(std::declval<F&>()()) on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    asio::post(io_, [&task] { task(); });
    return fut.get();
  }

  void commit(Batch b) {
    auto r = store_->commit(std::move(b));
    if (!r) throw std::runtime_error("commit: " + r.error());
  }

  // Nodes, the plugin (node instances everywhere, a controller with PUBLISH_UNPUBLISH on sim-0),
  // and N volumes with one taken claim each (allocations running).
  void populate() {
    on_io([&] {
      Batch b;
      // The plugin's aggregate follows the instances the node rows hold.
      for (std::size_t k = 0; k < nodes_.size(); ++k) {
        const auto& n = nodes_[k];
        domain::Node node;
        node.id = n.id;
        node.name = n.id;
        node.address = n.address;
        node.status = domain::NodeStatus::ready;
        node.last_heartbeat = domain::now();
        domain::PluginInstance i;
        i.plugin_id = "sim";
        i.node_id = n.id;
        i.type = domain::PluginType::node;
        i.healthy = true;
        i.provider = "sim.mooring.dev";
        i.version = "1.0";
        i.requires_controller_plugin = true;
        i.node_info = domain::NodeInfo{};
        i.node_info->id = "csi-" + n.id;
        node.plugins["sim"] = i;
        if (k == 0) {  // beside its node instance: a split plugin's controller
          domain::PluginInstance c = i;
          c.type = domain::PluginType::controller;
          c.node_info.reset();
          c.controller_info = domain::ControllerInfo{};
          c.controller_info->supports_attach_detach = true;
          node.split_controllers["sim"] = c;
        }
        b.put(node);
      }
      commit(std::move(b));
      return 0;
    });
    for (std::size_t start = 0; start < opt_.volumes; start += 1000) {
      on_io([&] {
        Batch b;
        for (std::size_t i = start; i < std::min(opt_.volumes, start + 1000); ++i) b.put(volume(vol_id(i)));
        commit(std::move(b));
        return 0;
      });
    }
  }

  // Gives every volume in [from, to) a taken claim of a running allocation of `round`.
  void claim_all(std::size_t from, std::size_t to, int round) {
    for (std::size_t start = from; start < to; start += 1000) {
      on_io([&] {
        Batch b;
        for (std::size_t i = start; i < std::min(to, start + 1000); ++i) {
          const auto& node = nodes_[i % nodes_.size()].id;
          domain::Volume v = *store_->volume(vol_id(i));
          v.claims[alloc_id(i, round)] = claim(alloc_id(i, round), node);
          v.access_mode = domain::AccessMode::single_node_writer;
          v.attachment_mode = domain::AttachmentMode::file_system;
          b.put(std::move(v));
          b.put(allocation(alloc_id(i, round), node, vol_id(i)));
        }
        commit(std::move(b));
        return 0;
      });
    }
  }

  // What a node's status report does when its allocations end: allocation complete, claim
  // unpublishing, one transaction.
  void end_allocations(const std::vector<std::size_t>& idx, int round) {
    Batch b;
    for (auto i : idx) {
      const auto* a = store_->allocation(alloc_id(i, round));
      const auto* v = store_->volume(vol_id(i));
      if (!a || !v) continue;
      domain::Allocation ac = *a;
      ac.client_status = domain::ClientStatus::complete;
      ac.desired_status = domain::DesiredStatus::stop;
      b.put(std::move(ac));
      domain::Volume vc = *v;
      if (advance_claim(vc, alloc_id(i, round), domain::ClaimState::unpublishing, domain::now()))
        throw std::runtime_error("cannot advance claim");
      b.put(std::move(vc));
    }
    commit(std::move(b));
  }

  // Waits until the GC has examined nothing new for 100 ms.
  void quiesce() {
    auto last = on_io([&] { return gc_->volumes_examined(); });
    for (int quiet = 0; quiet < 5;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto now = on_io([&] { return gc_->volumes_examined(); });
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
  }

  // Claimed volumes, counting a release as done only once it is durable (group commit).
  std::size_t claimed_volumes() {
    return on_io([&] {
      std::size_t n = 0;
      for (const auto& [id, v] : store_->volumes()) n += v.claims.empty() ? 0 : 1;
      if (n == 0 && store_->durable_index() < store_->index()) n = 1;
      return n;
    });
  }

  // The counters, read on the io thread (the GC writes its own there; the backend's are locked).
  struct Counters {
    std::uint64_t transactions = 0, flushes = 0, examined = 0;
    double apply_ms = 0;
  };
  Counters counters() {
    return on_io([&] {
      const auto t = timed_->totals();
      return Counters{t.transactions, t.flushes, gc_->volumes_examined(), t.apply_ms};
    });
  }

  json storm() {
    on_io([&] {
      gc_->start();
      return 0;
    });
    claim_all(0, opt_.volumes, 0);
    const auto before = counters();
    std::uint64_t detach0 = 0, unpub0 = 0;
    for (auto& n : nodes_) detach0 += n.agent->detaches, unpub0 += n.agent->unpublishes;

    const double cpu0 = cpu_ms();
    const auto t0 = Clock::now();
    // The storm: every allocation ends, reported in node-sized transactions, each its own
    // handler so the GC's workers interleave with the reports as they would in the process.
    std::vector<std::size_t> chunk;
    for (std::size_t i = 0; i < opt_.volumes; ++i) {
      chunk.push_back(i);
      if (chunk.size() == opt_.per_commit || i + 1 == opt_.volumes) {
        asio::post(io_, [this, c = std::move(chunk)] { end_allocations(c, 0); });
        chunk.clear();
      }
    }
    const auto deadline = t0 + std::chrono::seconds(120);
    std::size_t left = opt_.volumes;
    while (Clock::now() < deadline) {
      left = claimed_volumes();
      if (left == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double total = bench::ms_since(t0);
    const double cpu = cpu_ms() - cpu0;
    std::uint64_t detaches = 0, unpubs = 0;
    for (auto& n : nodes_) detaches += n.agent->detaches, unpubs += n.agent->unpublishes;
    // The storm's tail: watchers woken by the last flush still examine what it changed. Counted
    // here (it is the storm's work), not in the single releases that follow.
    quiesce();
    const auto after = counters();
    const auto examined = after.examined - before.examined;
    json out = {{"backend", opt_.etcd.empty() ? "sqlite" : "etcd"},
                {"volumes", opt_.volumes},
                {"nodes", opt_.nodes},
                {"left_claimed", left},
                {"seconds", total / 1000.0},
                {"per_volume_us", total * 1000.0 / static_cast<double>(opt_.volumes)},
                // The work, whatever else the machine runs: this process's CPU (not etcd's).
                {"cpu_ms", cpu},
                {"cpu_per_volume_us", cpu * 1000.0 / static_cast<double>(opt_.volumes)},
                {"commit_ms", after.apply_ms - before.apply_ms},
                {"transactions", after.transactions - before.transactions},
                {"flushes", after.flushes - before.flushes},
                {"node_detach_rpcs", detaches - detach0},
                {"controller_unpublish_rpcs", unpubs - unpub0},
                {"volumes_examined", examined},
                {"examined_per_volume", static_cast<double>(examined) / static_cast<double>(opt_.volumes)}};
    return out;
  }

  // One allocation ends at a time, against a background of every other (idle) volume; the time
  // from that commit to the claim being freed.
  json singles() {
    std::vector<double> lat;
    const auto examined0 = counters().examined;
    const std::size_t stride = std::max<std::size_t>(1, opt_.volumes / static_cast<std::size_t>(opt_.singles));
    for (int k = 0; k < opt_.singles; ++k) {
      const std::size_t i = (static_cast<std::size_t>(k) * stride) % opt_.volumes;
      claim_all(i, i + 1, 1 + k);
      const auto t0 = Clock::now();
      on_io([&] {
        end_allocations({i}, 1 + k);
        return 0;
      });
      const auto deadline = t0 + std::chrono::seconds(10);
      while (Clock::now() < deadline) {
        bool freed = on_io([&] {
          return store_->volume(vol_id(i))->claims.empty() && store_->durable_index() >= store_->index();
        });
        if (freed) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      lat.push_back(bench::ms_since(t0));
    }
    const auto examined = counters().examined - examined0;
    return {{"releases", opt_.singles},
            {"p50_ms", bench::percentile(lat, 50)},
            {"p99_ms", bench::percentile(lat, 99)},
            {"examined_per_release", static_cast<double>(examined) / opt_.singles}};
  }

 private:
  Options opt_;
  fs::path dir_;
  std::vector<SimNode> nodes_;
  std::unique_ptr<StateBackend> backend_;
  std::unique_ptr<TimedBackend> timed_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{asio::make_work_guard(io_)};
  std::thread thread_;
  std::unique_ptr<ChangeFeed> feed_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<agentclient::AgentRouter> router_;
  std::unique_ptr<gc::RouterReleaseCalls> release_calls_;
  std::unique_ptr<gc::ClaimGc> gc_;
};

json run_one(const Options& o, const fs::path& root) {
  fs::path dir = root / ("gc-" + std::to_string(o.volumes));
  fs::remove_all(dir);
  json out;
  {
    Harness h(o, dir);
    h.populate();
    out = h.storm();
    out["single_release"] = h.singles();
  }
  fs::remove_all(dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes;
  Options base;
  fs::path root;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--volumes") sizes.push_back(std::stoul(next()));
    else if (a == "--nodes") base.nodes = std::stoi(next());
    else if (a == "--dir") root = next();
    else if (a == "--singles") base.singles = std::stoi(next());
    else if (a == "--etcd") base.etcd = next();
    else {
      std::cerr << "usage: mooring-bench-gc --dir DIR [--volumes N]... [--nodes K] [--singles S] [--etcd etcd://H:P,...]\n";
      return 2;
    }
  }
  if (root.empty()) {
    std::cerr << "--dir is required\n";
    return 2;
  }
  if (sizes.empty()) sizes = {1000, 10000};
  // As the binary runs (info); the caller sends stderr to a file.
  log::configure(log::Level::info, log::Format::text);
  json runs = json::array();
  for (auto n : sizes) {
    Options o = base;
    o.volumes = n;
    runs.push_back(run_one(o, root));
  }
  std::cout << json{{"runs", runs}}.dump() << std::endl;
  return 0;
}
