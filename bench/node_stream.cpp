// Bench: a steady stream of node calls (NodeGetVolumeStats on a mounted volume, one at a time)
// to whichever instance of a plugin the node agent's registry names, through a plugin upgrade.
// Each call goes to the socket the registry file (the agent's plugins.json, rewritten atomically
// at every registration) names at that moment, as the agent's own calls do. Counts the calls that
// were refused (any answer but OK) and the longest stall (the slowest call: one a new copy held
// until it took over). Runs until the stop file exists. Output: one JSON object on stdout.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/args.hpp"
#include "bench/stats.hpp"
#include "csi/v1/csi.grpc.pb.h"

namespace {

using mooring::bench::Clock;
using mooring::bench::ms_since;

// The node (or monolith) instance's socket for `plugin` in the registry file; "" when none.
std::string registered_socket(const std::string& registry, const std::string& plugin) {
  std::ifstream in(registry);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc["plugins"].is_array()) return {};
  for (const auto& p : doc["plugins"])
    if (p.value("kind", "") == "node" && p.value("plugin_id", "") == plugin) return p.value("socket", "");
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  auto a = mooring::bench::flag_pairs(argc, argv);
  const auto registry = a["--registry"], plugin = a["--plugin"], volume = a["--volume-id"], path = a["--volume-path"],
             stop_file = a["--stop-file"];
  if (registry.empty() || plugin.empty() || volume.empty() || path.empty() || stop_file.empty()) {
    std::cerr << "usage: mooring-bench-stream --registry plugins.json --plugin ID --volume-id ID --volume-path P "
                 "--stop-file F\n";
    return 2;
  }
  std::map<std::string, std::unique_ptr<csi::v1::Node::Stub>> stubs;  // by socket
  auto stub_for = [&](const std::string& socket) -> csi::v1::Node::Stub& {
    auto& s = stubs[socket];
    if (!s) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      s = csi::v1::Node::NewStub(
          grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args));
    }
    return *s;
  };

  std::vector<double> latencies;
  std::map<std::string, long> codes;
  std::vector<std::string> errors;
  std::string last_socket;
  long switches = 0, refused = 0;
  double slowest = 0;
  std::string slowest_socket;
  const auto t0 = Clock::now();
  while (!std::filesystem::exists(stop_file)) {
    const auto socket = registered_socket(registry, plugin);
    if (socket.empty()) {  // between a deregistration and a registration: counted as refused
      ++refused;
      ++codes["NOT_REGISTERED"];
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (!last_socket.empty() && socket != last_socket) ++switches;
    last_socket = socket;
    csi::v1::NodeGetVolumeStatsRequest req;
    req.set_volume_id(volume);
    req.set_volume_path(path);
    csi::v1::NodeGetVolumeStatsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const auto start = Clock::now();
    const auto st = stub_for(socket).NodeGetVolumeStats(&ctx, req, &resp);
    const double ms = ms_since(start);
    latencies.push_back(ms);
    if (ms > slowest) {
      slowest = ms;
      slowest_socket = socket;
    }
    if (!st.ok()) {
      ++refused;
      if (errors.size() < 5) errors.push_back(std::to_string(st.error_code()) + " " + st.error_message());
    }
    ++codes[st.ok() ? "OK" : std::to_string(st.error_code())];
  }
  nlohmann::json out = {{"calls", latencies.size()},
                        {"seconds", ms_since(t0) / 1000},
                        {"refused", refused},
                        {"codes", codes},
                        {"errors", errors},
                        {"switches", switches},
                        {"max_ms", slowest},
                        {"max_socket", slowest_socket},
                        {"p50_ms", mooring::bench::percentile(latencies, 50)},
                        {"p99_ms", mooring::bench::percentile(latencies, 99)}};
  std::cout << out.dump() << std::endl;
  return 0;
}
