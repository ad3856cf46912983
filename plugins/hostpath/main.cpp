// mooring-hostpath: wiring only. Parses flags, opens the data dir, builds the Identity,
// Controller and Node services for the chosen mode and serves them on the CSI socket until
// SIGTERM/SIGINT.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "plugins/hostpath/call_gate.hpp"
#include "plugins/hostpath/call_log.hpp"
#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/csi_server.hpp"
#include "plugins/hostpath/fault_injector.hpp"
#include "plugins/hostpath/identity.hpp"
#include "plugins/hostpath/mount_table.hpp"
#include "plugins/hostpath/node.hpp"
#include "plugins/hostpath/node_state.hpp"
#include "plugins/hostpath/options.hpp"
#include "plugins/hostpath/takeover.hpp"
#include "plugins/hostpath/volume_store.hpp"
#include "shared/log/log.hpp"
#include "shared/process/process_hygiene.hpp"

extern char** environ;

namespace mooring::hostpath {
namespace {

const log::Logger kLog{"hostpath"};

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    if (const auto eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// A socket left by a crashed predecessor would make bind fail; anything else at that path is
// not ours to delete.
std::string remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  if (!S_ISSOCK(st.st_mode)) return path + " exists and is not a socket; refusing to replace it";
  if (::unlink(path.c_str()) != 0) return "cannot remove stale socket " + path;
  kLog.info("removed stale socket", {{"path", path}});
  return {};
}

namespace fs = std::filesystem;

// One copy per service and node touches the state: two node services for one node would both
// mount and record the same paths. A copy that finds the lock held (the new copy of a rolling
// upgrade, started beside the old one) takes over when the old one exits; until then it serves
// what needs no state and holds the rest (takeover.hpp).
std::vector<Takeover::Lock> service_locks(const Options& o, bool serve_node, bool serve_controller) {
  std::vector<Takeover::Lock> locks;
  for (const auto* service : {serve_node ? "node" : nullptr, serve_controller ? "controller" : nullptr}) {
    if (!service) continue;
    locks.push_back(
        {fs::path(o.data_dir) / "locks" / (std::string(service) + "-" + o.node_id + ".lock"),
         "a hostpath " + std::string(service) + " service for node \"" + o.node_id + "\" on data dir " + o.data_dir});
  }
  return locks;
}

std::unique_ptr<FaultInjector> fault_injector(const Options& o) {
  if (o.fault_file.empty()) return nullptr;
  std::error_code ec;
  fs::create_directories(fs::path(o.data_dir) / "faults", ec);
  const auto progress = fs::path(o.data_dir) / "faults" / (std::string(to_string(o.mode)) + "-" + o.node_id + ".json");
  kLog.warn("fault injection enabled", {{"fault_file", o.fault_file}});
  return std::make_unique<FaultInjector>(o.fault_file, progress);
}

// Signals are taken synchronously by this thread; every gRPC thread inherits the mask.
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  process::survive_closed_pipes();           // a reader of our output that went away must not kill us
  process::skip_mutex_deadlock_detection();  // Debian's debug Abseil checks every lock gRPC takes
  return stop_signals;
}

// gRPC unlinks the path it listened on when it shuts down, whoever owns that path by then. So it
// listens on a private path that is then renamed into place (atomically), and at exit the public
// path is removed only while it is still this socket (same inode, in `bound`): an orphan that is
// stopped never takes a live plugin's socket along. False (logged) when it cannot serve.
bool listen(const Options& o, CsiServer& server, const CsiHandlers& handlers, std::optional<struct stat>& bound) {
  const auto cannot = [](const std::string& err) {
    kLog.error("cannot listen", {{"error", err}});
    return false;
  };
  std::error_code ec;
  fs::create_directories(fs::path(o.socket_path).parent_path(), ec);
  if (auto err = remove_stale_socket(o.socket_path); !err.empty()) return cannot(err);
  const std::string bind_path = o.socket_path + "." + std::to_string(::getpid()) + ".bind";
  if (bind_path.size() >= 108) return cannot("socket path too long for a unix socket: " + bind_path);
  if (auto err = server.start("unix://" + bind_path, handlers); !err.empty()) {
    kLog.error("cannot start gRPC server", {{"error", err}});
    return false;
  }
  struct stat st {};
  if (::stat(bind_path.c_str(), &st) == 0) bound = st;
  if (::rename(bind_path.c_str(), o.socket_path.c_str()) != 0) {
    cannot("cannot move the socket to " + o.socket_path + ": " + std::strerror(errno));
    server.shutdown(std::chrono::seconds(1));
    return false;
  }
  return true;
}

// Drain: the calls that touch state finish (injected delays and hangs end at once), then the
// node's lock is released, before the server shuts down: the next copy takes over at once. A
// copy that never took over answers its held calls UNAVAILABLE. The agent's kill timeout bounds
// the grace from outside.
void shut_down(const Options& o, Takeover& takeover, CsiServer& server, const std::optional<struct stat>& bound) {
  takeover.drain(std::chrono::seconds(30));
  server.shutdown(std::chrono::seconds(2));
  struct stat now {};
  if (bound && ::stat(o.socket_path.c_str(), &now) == 0 && now.st_dev == bound->st_dev && now.st_ino == bound->st_ino)
    ::unlink(o.socket_path.c_str());
  else
    kLog.warn("the socket is not ours any more; left in place", {{"path", o.socket_path}});
}

// A standby copy serves what needs no state until the old copy exits and it holds the locks.
void take_over_later(Takeover& takeover, std::atomic<int>& exit_code) {
  kLog.warn(
      "another copy holds the node's lock: serving Identity and NodeGetInfo, holding every other call "
      "until it exits",
      {{"holder", takeover.holder()}});
  takeover.wait_in_background([&exit_code](const std::string& err) {
    if (err.empty()) return;
    kLog.error("cannot take over; stopping", {{"error", err}});
    exit_code = 1;
    ::kill(::getpid(), SIGTERM);  // ends run()'s sigwait
  });
}

int run(const Options& o) {
  const bool serve_controller = o.mode != Mode::node;
  const bool serve_node = o.mode != Mode::controller;
  VolumeStore store(o.data_dir);
  std::unique_ptr<NodeState> node_state;
  if (serve_node)
    node_state = std::make_unique<NodeState>(
        o.data_dir, NodeRegistration{o.node_id, o.max_volumes, o.topology, o.max_volumes_file});
  Takeover takeover(service_locks(o, serve_node, serve_controller), [&]() -> std::string {
    if (auto err = store.prepare(); !err.empty()) return "data dir unusable: " + err;
    if (node_state) {
      if (auto err = node_state->open(); !err.empty()) return "node state unusable: " + err;
    }
    return {};
  });
  const auto started = takeover.start();
  if (started == Takeover::Start::failed) {
    kLog.error("refusing to start", {{"error", takeover.error()}});
    std::cerr << "mooring-hostpath: " << takeover.error() << "\n";
    return 1;
  }
  // Kept serving when the node service cannot mount, so the orchestrator learns why through Probe.
  const std::string unhealthy = serve_node ? check_mount_privilege(o.data_dir) : "";
  if (!unhealthy.empty())
    kLog.error("node service cannot mount; Probe will report FAILED_PRECONDITION", {{"reason", unhealthy}});
  const auto faults = fault_injector(o);
  std::unique_ptr<CallLog> call_log;
  if (!o.call_log.empty()) call_log = std::make_unique<CallLog>(o.call_log);
  if (call_log && !call_log->ok()) {
    kLog.error("cannot open call log", {{"path", o.call_log}});
    return 1;
  }

  Identity identity({o.plugin_name, o.vendor_version, std::string(to_string(o.mode)), serve_controller,
                     !o.topology.empty(), unhealthy});
  std::optional<Controller> controller;
  if (serve_controller) {
    controller.emplace(ControllerConfig{o.data_dir, o.mode == Mode::monolith ? o.node_id : "", o.known_nodes,
                                        o.capacity_bytes, o.max_volume_size, o.default_volume_size,
                                        o.node_expansion_required, o.topology, o.modify_volume},
                       store);
  }
  std::optional<Node> node;
  if (serve_node)
    node.emplace(NodeConfig{o.data_dir, o.node_id, o.max_volumes, o.topology, o.stage_without_mount,
                            o.volume_mount_group, o.max_volumes_file},
                 *node_state, store);

  const sigset_t stop_signals = block_stop_signals();
  std::atomic<bool> stopping{false};
  CallGate gate(faults.get(), call_log.get(), stopping, &takeover);
  CsiServer server;
  std::optional<struct stat> bound;
  const CsiHandlers handlers{&identity, controller ? &*controller : nullptr, node ? &*node : nullptr, &gate, o.node_id};
  if (!listen(o, server, handlers, bound)) return 1;
  kLog.info("serving", {{"endpoint", o.endpoint},
                        {"plugin", o.plugin_name},
                        {"version", o.vendor_version},
                        {"mode", to_string(o.mode)},
                        {"node_id", o.node_id},
                        {"data_dir", o.data_dir}});
  std::atomic<int> exit_code{0};
  if (started == Takeover::Start::standby) take_over_later(takeover, exit_code);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  kLog.info("shutting down", {{"signal", sig}});
  stopping = true;
  shut_down(o, takeover, server, bound);
  kLog.info("stopped");
  return exit_code;
}

}  // namespace
}  // namespace mooring::hostpath

int main(int argc, char** argv) {
  using namespace mooring;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto parsed = hostpath::parse_options(args, hostpath::environment(), hostpath::host_name());
  if (parsed.outcome == hostpath::ParseResult::Outcome::exit_ok) {
    std::cout << parsed.message;
    return 0;
  }
  if (parsed.outcome == hostpath::ParseResult::Outcome::exit_error) {
    std::cerr << "mooring-hostpath: " << parsed.message << "\n";
    return 2;
  }
  log::Level level{};
  log::Format format{};
  if (!log::parse_level(parsed.options.log_level, level) || !log::parse_format(parsed.options.log_format, format)) {
    std::cerr << "mooring-hostpath: bad --log-level or --log-format\n";
    return 2;
  }
  log::configure(level, format);
  try {
    return hostpath::run(parsed.options);
  } catch (const std::exception& e) {
    hostpath::kLog.error("fatal", {{"error", e.what()}});
    return 1;
  }
}
