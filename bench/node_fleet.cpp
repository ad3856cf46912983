// Bench: a fleet of simulated node agents on one control plane (issue 46). Each node has its own
// gRPC channel (its own TCP connection) with mutual TLS and its own node certificate, registers
// with one node-only plugin, heartbeats as the agent does (every --heartbeat-ms, the agent's
// default 5 s, or a third of the TTL the control plane answers when that is shorter, or the
// slower pace it asks of a large fleet) and
// always holds a WatchAllocations long poll open (--watch-wait, the agent's default 30 s), as
// mooring-nodeagent does. Calls go through gRPC's callback API: a few gRPC threads serve every
// node, and one scheduler thread sends heartbeats as they fall due.
//
// Certificates: `mooring tls cert create -agent` is a process, a key file and a certificate file
// per node; here they are made in process with the same library (shared/tls, ECDSA P-256, signed
// with the CA's key from --tls-dir), on every core, and never written.
//
// Protocol with the driver (bench/run_bench.py), one JSON line per answer on stdout:
//   start: the first N - --burst nodes register (--concurrency at a time) and start heartbeating
//          and watching; prints {"ready":true,...}. Then one command per line on stdin:
//   burst    the last --burst nodes register all at once; prints the time until the last answered
//   stats    heartbeat round trips since the last `stats` (p50/p99/max, errors), watches open
//   silence K  K nodes spread over the fleet stop (heartbeats and watches); prints each one's id and the
//            CLOCK_MONOTONIC time its last heartbeat was answered
//   quit     stops everything; prints the totals
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/args.hpp"
#include "bench/sim_fingerprint.hpp"
#include "bench/stats.hpp"
#include "mooring/v1/controlplane.grpc.pb.h"
#include "shared/process/process_hygiene.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/certificates.hpp"

namespace {

using mooring::bench::Clock;
using mooring::bench::ms_since;
namespace v1 = mooring::v1;
namespace bench = mooring::bench;
namespace tls = mooring::tls;
using json = nlohmann::json;

struct Options {
  std::string controlplane, tls_dir, plugin = "sim", prefix = "fleet";
  int nodes = 1000, burst = 0, concurrency = 500;
  std::chrono::milliseconds heartbeat{5000}, watch_wait{30000};
};

// A sample of latencies (ms) shared by gRPC's threads.
class Sample {
 public:
  void add(double ms) {
    std::lock_guard lock(mutex_);
    values_.push_back(ms);
  }
  std::vector<double> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(values_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<double> values_;
};

json summary(std::vector<double> v) {
  const double max = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  return {{"count", v.size()},
          {"p50_ms", mooring::bench::percentile(v, 50)},
          {"p99_ms", mooring::bench::percentile(v, 99)},
          {"max_ms", max}};
}

double monotonic_s(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// One callback call's state: gRPC holds pointers to all three until the callback has run.
template <class Request, class Response>
struct Call {
  grpc::ClientContext ctx;
  Request req;
  Response resp;
  Clock::time_point start = Clock::now();
};

struct SimNode {
  std::string id;
  std::unique_ptr<v1::ControlPlane::Stub> stub;
  std::atomic<bool> silent{false};
  std::atomic<bool> heartbeat_in_flight{false};
  std::atomic<std::int64_t> last_answer_ns{0};   // steady clock
  std::atomic<std::int64_t> ttl_ms{0};           // the TTL of the control plane's last answer (0: none yet)
  std::atomic<std::int64_t> min_interval_ms{0};  // and its pace for a large fleet (0: none)
  std::mutex watch_mutex;
  grpc::ClientContext* watch_ctx = nullptr;  // the open long poll, for TryCancel
  std::uint64_t watch_index = 0, incarnation = 0;
};

class Fleet {
 public:
  explicit Fleet(Options o) : o_(std::move(o)) {}

  // Certificates and channels for every node, made on every core.
  double make_nodes() {
    const auto t0 = Clock::now();
    nodes_.resize(static_cast<std::size_t>(o_.nodes));
    std::shared_ptr<tls::KeyPair> ca;
    std::string ca_pem;
    if (!o_.tls_dir.empty()) {
      auto pair = tls::read_pair(tls::ca_paths(o_.tls_dir));
      if (!pair) throw std::runtime_error("CA: " + pair.error());
      ca = std::make_shared<tls::KeyPair>(*pair);
    }
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    std::mutex error_mutex;
    std::string error;
    for (unsigned t = 0; t < cores; ++t) {
      threads.emplace_back([&] {
        for (int i; (i = next++) < o_.nodes;) {
          auto node = std::make_unique<SimNode>();
          node->id = o_.prefix + "-" + std::to_string(i);
          std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
          if (ca) {
            // Assigned, not a designated initializer: GCC 12 at -O3 warns (wrongly) of an
            // uninitialized string in the aggregate temporary.
            tls::CertRequest request;
            request.identity.role = tls::Role::agent;
            request.identity.node_id = node->id;
            auto cert = tls::create_certificate(*ca, request);
            if (!cert) {
              std::lock_guard lock(error_mutex);
              error = cert.error();
              return;
            }
            grpc::SslCredentialsOptions ssl;
            ssl.pem_root_certs = ca->cert_pem;
            ssl.pem_cert_chain = cert->cert_pem;
            ssl.pem_private_key = cert->key_pem;
            creds = grpc::SslCredentials(ssl);
          }
          grpc::ChannelArguments args;
          args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per node, as separate agents have
          args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);      // the agent's (shared/rpc/channel.hpp)
          args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
          node->stub = v1::ControlPlane::NewStub(grpc::CreateCustomChannel(o_.controlplane, creds, args));
          nodes_[static_cast<std::size_t>(i)] = std::move(node);
        }
      });
    }
    for (auto& t : threads) t.join();
    if (!error.empty()) throw std::runtime_error("certificate: " + error);
    return ms_since(t0) / 1000;
  }

  // Registers nodes [from, to), `in_flight` at a time; returns the time until the last answered.
  json register_nodes(int from, int to, int in_flight) {
    const auto t0 = Clock::now();
    std::mutex m;
    std::condition_variable cv;
    int outstanding = 0, failed = 0;
    std::string first_error;
    Sample latency;
    for (int i = from; i < to; ++i) {
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return outstanding < in_flight; });
        ++outstanding;
      }
      auto& node = *nodes_[static_cast<std::size_t>(i)];
      auto* call = new Call<v1::RegisterNodeRequest, v1::RegisterNodeResponse>;
      call->req.set_node_id(node.id);
      call->req.set_name(node.id);
      call->req.set_address("127.0.0.1:1");  // nothing is called back: the plugin has no controller
      call->req.set_agent_version("bench");
      *call->req.add_plugins() = bench::sim_fingerprint(o_.plugin, node.id);
      call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
      call->ctx.set_wait_for_ready(true);
      node.stub->async()->RegisterNode(&call->ctx, &call->req, &call->resp, [&, call, i, n = &node](grpc::Status st) {
        latency.add(ms_since(call->start));
        if (st.ok()) {
          // As the agent does: its heartbeats and its watch start once it is registered.
          n->last_answer_ns = Clock::now().time_since_epoch().count();
          n->ttl_ms = call->resp.heartbeat_ttl_ms();
          n->min_interval_ms = call->resp.heartbeat_min_interval_ms();
          start_watch(*n, i);
          schedule(i, Clock::now() + interval(*n));
        }
        std::lock_guard lock(m);
        if (!st.ok()) {
          ++failed;
          if (first_error.empty())
            first_error = n->id + ": " + std::to_string(st.error_code()) + " " + st.error_message();
        }
        --outstanding;
        cv.notify_all();
        delete call;
      });
    }
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return outstanding == 0; });
    const double seconds = ms_since(t0) / 1000;
    lock.unlock();
    return {{"nodes", to - from}, {"in_flight", in_flight}, {"seconds", seconds},
            {"failed", failed},   {"error", first_error},   {"latency", summary(latency.take())}};
  }

  json stats() {
    json out = summary(heartbeats_.take());
    out["errors"] = heartbeat_errors_.exchange(0);
    out["first_error"] = take_error();
    out["watches_open"] = watches_open_.load();
    out["watch_answers"] = watch_answers_.exchange(0);
    out["watch_errors"] = watch_errors_.exchange(0);
    if (!nodes_.empty() && nodes_.front()) {  // the pace the control plane asks of the fleet now
      out["ttl_ms"] = nodes_.front()->ttl_ms.load();
      out["interval_ms"] = interval(*nodes_.front()).count();
    }
    return out;
  }

  json silence(int k) {
    // Spread over the fleet, so their last heartbeats fall anywhere in the interval.
    std::vector<SimNode*> quiet;
    const int step = std::max(1, o_.nodes / std::max(1, k));
    for (int i = 0; i < k && i * step < o_.nodes; ++i)
      quiet.push_back(nodes_[static_cast<std::size_t>(i * step)].get());
    for (auto* n : quiet) {
      n->silent = true;
      std::lock_guard lock(n->watch_mutex);
      if (n->watch_ctx) n->watch_ctx->TryCancel();  // a silent agent's connection is gone
    }
    // A heartbeat already sent may still be answered: wait for those.
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < until &&
           std::any_of(quiet.begin(), quiet.end(), [](SimNode* n) { return n->heartbeat_in_flight.load(); }))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    json last = json::object();
    std::int64_t ttl_ms = 0;  // the longest TTL the control plane told them: their deadline
    for (auto* n : quiet) {
      last[n->id] = monotonic_s(Clock::time_point(Clock::duration(n->last_answer_ns.load())));
      ttl_ms = std::max(ttl_ms, n->ttl_ms.load());
    }
    return {{"silenced", quiet.size()}, {"last_answered_monotonic_s", last}, {"ttl_ms", ttl_ms}};
  }

  void stop() {
    {
      std::lock_guard lock(schedule_mutex_);
      stopping_ = true;
    }
    schedule_cv_.notify_all();
    if (scheduler_.joinable()) scheduler_.join();
    for (auto& n : nodes_) {
      if (!n) continue;
      n->silent = true;
      std::lock_guard lock(n->watch_mutex);
      if (n->watch_ctx) n->watch_ctx->TryCancel();
    }
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until && (watches_open_ > 0 || heartbeats_open_ > 0))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  void start_scheduler() {
    scheduler_ = std::thread([this] { run_scheduler(); });
  }

 private:
  struct Due {
    Clock::time_point at;
    int node;
    bool watch = false;  // a watch to open again after a failed one, not a heartbeat
    bool operator>(const Due& o) const { return at > o.at; }
  };

  // The agent's pace (ControlPlaneLink::run): its own interval, or a third of the TTL the control
  // plane answered when that is shorter, but never more often than the control plane asked.
  std::chrono::milliseconds interval(const SimNode& node) const {
    const std::chrono::milliseconds ttl{node.ttl_ms.load()};
    const auto own = ttl.count() > 0 ? std::min(o_.heartbeat, ttl / 3) : o_.heartbeat;
    return std::max(own, std::chrono::milliseconds(node.min_interval_ms.load()));
  }

  // A heartbeat of `node` due at `at`, or (watch) its watch to open again then.
  void schedule(int node, Clock::time_point at, bool watch = false) {
    {
      std::lock_guard lock(schedule_mutex_);
      due_.push({at, node, watch});
    }
    schedule_cv_.notify_all();
  }

  void run_scheduler() {
    std::unique_lock lock(schedule_mutex_);
    while (!stopping_) {
      if (due_.empty()) {
        schedule_cv_.wait(lock);
        continue;
      }
      const auto next = due_.top();
      if (schedule_cv_.wait_until(lock, next.at) == std::cv_status::no_timeout) continue;  // a stop or new nodes
      if (due_.empty() || due_.top().at > Clock::now()) continue;
      due_.pop();
      auto& node = *nodes_[static_cast<std::size_t>(next.node)];
      if (!next.watch) due_.push({next.at + interval(node), next.node});
      lock.unlock();
      if (next.watch)
        start_watch(node, next.node);
      else if (!node.silent && !node.heartbeat_in_flight.exchange(true))
        send_heartbeat(node);  // the agent sends its next heartbeat only after the last one answered
      lock.lock();
    }
  }

  void send_heartbeat(SimNode& node) {
    auto* call = new Call<v1::HeartbeatRequest, v1::HeartbeatResponse>;
    call->req.set_node_id(node.id);
    *call->req.add_plugins() = bench::sim_fingerprint(o_.plugin, node.id);
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ++heartbeats_open_;
    node.stub->async()->Heartbeat(&call->ctx, &call->req, &call->resp, [this, call, &node](grpc::Status st) {
      if (st.ok() && call->resp.known()) {
        heartbeats_.add(ms_since(call->start));
        node.last_answer_ns = Clock::now().time_since_epoch().count();
        node.ttl_ms = call->resp.heartbeat_ttl_ms();
        node.min_interval_ms = call->resp.heartbeat_min_interval_ms();
      } else {
        ++heartbeat_errors_;
        note_error(node.id + " heartbeat: " +
                   (st.ok() ? std::string("known=false") : std::to_string(st.error_code()) + " " + st.error_message()));
      }
      node.heartbeat_in_flight = false;
      --heartbeats_open_;
      delete call;
    });
  }

  void start_watch(SimNode& node, int i) {
    auto* call = new Call<v1::WatchAllocationsRequest, v1::WatchAllocationsResponse>;
    {
      // Not held while the call starts: its callback takes the lock.
      std::lock_guard lock(node.watch_mutex);
      if (node.silent) {
        delete call;
        return;
      }
      call->req.set_min_index(node.watch_index);
      call->req.set_incarnation(node.incarnation);
      node.watch_ctx = &call->ctx;  // silence() cancels it
    }
    call->req.set_node_id(node.id);
    call->req.set_wait_ms(o_.watch_wait.count());
    call->ctx.set_deadline(std::chrono::system_clock::now() + o_.watch_wait + std::chrono::seconds(10));
    ++watches_open_;
    node.stub->async()->WatchAllocations(&call->ctx, &call->req, &call->resp, [this, call, &node, i](grpc::Status st) {
      {
        std::lock_guard lock(node.watch_mutex);
        node.watch_ctx = nullptr;
        if (st.ok()) {
          node.watch_index = call->resp.index();
          node.incarnation = call->resp.incarnation();
        }
      }
      --watches_open_;
      delete call;
      if (st.ok()) {
        ++watch_answers_;
        start_watch(node, i);
      } else if (!node.silent) {
        // As the agent backs off: the scheduler opens it again in a second, not a gRPC thread.
        ++watch_errors_;
        note_error(node.id + " watch: " + std::to_string(st.error_code()) + " " + st.error_message());
        schedule(i, Clock::now() + std::chrono::seconds(1), true);
      }
    });
  }

  void note_error(std::string e) {
    std::lock_guard lock(error_mutex_);
    if (first_error_.empty()) first_error_ = std::move(e);
  }
  std::string take_error() {
    std::lock_guard lock(error_mutex_);
    return std::exchange(first_error_, {});
  }

  Options o_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  Sample heartbeats_;
  std::atomic<long> heartbeat_errors_{0}, watch_answers_{0}, watch_errors_{0};
  std::atomic<long> watches_open_{0}, heartbeats_open_{0};
  std::mutex error_mutex_;
  std::string first_error_;
  std::mutex schedule_mutex_;
  std::condition_variable schedule_cv_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  bool stopping_ = false;
  std::thread scheduler_;
};

// Two descriptors per node at most (its connection, and gRPC's wakeup fds are shared).
void raise_open_files(int nodes) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t want = static_cast<rlim_t>(nodes) * 2 + 1024;
  if (r.rlim_cur >= want) return;
  r.rlim_cur = want;
  if (r.rlim_max < want) r.rlim_max = want;  // root here (the bench runs as root)
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0) std::cerr << "cannot raise RLIMIT_NOFILE to " << want << "\n";
}

void say(const json& j) { std::cout << j.dump() << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  // As in the services: the fleet's thousands of channels take gRPC's locks all the time.
  mooring::process::skip_mutex_deadlock_detection();
  Options o;
  auto a = mooring::bench::flag_pairs(argc, argv);
  o.controlplane = a["--controlplane"];
  o.tls_dir = a["--tls-dir"];
  if (a.count("--plugin")) o.plugin = a["--plugin"];
  if (a.count("--prefix")) o.prefix = a["--prefix"];
  if (a.count("--nodes")) o.nodes = std::stoi(a["--nodes"]);
  if (a.count("--burst")) o.burst = std::stoi(a["--burst"]);
  if (a.count("--concurrency")) o.concurrency = std::stoi(a["--concurrency"]);
  if (a.count("--heartbeat-ms")) o.heartbeat = std::chrono::milliseconds(std::stol(a["--heartbeat-ms"]));
  if (a.count("--watch-wait-ms")) o.watch_wait = std::chrono::milliseconds(std::stol(a["--watch-wait-ms"]));
  if (o.controlplane.empty() || o.nodes < 1 || o.burst < 0 || o.burst > o.nodes || o.concurrency < 1) {
    std::cerr << "usage: mooring-bench-nodes --controlplane HOST:PORT [--tls-dir DIR] [--nodes N] [--burst B] "
                 "[--concurrency C] [--heartbeat-ms MS] [--watch-wait-ms MS] [--plugin ID] [--prefix P]\n";
    return 2;
  }
  raise_open_files(o.nodes);
  Fleet fleet(o);
  try {
    const double certs = fleet.make_nodes();
    fleet.start_scheduler();
    auto first = fleet.register_nodes(0, o.nodes - o.burst, o.concurrency);
    say({{"ready", true}, {"certificates_seconds", certs}, {"register", first}});
    for (std::string line; std::getline(std::cin, line);) {
      if (line == "burst") {
        say(fleet.register_nodes(o.nodes - o.burst, o.nodes, std::max(1, o.burst)));
      } else if (line == "stats") {
        say(fleet.stats());
      } else if (line.rfind("silence ", 0) == 0) {
        say(fleet.silence(std::stoi(line.substr(8))));
      } else if (line == "quit") {
        break;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "mooring-bench-nodes: " << e.what() << "\n";
    fleet.stop();
    return 1;
  }
  fleet.stop();
  say({{"done", true}});
  return 0;
}
