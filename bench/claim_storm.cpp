// Bench: the new-claim storm (issue 22). Simulated node agents call the real control plane
// process's agent gRPC service (ControlPlane.RegisterNode / Heartbeat / ClaimVolume) as node
// agents do, each over its own channel: mutual TLS with its own node certificate (`--tls-dir`
// holding ca.pem and agent-<node>.pem from `mooring tls`), or plaintext against an --insecure
// control plane. The nodes fingerprint one node-only plugin, so a claim is the control plane's
// whole claim path (checks, the durable intent, the grant) without a ControllerPublish.
//
// Protocol with the driver (bench/run_bench.py): registers --nodes nodes sim-0..K-1 and keeps
// them heartbeating, prints {"ready":true}, then waits for a line on stdin; meanwhile the driver
// registers the volumes and submits one allocation per volume on node sim-(i % K). On that line,
// --claims ClaimVolume calls (volume cv-<i>, allocation named by the driver's "alloc_ids" file,
// one id per line) go out, --concurrency at a time; the time until the last one answered OK,
// per-claim latency and the refusals are printed as one JSON line.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/args.hpp"
#include "bench/sim_fingerprint.hpp"
#include "bench/stats.hpp"
#include "mooring/v1/controlplane.grpc.pb.h"

namespace {

using mooring::bench::Clock;
using mooring::bench::ms_since;
namespace v1 = mooring::v1;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string node_id(int i) { return "sim-" + std::to_string(i); }

std::string volume_id(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "cv-%06zu", i);
  return buf;
}

struct Options {
  std::string controlplane, tls_dir, plugin = "sim", alloc_file;
  int nodes = 10, concurrency = 16;
  std::size_t claims = 10000;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto a = mooring::bench::flag_pairs(argc, argv);
  o.controlplane = a["--controlplane"];
  o.tls_dir = a["--tls-dir"];
  o.alloc_file = a["--alloc-file"];
  if (a.count("--plugin")) o.plugin = a["--plugin"];
  if (a.count("--nodes")) o.nodes = std::stoi(a["--nodes"]);
  if (a.count("--concurrency")) o.concurrency = std::stoi(a["--concurrency"]);
  if (a.count("--claims")) o.claims = std::stoul(a["--claims"]);
  if (o.controlplane.empty() || o.alloc_file.empty() || o.nodes < 1 || o.concurrency < 1) {
    std::cerr << "usage: mooring-bench-claims --controlplane HOST:PORT --alloc-file F [--tls-dir DIR] [--nodes K] "
                 "[--claims N] [--concurrency C] [--plugin ID]\n";
    return 2;
  }

  // One channel per node: with TLS each presents its own node's certificate.
  std::vector<std::unique_ptr<v1::ControlPlane::Stub>> stubs;
  for (int i = 0; i < o.nodes; ++i) {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!o.tls_dir.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = read_all(o.tls_dir + "/ca.pem");
      ssl.pem_cert_chain = read_all(o.tls_dir + "/agent-" + node_id(i) + ".pem");
      ssl.pem_private_key = read_all(o.tls_dir + "/agent-" + node_id(i) + "-key.pem");
      creds = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per node, as separate agents have
    stubs.push_back(v1::ControlPlane::NewStub(grpc::CreateCustomChannel(o.controlplane, creds, args)));
  }
  auto deadline = [](grpc::ClientContext& ctx, std::chrono::seconds s) {
    ctx.set_deadline(std::chrono::system_clock::now() + s);
  };
  for (int i = 0; i < o.nodes; ++i) {
    v1::RegisterNodeRequest req;
    req.set_node_id(node_id(i));
    req.set_name(node_id(i));
    req.set_address("127.0.0.1:1");  // nothing is called back: the plugin has no controller
    req.set_agent_version("bench");
    *req.add_plugins() = mooring::bench::sim_fingerprint(o.plugin, node_id(i));
    v1::RegisterNodeResponse resp;
    grpc::ClientContext ctx;
    deadline(ctx, std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    if (auto st = stubs[i]->RegisterNode(&ctx, req, &resp); !st.ok()) {
      std::cerr << "RegisterNode " << node_id(i) << ": " << st.error_code() << " " << st.error_message() << "\n";
      return 1;
    }
  }
  // Heartbeats until the end, as agents send them (every second).
  std::atomic<bool> done{false};
  std::thread heartbeats([&] {
    while (!done) {
      for (int i = 0; i < o.nodes && !done; ++i) {
        v1::HeartbeatRequest req;
        req.set_node_id(node_id(i));
        *req.add_plugins() = mooring::bench::sim_fingerprint(o.plugin, node_id(i));
        v1::HeartbeatResponse resp;
        grpc::ClientContext ctx;
        deadline(ctx, std::chrono::seconds(10));
        stubs[i]->Heartbeat(&ctx, req, &resp);
      }
      for (int k = 0; k < 10 && !done; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::cout << nlohmann::json{{"ready", true}}.dump() << std::endl;
  std::string line;
  std::getline(std::cin, line);

  std::vector<std::string> allocs;
  {
    std::ifstream in(o.alloc_file);
    for (std::string id; std::getline(in, id);)
      if (!id.empty()) allocs.push_back(id);
  }
  const std::size_t n = std::min(o.claims, allocs.size());
  std::vector<double> latency(n, 0);
  std::atomic<std::size_t> next{0}, ok{0};
  std::mutex mutex;
  std::map<std::string, long> codes;
  std::vector<std::string> errors;
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < o.concurrency; ++w) {
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < n;) {
        const int node = static_cast<int>(i % static_cast<std::size_t>(o.nodes));
        v1::ClaimVolumeRequest req;
        req.set_volume_id(volume_id(i));
        req.set_alloc_id(allocs[i]);
        req.set_node_id(node_id(node));
        req.set_mode(v1::CLAIM_MODE_WRITE);
        req.set_access_mode(v1::ACCESS_MODE_SINGLE_NODE_WRITER);
        req.set_attachment_mode(v1::ATTACHMENT_MODE_FILE_SYSTEM);
        v1::ClaimVolumeResponse resp;
        grpc::ClientContext ctx;
        deadline(ctx, std::chrono::seconds(60));
        const auto start = Clock::now();
        const auto st = stubs[node]->ClaimVolume(&ctx, req, &resp);
        latency[i] = ms_since(start);
        if (st.ok()) {
          ++ok;
          continue;
        }
        std::lock_guard lock(mutex);
        ++codes[std::to_string(st.error_code())];
        if (errors.size() < 5)
          errors.push_back(volume_id(i) + ": " + std::to_string(st.error_code()) + " " + st.error_message());
      }
    });
  }
  for (auto& t : workers) t.join();
  const double total = ms_since(t0);
  done = true;
  heartbeats.join();
  nlohmann::json out = {{"claims", n},
                        {"ok", ok.load()},
                        {"failed", n - ok.load()},
                        {"codes", codes},
                        {"errors", errors},
                        {"nodes", o.nodes},
                        {"concurrency", o.concurrency},
                        {"tls", !o.tls_dir.empty()},
                        {"seconds", total / 1000},
                        {"per_claim_us", total * 1000 / static_cast<double>(std::max<std::size_t>(1, n))},
                        {"p50_ms", mooring::bench::percentile(latency, 50)},
                        {"p99_ms", mooring::bench::percentile(latency, 99)}};
  std::cout << out.dump() << std::endl;
  return ok.load() == n ? 0 : 1;
}
