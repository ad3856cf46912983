// mooring-controlplane: wiring only — flags, logging, the state store, the REST API on Beast,
// and a graceful stop on SIGINT/SIGTERM.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/agentapi/agent_service.hpp"
#include "services/controlplane/api/api.hpp"
#include "services/controlplane/http/query.hpp"
#include "services/controlplane/http/server.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/state/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/task_group.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/server.hpp"

namespace asio = boost::asio;
using namespace mooring;
using namespace mooring::controlplane;

namespace {

constexpr const char* kUsage = R"(usage: mooring-controlplane --data-dir DIR [options]

  --data-dir DIR            where the state lives (SQLite, created 0700/0600); required
  --http-addr HOST:PORT     REST API listen address (default 127.0.0.1:4700; port 0 = any)
  --grpc-addr HOST:PORT     node agent RPC listen address (default 127.0.0.1:4701; port 0 = any)
  --heartbeat-ttl DURATION  a node silent this long is marked down (default 10s)
  --log-level LEVEL         debug|info|warn|error (default info)
  --log-format FORMAT       text|json (default text)
  --cors-read-origin ORIGIN browser origin allowed to read the API (repeatable; default "*")
  --cors-write-origin ORIGIN browser origin allowed to write (repeatable; default none)
  --shutdown-grace DURATION time in-flight requests get on SIGTERM (default 10s)
  --help                    this text
)";

struct Flags {
  std::string data_dir;
  std::string http_addr = "127.0.0.1:4700";
  std::string grpc_addr = "127.0.0.1:4701";
  log::Level level = log::Level::info;
  log::Format format = log::Format::text;
  std::vector<std::string> read_origins;
  std::vector<std::string> write_origins;
  std::chrono::milliseconds grace{10'000};
  std::chrono::milliseconds heartbeat_ttl{10'000};
};

bool split_host_port(const std::string& addr, std::string& host, std::uint16_t& port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    std::size_t used = 0;
    unsigned long p = std::stoul(addr.substr(colon + 1), &used);
    if (used != addr.size() - colon - 1 || p > 65535) return false;
    port = static_cast<std::uint16_t>(p);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// Returns 0 to continue, or the exit code.
int parse_flags(int argc, char** argv, Flags& f) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name == "--help" || name == "-h") {
      std::cout << kUsage;
      return -1;
    }
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      std::cerr << "flag " << name << " needs a value\n" << kUsage;
      return 2;
    }
    if (name == "--data-dir") f.data_dir = value;
    else if (name == "--http-addr") f.http_addr = value;
    else if (name == "--grpc-addr") f.grpc_addr = value;
    else if (name == "--cors-read-origin") f.read_origins.push_back(value);
    else if (name == "--cors-write-origin") f.write_origins.push_back(value);
    else if (name == "--log-level") {
      if (!log::parse_level(value, f.level)) {
        std::cerr << "--log-level: expected debug|info|warn|error, got \"" << value << "\"\n";
        return 2;
      }
    } else if (name == "--log-format") {
      if (!log::parse_format(value, f.format)) {
        std::cerr << "--log-format: expected text|json, got \"" << value << "\"\n";
        return 2;
      }
    } else if (name == "--shutdown-grace") {
      auto d = http::parse_duration(value);
      if (!d) {
        std::cerr << "--shutdown-grace: expected a duration like 10s, got \"" << value << "\"\n";
        return 2;
      }
      f.grace = *d;
    } else if (name == "--heartbeat-ttl") {
      auto d = http::parse_duration(value);
      if (!d || d->count() <= 0) {
        std::cerr << "--heartbeat-ttl: expected a positive duration like 10s, got \"" << value << "\"\n";
        return 2;
      }
      f.heartbeat_ttl = *d;
    } else {
      std::cerr << "unknown flag " << name << "\n" << kUsage;
      return 2;
    }
  }
  if (f.data_dir.empty()) {
    std::cerr << "--data-dir is required\n" << kUsage;
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (int rc = parse_flags(argc, argv, flags); rc != 0) return rc < 0 ? 0 : rc;
  log::configure(flags.level, flags.format);
  log::Logger logger{"controlplane"};

  http::ServerConfig http_config;
  std::string grpc_host;
  std::uint16_t grpc_port = 0;
  if (!split_host_port(flags.http_addr, http_config.address, http_config.port)) {
    std::cerr << "--http-addr: expected HOST:PORT, got \"" << flags.http_addr << "\"\n";
    return 2;
  }
  if (!split_host_port(flags.grpc_addr, grpc_host, grpc_port)) {
    std::cerr << "--grpc-addr: expected HOST:PORT, got \"" << flags.grpc_addr << "\"\n";
    return 2;
  }

  auto backend = SqliteBackend::open(flags.data_dir);
  if (!backend) {
    logger.error("cannot open state", {{"error", backend.error()}});
    return 1;
  }
  asio::io_context io{1};
  StateStore store{io.get_executor(), **backend};
  if (auto st = store.load(); !st) {
    logger.error("cannot load state", {{"path", (*backend)->path().string()}, {"error", st.error()}});
    return 1;
  }
  logger.info("state loaded", {{"path", (*backend)->path().string()},
                               {"index", store.index()},
                               {"volumes", store.volumes().size()},
                               {"allocations", store.allocations().size()}});

  api::ApiOptions api_options;
  if (!flags.read_origins.empty()) api_options.cors.read_origins = flags.read_origins;
  api_options.cors.write_origins = flags.write_origins;
  api::Api api{store, api_options};
  http::Server server{io.get_executor(), http_config, [&api](http::Request r) { return api.handle(std::move(r)); }};
  if (auto ec = server.listen()) {
    logger.error("cannot listen", {{"addr", flags.http_addr}, {"error", ec.message()}});
    return 1;
  }
  server.start();

  // Node agents' RPC service and node liveness.
  NodeLiveness liveness{store, LivenessOptions{.ttl = flags.heartbeat_ttl}};
  AgentService agent_service{io.get_executor(), store, liveness, nullptr};
  std::string grpc_error;
  auto grpc_server = rpc::Server::start(
      rpc::ServerOptions{.address = grpc_host + ":" + std::to_string(grpc_port), .services = {agent_service.service()}},
      grpc_error);
  if (!grpc_server) {
    logger.error("cannot listen", {{"addr", flags.grpc_addr}, {"error", grpc_error}});
    return 1;
  }
  logger.info("grpc api listening", {{"addr", grpc_host}, {"port", grpc_server->port()},
                                     {"heartbeat_ttl", flags.heartbeat_ttl}});
  async::TaskGroup node_tasks{io.get_executor(), "nodes"};
  node_tasks.spawn("liveness", [&liveness] { return liveness.run(); });
  // The line scripts and tests wait for; it carries the bound port (useful with port 0).
  logger.info("http api listening", {{"addr", http_config.address}, {"port", server.port()},
                                     {"grpc_addr", flags.grpc_addr}});

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    logger.info("shutting down", {{"signal", signo}, {"grace", flags.grace}});
    store.release_waiters();  // blocking queries answer now instead of holding the shutdown
    node_tasks.cancel();
    asio::co_spawn(io, grpc_server->shutdown(flags.grace), [&](std::exception_ptr e) {
      if (e) logger.error("grpc shutdown failed");
    });
    asio::co_spawn(io, server.shutdown(flags.grace), [&](std::exception_ptr e) {
      if (e) logger.error("http shutdown failed");
      logger.info("stopped", {{"index", store.index()}});
    });
  });
  io.run();
  return 0;
}
