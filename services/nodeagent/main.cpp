// mooring-nodeagent: wiring only. Parses the configuration, resolves the node id, runs the agent
// on one io_context thread and shuts it down gracefully on SIGTERM/SIGINT.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "services/nodeagent/agent.hpp"
#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/config/node_identity.hpp"
#include "shared/config/settings.hpp"
#include "shared/durable/instance_lock.hpp"
#include "shared/log/log.hpp"

namespace {

namespace asio = boost::asio;
using namespace mooring;

asio::awaitable<void> run_agent(nodeagent::Agent& agent) {
  asio::signal_set signals(co_await asio::this_coro::executor, SIGTERM, SIGINT);
  agent.start();
  const int sig = co_await signals.async_wait(asio::use_awaitable);
  log::Logger("main").info("signal received; shutting down", {{"signal", sig}});
  co_await agent.shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto parsed = nodeagent::parse_agent_config(args, config::environment("MOORING_"));
  if (auto* err = std::get_if<nodeagent::ConfigError>(&parsed)) {
    std::cerr << "mooring-nodeagent: " << err->message << "\n";
    return 2;
  }
  auto& p = std::get<nodeagent::ParsedArgs>(parsed);
  if (p.help) {
    std::cout << nodeagent::agent_config_help();
    return 0;
  }
  auto& cfg = p.config;
  log::Level level{};
  log::Format format{};
  log::parse_level(cfg.log_level, level);
  log::parse_format(cfg.log_format, format);
  log::configure(level, format);
  log::Logger log{"main"};

  // Plugin processes must not kill the agent by closing a pipe on it.
  std::signal(SIGPIPE, SIG_IGN);

  // One agent per data dir: a second one would re-adopt the same tasks, launch the same plugins
  // and answer for the same node. Held until the process ends (the kernel drops it on kill -9).
  auto lock = durable::InstanceLock::acquire(std::filesystem::path(cfg.data_dir) / "lock",
                                             "a node agent of data dir " + cfg.data_dir);
  if (!lock) {
    log.error("refusing to start", {{"error", lock.error()}});
    std::cerr << "mooring-nodeagent: " << lock.error() << "\n";
    return 1;
  }

  if (cfg.node_id.empty()) {
    std::error_code ec;
    cfg.node_id = nodeagent::load_or_create_node_id(cfg.data_dir, ec);
    if (ec) {
      log.error("cannot read or create the node id", {{"data_dir", cfg.data_dir}, {"error", ec.message()}});
      return 1;
    }
  }
  if (cfg.node_name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    cfg.node_name = host;
  }
  log.info("starting mooring-nodeagent", {{"node_id", cfg.node_id},
                                          {"node_name", cfg.node_name},
                                          {"data_dir", cfg.data_dir},
                                          {"controlplane", cfg.controlplane_addr},
                                          {"plugins", static_cast<int64_t>(cfg.plugins.size())}});

  asio::io_context io;
  int rc = 0;
  {
    nodeagent::Agent agent(io.get_executor(), cfg);
    asio::co_spawn(io, run_agent(agent), [&](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log.error("agent failed", {{"error", ex.what()}});
      }
      rc = 1;
    });
    io.run();
  }
  log.info("stopped");
  return rc;
}
