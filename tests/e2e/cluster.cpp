#include "tests/e2e/cluster.hpp"

#include "cli/http_client.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "shared/tls/cert_files.hpp"
#include "shared/tls/digest.hpp"
#include "tests/support/descriptors.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"

namespace mooring::e2e {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Runs a shell command for the network set-up; a failure is an exception naming it.
void sh(const std::string& command) {
  if (const int rc = std::system(command.c_str()); rc != 0)
    throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + command);
}
// The same for clean-up (destructors): a failure is ignored.
void sh_quietly(const std::string& command) { (void)std::system((command + " 2>/dev/null").c_str()); }

// The port from the `nth` "<what> ... port=N" line of a log that is appended to across runs.
std::uint16_t wait_for_port(test::ChildProcess& p, const std::string& what, unsigned nth) {
  std::regex re(what + ".* port=([0-9]+)");
  std::uint16_t port = 0;
  test::wait_until(
      [&] {
        auto out = p.output();
        unsigned seen = 0;
        for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
          if (++seen == nth) {
            port = static_cast<std::uint16_t>(std::stoi((*it)[1].str()));
            return true;
          }
        return !p.running();
      },
      30s);
  return port;
}

// SIGSTOPped (state T in /proc/<pid>/stat): asking it would hang, it accepts but never answers.
bool stopped(pid_t pid) {
  const auto stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

// Whether the agent these options start ends its allocations on SIGTERM (the fixture's
// --drain-on-shutdown, unless agent_args set it to 0).
bool drains(const NodeOptions& o) {
  for (std::size_t i = 0; i + 1 < o.agent_args.size(); ++i)
    if (o.agent_args[i] == "--drain-on-shutdown") return o.agent_args[i + 1] != "0" && o.agent_args[i + 1] != "0s";
  return true;
}

}  // namespace

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  fs::create_directories(dir() / "hostpath");
  fs::create_directories(dir() / "cp");
  if (options_.mutual_tls) pki_ = std::make_unique<test::TestPki>(dir() / "pki");
  members_.resize(options_.etcd.empty() ? 1 : std::max<std::size_t>(options_.controlplanes, 1));
  // HA members advertise their addresses to each other, so their ports are fixed up front.
  if (!options_.etcd.empty())
    for (auto& m : members_) {
      m.http_port = test::free_tcp_port();
      m.grpc_port = test::free_tcp_port();
    }
}

Cluster::~Cluster() {
  // Agents first: they drain (every allocation stopped, its task killed, its volumes released)
  // and stop their plugins. Then the plugins the test ran itself and the control planes.
  for (auto& [id, n] : nodes_)
    if (n.agent && n.agent->running()) {
      n.agent->terminate();
      if (!n.agent->wait_for_exit(30s)) {
        ADD_FAILURE() << "agent " << id << " did not stop within 30 s of SIGTERM";
        n.agent->kill();
        n.left_running = true;
      }
    }
  for (auto& [id, n] : nodes_) n.plugin.reset();
  members_.clear();
  stop_leftovers();
  for (auto& [id, n] : nodes_)
    if (!n.netns.empty()) sh_quietly("ip netns del " + n.netns);  // takes the veth pair along
  nodes_.clear();
  tmp_.unmount_all();
}

// Nothing of this cluster may outlive it (issue 40: a passing test left its task running). What
// is left is killed; it fails the test unless its node's agent was meant to leave it: killed
// with kill_node() (a crash leaves tasks and plugins running by design) or run with
// --drain-on-shutdown 0 (a stop then leaves the allocations running, to be re-adopted).
void Cluster::stop_leftovers() {
  for (int round = 0; round < 3; ++round) {  // a dying shell's children show up next round
    const auto left = test::processes_using(dir());
    if (left.empty()) return;
    // Judged all before any is killed: killing a walled task's init (its PID namespace's first
    // process) takes the task down with it, and a dying task's descriptors no longer say whose it is.
    std::vector<pid_t> to_kill;
    for (const auto& p : left) {
      if (p.parent == ::getpid()) continue;  // the test's own child (a CLI, etcd): its owner stops it
      if (round == 0 && !expected_leftover(p.cmdline, p.pid))
        ADD_FAILURE() << "process left running after the cluster stopped: pid " << p.pid << ": " << p.cmdline;
      to_kill.push_back(p.pid);
    }
    for (const pid_t pid : to_kill) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(200ms);
  }
}

bool Cluster::expected_leftover(const std::string& cmdline, pid_t pid) const {
  for (const auto& [id, n] : nodes_) {
    if (!n.left_running) continue;
    const auto node_prefix = node_dir(id).string() + "/";
    if (cmdline.find("--node-id csi-" + id + " ") != std::string::npos) return true;  // its plugin
    // Its task (log files in its alloc dir), or a walled task's init (issue 41: a clone of the
    // agent holding only its report pipe), known by its child, the task.
    std::vector<pid_t> candidates{pid};
    std::istringstream children(test::read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                                                "/children"));
    for (pid_t child; children >> child;) candidates.push_back(child);
    for (const pid_t candidate : candidates)
      for (const auto& [fd, target] : test::open_descriptors(candidate))
        if (target.starts_with(node_prefix)) return true;
  }
  return false;
}

// ---- control plane ----

void Cluster::start_controlplane() {
  if (options_.etcd.empty()) return start_controlplane(0);
  for (std::size_t i = 0; i < members_.size(); ++i) start_controlplane(i);
  if (!leader()) throw std::runtime_error("no control plane became the leader:\n" + log_tails());
}

void Cluster::start_controlplane(std::size_t i) {
  auto& m = members_.at(i);
  if (m.process && m.process->running()) return;
  const bool ha = !options_.etcd.empty();
  const fs::path data = ha ? dir() / ("cp" + std::to_string(i)) : dir() / "cp";
  fs::create_directories(data);
  test::SpawnOptions o;
  o.binary = test::binary_path("mooring-controlplane");
  // Free ports (0, or picked up front for HA) rather than the default 4700/4701, and short TTLs
  // and GC periods (ClusterOptions): many clusters run side by side and the scenarios must be
  // quick. The defaults themselves are run by the defaults suite (tests/defaults/defaults_test.py).
  o.args = {"--data-dir",      data.string(),
            "--http-addr",     "127.0.0.1:" + std::to_string(m.http_port),
            // Every address, so agents in their own network namespace reach it over their veth.
            "--grpc-addr",     "0.0.0.0:" + std::to_string(m.grpc_port),
            "--heartbeat-ttl", options_.heartbeat_ttl,
            "--gc-retry-max",  options_.gc_retry_max,
            "--alloc-gc-threshold", options_.alloc_gc_threshold,
            "--node-gc-threshold", options_.node_gc_threshold,
            "--shutdown-grace", "2s",
            // Most scenarios are about volumes; ACLs have their own tests (AclBinaryTest, AclApiTest),
            // and the defaults suite (tests/defaults) runs them on, as `make run` does.
            options_.acl ? "--acl=true" : "--acl=false"};
  if (ha) {
    const bool own = i < options_.member_etcd.size() && !options_.member_etcd[i].empty();
    std::string keyring = options_.keyring_file.empty() ? (dir() / "keyring").string() : options_.keyring_file;
    if (i < options_.member_keyring.size() && !options_.member_keyring[i].empty()) keyring = options_.member_keyring[i];
    o.args.insert(o.args.end(), {"--state", own ? options_.member_etcd[i] : options_.etcd, "--keyring-file", keyring,
                                 "--leader-lease", options_.leader_lease,
                                 "--advertise-grpc-addr", "127.0.0.1:" + std::to_string(m.grpc_port)});
  }
  if (pki_) {
    const auto tls = pki_->server();
    o.args.insert(o.args.end(), {"--tls-ca-file", tls.ca, "--tls-cert-file", tls.cert, "--tls-key-file", tls.key});
    if (options_.enrollment) o.args.insert(o.args.end(), {"--tls-ca-key-file", tls::ca_paths(pki_->dir()).key.string()});
    if (!options_.node_cert_ttl.empty()) o.args.insert(o.args.end(), {"--node-cert-ttl", options_.node_cert_ttl});
  } else {
    o.args.push_back("--insecure");  // plaintext unless mutual_tls; the defaults suite runs secure
  }
  o.output_file = ha ? dir() / ("controlplane-" + std::to_string(i) + ".log") : dir() / "controlplane.log";
  m.process = std::make_unique<test::ChildProcess>(o);
  ++m.runs;
  // A standby says "standby until elected"; it leads (or not) later: leader() waits for that.
  m.http_port = wait_for_port(*m.process, ha ? "standby until elected" : "http api listening", m.runs);
  m.grpc_port = wait_for_port(*m.process, "grpc api listening", m.runs);
  if (!m.http_port || !m.grpc_port) throw std::runtime_error("control plane did not start:\n" + m.process->output());
}

std::optional<std::size_t> Cluster::leader(std::chrono::milliseconds timeout) {
  std::optional<std::size_t> found;
  test::wait_until(
      [&] {
        for (std::size_t i = 0; i < members_.size(); ++i) {
          if (!members_[i].process || !members_[i].process->running() || stopped(members_[i].process->pid())) continue;
          const auto saved = api_;
          api_ = i;
          const auto r = send("GET", "/v1/status/ready", {}, {});
          api_ = saved;
          if (r.status == 200) {
            found = i;
            return true;
          }
        }
        return false;
      },
      timeout);
  return found;
}

void Cluster::kill_controlplane() { kill_controlplane(api_); }
void Cluster::stop_controlplane() { stop_controlplane(api_); }

void Cluster::kill_controlplane(std::size_t i) {
  auto& m = members_.at(i);
  if (!m.process) return;
  m.process->kill();
  m.process->wait_for_exit(10s);
}

void Cluster::stop_controlplane(std::size_t i) {
  auto& m = members_.at(i);
  if (!m.process) return;
  m.process->terminate();
  if (!m.process->wait_for_exit(20s)) ADD_FAILURE() << "control plane " << i << " did not stop on SIGTERM";
}

std::string Cluster::controlplane_log(std::size_t i) const {
  return test::read_file(options_.etcd.empty() ? dir() / "controlplane.log"
                                               : dir() / ("controlplane-" + std::to_string(i) + ".log"));
}

std::string Cluster::controlplane_log() const { return controlplane_log(api_); }

// ---- nodes ----

fs::path Cluster::node_dir(const std::string& id) const { return dir() / id; }

void Cluster::start_node(const std::string& id, NodeOptions options, bool wait_healthy) {
  auto& n = nodes_[id];
  if (n.agent && n.agent->running()) return;
  if (!n.agent) n.options = std::move(options);
  n.left_running = !drains(n.options);  // until it stops: what a crash of this agent would leave
  fs::create_directories(node_dir(id));
  std::string plugin;
  std::string split_controller;  // the second --plugin entry of a split plugin
  if (!n.options.configured_plugin) {
    // No plugin in the agent's configuration: they come as allocations.
  } else if (n.options.plugin_on_socket) {
    start_plugin(id);
    // The agent's defaults for probing (5 s): what a third-party plugin gets.
    plugin = "hostpath,type=" + n.options.plugin_type + ",socket=" + (node_dir(id) / "csi.sock").string();
  } else {
    auto launched = [&](const std::string& type, const std::vector<std::string>& extra) {
      std::string spec = "hostpath,type=" + type + ",command=" + test::binary_path("mooring-hostpath").string();
      for (const auto& a : plugin_args(id)) spec += ",arg=" + a;
      for (const auto& a : extra) spec += ",arg=" + a;
      return spec + ",probe_interval=200ms,health_timeout=10s,fingerprint_interval=" + n.options.fingerprint_interval +
             ",stop_timeout=5s";
    };
    if (n.options.plugin_type == "split") {
      split_controller = launched("controller", {"--mode", "controller"});
      plugin = launched("node", {"--mode", "node"});
    } else {
      plugin = launched(n.options.plugin_type, {});
    }
  }
  if (n.options.own_network && n.netns.empty()) make_network(id, n);
  const std::string cp_host = n.netns.empty() ? "127.0.0.1" : n.host_ip;
  const std::string own_host = n.netns.empty() ? "127.0.0.1" : n.node_ip;
  test::SpawnOptions o;
  o.binary = test::binary_path("mooring-nodeagent");
  o.args = {"--node-id", id,
            "--node-name", id,
            "--data-dir", (node_dir(id) / "agent").string(),
            "--controlplane-addr", controlplane_addrs(cp_host),
            "--grpc-addr", own_host + ":0",
            "--heartbeat-interval", n.options.heartbeat_interval,
            "--kill-timeout", "2s"};
  if (!plugin.empty()) o.args.insert(o.args.end(), {"--plugin", plugin});
  if (!split_controller.empty()) o.args.insert(o.args.end(), {"--plugin", split_controller});
  if (pki_) {
    const auto tls = pki_->agent(id);
    o.args.insert(o.args.end(), {"--tls-ca-file", tls.ca, "--tls-cert-file", tls.cert, "--tls-key-file", tls.key});
  } else {
    // The plaintext clusters most scenarios use, said out loud; mutual_tls runs the secure
    // default, and the defaults suite runs it with the default ports.
    o.args.push_back("--insecure");
  }
  // Deviations from the defaults, each covered by the defaults suite (tests/defaults/defaults_test.py,
  // the stack exactly as `make run` starts it, kill -9 of each service included):
  //  - any free port for the metrics listener (default 127.0.0.1:4703): many agents share this
  //    host and other tests run beside this one; agent_args may name one;
  //  - --drain-on-shutdown 10s (the binary's default is 0, `make run` sets 20s): the teardown's
  //    SIGTERM ends every allocation, so that nothing of the test outlives it (stop_leftovers).
  //    Short TTLs and intervals (heartbeat, probes, kill timeout) keep the scenarios fast.
  o.args.insert(o.args.end(), {"--metrics-addr", "127.0.0.1:0", "--drain-on-shutdown", "10s"});
  o.args.insert(o.args.end(), n.options.agent_args.begin(), n.options.agent_args.end());
  if (!n.netns.empty()) {
    // nsenter execs the agent (no fork): the child's pid is the agent's.
    o.args.insert(o.args.begin(), {"--net=/run/netns/" + n.netns, "--", o.binary.string()});
    o.binary = "/usr/bin/nsenter";
  }
  o.output_file = dir() / (id + ".log");
  n.agent = std::make_unique<test::ChildProcess>(o);
  if (wait_healthy) wait_node_healthy(id);
}

std::string Cluster::controlplane_addrs(const std::string& host) const {
  std::string out;
  for (const auto& m : members_) out += (out.empty() ? "" : ",") + host + ":" + std::to_string(m.grpc_port);
  return out;
}

std::vector<std::string> Cluster::plugin_args(const std::string& id) const {
  std::vector<std::string> args = {"--data-dir",   (dir() / "hostpath").string(),
                                   "--node-id",    "csi-" + id,
                                   "--call-log",   (dir() / ("calls-" + id + ".jsonl")).string(),
                                   "--fault-file", (dir() / ("faults-" + id + ".json")).string()};
  const auto& extra = nodes_.at(id).options.plugin_args;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void Cluster::start_plugin(const std::string& id) {
  auto& n = nodes_.at(id);
  if (n.plugin && n.plugin->running()) return;
  test::SpawnOptions o;
  o.binary = test::binary_path("mooring-hostpath");
  o.args = plugin_args(id);
  o.args.insert(o.args.end(), {"--endpoint", "unix://" + (node_dir(id) / "csi.sock").string()});
  o.output_file = dir() / (id + "-plugin.log");
  n.plugin = std::make_unique<test::ChildProcess>(o);
}

void Cluster::kill_plugin(const std::string& id) {
  auto& n = nodes_.at(id);
  if (!n.plugin) return;
  n.plugin->kill();
  n.plugin->wait_for_exit(10s);
}

void Cluster::wait_node_healthy(const std::string& id) {
  if (!nodes_.at(id).options.configured_plugin) {
    // Nothing of its own to become healthy: the node registered and is ready.
    if (!eventually([&] {
          auto r = request("GET", "/v1/node/" + id);
          return r.status == 200 && json::parse(r.body, nullptr, false).value("Status", "") == "ready";
        }, 60s))
      throw std::runtime_error("node " + id + " did not become ready:\n" + node_log(id));
    return;
  }
  bool ok = eventually(
      [&] {
        auto r = request("GET", "/v1/plugin/csi/hostpath");
        if (r.status != 200) return false;
        auto j = json::parse(r.body, nullptr, false);
        if (!j.is_object() || !j.contains("Nodes") || !j["Nodes"].contains(id)) return false;
        const auto& node = j["Nodes"][id];
        // A split plugin's controller instance reports on its own.
        if (nodes_.at(id).options.plugin_type == "split" &&
            !(j.contains("Controllers") && j["Controllers"].contains(id) &&
              j["Controllers"][id].value("Healthy", false)))
          return false;
        auto nodes = get("/v1/node/" + id);
        return node.value("Healthy", false) && nodes.is_object() && nodes.value("Status", "") == "ready";
      },
      60s);
  if (!ok) throw std::runtime_error("node " + id + " did not become healthy:\n" + node_log(id));
}

void Cluster::kill_node(const std::string& id) {
  auto& n = nodes_.at(id);
  n.agent->kill();
  n.agent->wait_for_exit(10s);
  n.left_running = true;  // its tasks and plugin stay, as after a crash
}

void Cluster::make_network(const std::string& id, Node& n) {
  static int next = 0;
  const int k = next++;
  const int pid = static_cast<int>(::getpid());
  n.netns = "mooring-e2e-" + std::to_string(pid) + "-" + id;
  n.host_veth = "mh" + std::to_string(pid) + "x" + std::to_string(k);
  const std::string peer = "mn" + std::to_string(pid) + "x" + std::to_string(k);
  const std::string net = "10." + std::to_string(200 + k % 50) + "." + std::to_string(pid % 250) + ".";
  n.host_ip = net + "1";
  n.node_ip = net + "2";
  sh("ip netns add " + n.netns);
  sh("ip link add " + n.host_veth + " type veth peer name " + peer);
  sh("ip link set " + peer + " netns " + n.netns);
  sh("ip addr add " + n.host_ip + "/30 dev " + n.host_veth);
  sh("ip link set " + n.host_veth + " up");
  sh("ip -n " + n.netns + " addr add " + n.node_ip + "/30 dev " + peer);
  sh("ip -n " + n.netns + " link set " + peer + " up");
  sh("ip -n " + n.netns + " link set lo up");
}

void Cluster::partition(const std::string& id) { sh("ip link set " + nodes_.at(id).host_veth + " down"); }
void Cluster::heal(const std::string& id) { sh("ip link set " + nodes_.at(id).host_veth + " up"); }

void Cluster::stop_node(const std::string& id) {
  auto& n = nodes_.at(id);
  n.agent->terminate();
  if (!n.agent->wait_for_exit(30s)) ADD_FAILURE() << "agent " << id << " did not stop on SIGTERM";
  n.left_running = !drains(n.options);
}

pid_t Cluster::agent_pid(const std::string& id) const {
  const auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.agent ? it->second.agent->pid() : 0;
}

bool Cluster::node_running(const std::string& id) {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.agent && it->second.agent->running();
}

std::string Cluster::node_log(const std::string& id) const { return test::read_file(dir() / (id + ".log")); }

std::vector<fs::path> Cluster::log_files() const {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir())) {
    const auto ext = e.path().extension();
    if (e.is_regular_file() && (ext == ".log" || ext == ".jsonl")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Cluster::log_tails(std::size_t bytes) const {
  auto tail = [bytes](const std::string& s) { return s.size() > bytes ? s.substr(s.size() - bytes) : s; };
  std::string out;
  for (std::size_t i = 0; i < members_.size(); ++i)
    out += "---- control plane " + (members_.size() > 1 ? std::to_string(i) + " " : std::string()) + "log (tail) ----\n" +
           tail(controlplane_log(i)) + "\n";
  for (const auto& [id, node] : nodes_) out += "---- " + id + " log (tail) ----\n" + tail(node_log(id));
  return out;
}

pid_t Cluster::plugin_pid(const std::string& id) const {
  const auto all = plugin_pids(id);
  return all.empty() ? 0 : all.front();
}

std::vector<pid_t> Cluster::plugin_pids(const std::string& id) const {
  std::vector<pid_t> out;
  const std::string want = "csi-" + id;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = test::read_file(it->path() / "cmdline");  // "" once it exited
    std::vector<std::string> args;
    std::size_t start = 0;
    for (std::size_t i = 0; i < cmdline.size(); ++i)
      if (cmdline[i] == '\0') {
        args.push_back(cmdline.substr(start, i - start));
        start = i + 1;
      }
    if (args.empty() || fs::path(args[0]).filename() != "mooring-hostpath") continue;
    bool mine = false, ours = false;
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--node-id" && args[i + 1] == want) mine = true;
      if (args[i] == "--data-dir" && args[i + 1] == (dir() / "hostpath").string()) ours = true;
    }
    if (mine && ours) out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

void Cluster::set_faults(const std::string& id, const json& rules) {
  test::write_file(dir() / ("faults-" + id + ".json"), json{{"rules", rules.is_array() ? rules : json::array()}}.dump());
}

std::vector<PluginCall> Cluster::calls(const std::string& id) const {
  std::vector<PluginCall> out;
  for (const auto& line : test::read_lines(dir() / ("calls-" + id + ".jsonl"))) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    PluginCall c;
    c.rpc = j.value("rpc", "");
    c.volume_id = j.value("volume_id", "");
    c.node_id = j.value("node_id", "");
    c.code = j.value("code_name", "");
    c.unix_ms = j.value("unix_ms", std::int64_t{0});
    c.fault = j.value("fault", "");
    c.pid = j.value("pid", std::int64_t{0});
    c.held_ms = j.value("held_ms", std::int64_t{0});
    using Strings = std::map<std::string, std::string>;
    c.parameters = j.value("parameters", Strings{});
    c.volume_context = j.value("volume_context", Strings{});
    c.publish_context = j.value("publish_context", Strings{});
    c.secrets_sha256 = j.value("secrets_sha256", "");
    c.content_source = j.value("content_source", "");
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<PluginCall> Cluster::calls(const std::string& id, const std::string& rpc) const {
  auto all = calls(id);
  std::vector<PluginCall> out;
  for (auto& c : all)
    if (c.rpc == rpc) out.push_back(std::move(c));
  return out;
}

// ---- API ----

HttpResult Cluster::request(const std::string& method, const std::string& target, const std::string& body,
                            const std::map<std::string, std::string>& headers) {
  auto out = send(method, target, body, headers);
  if (on_response_) on_response_(method + " " + target, out);
  return out;
}

std::string Cluster::bootstrap_acl() {
  auto boot = request("POST", "/v1/acl/bootstrap");
  EXPECT_EQ(boot.status, 200u) << boot.body;
  if (boot.status != 200) return "";
  use_token(json::parse(boot.body).value("SecretID", ""));
  return token_;
}

std::string Cluster::client_token(const std::string& name, const json& rules) {
  auto p = request("PUT", "/v1/acl/policy/" + name, json{{"Rules", rules}}.dump());
  EXPECT_EQ(p.status, 200u) << p.body;
  auto t = request("PUT", "/v1/acl/token", json{{"Name", name}, {"Type", "client"}, {"Policies", {name}}}.dump());
  EXPECT_EQ(t.status, 200u) << t.body;
  return t.status == 200 ? json::parse(t.body).value("SecretID", "") : "";
}

HttpResult Cluster::request_retrying(const std::string& method, const std::string& target, const std::string& body) {
  HttpResult r;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (true) {
    r = request(method, target, body);
    if (r.status != 503 || r.header("retry-after").empty() || std::chrono::steady_clock::now() >= deadline) return r;
    std::this_thread::sleep_for(std::chrono::seconds(std::max(1, std::atoi(r.header("retry-after").c_str()))));
  }
}

Cluster::CliRun Cluster::cli(const std::vector<std::string>& args) {
  EXPECT_FALSE(options_.mutual_tls) << "Cluster::cli speaks plain HTTP";
  const auto out_file = dir() / ("cli-" + std::to_string(++cli_runs_) + ".out");
  std::map<std::string, std::string> env{{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(http_port())}};
  if (!token_.empty()) env["MOORING_TOKEN"] = token_;
  test::ChildProcess process(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"), .args = args, .env = env, .output_file = out_file});
  const auto status = process.wait_for_exit(60s);
  CliRun run;
  run.output = test::read_file(out_file);
  if (status && status->exited) run.code = status->code;
  return run;
}

pid_t Cluster::controlplane_pid() const {
  const auto& process = members_.at(api_).process;
  return process ? process->pid() : 0;
}

HttpResult Cluster::send(const std::string& method, const std::string& target, const std::string& body,
                         const std::map<std::string, std::string>& given) {
  auto headers = given;
  if (!token_.empty()) headers.try_emplace("X-Mooring-Token", token_);
  if (!pki_) return controlplane::http_request(http_port(), method, target, body, headers);
  // Over mutual TLS the REST API serves HTTPS with the server certificate: ask as the CLI does.
  cli::HttpRequest req{.method = method, .target = target, .body = body};
  for (const auto& [k, v] : headers) req.headers.emplace_back(k, v);
  auto endpoint = cli::parse_address("https://127.0.0.1:" + std::to_string(http_port()));
  auto res = cli::HttpClient(*endpoint, {.ca_file = pki_->server().ca}).send(req);
  HttpResult out;
  if (!res) {
    out.error = res.error();
    return out;
  }
  out.status = res->status;
  out.headers = res->headers;
  out.body = res->body;
  return out;
}

json Cluster::get(const std::string& target) {
  auto r = request("GET", target);
  if (r.status != 200) {
    ADD_FAILURE() << "GET " << target << ": " << r.status << " " << r.body << r.error;
    return nullptr;
  }
  return json::parse(r.body, nullptr, false);
}

json Cluster::create_volume(const std::string& id, const std::string& access_mode, std::int64_t capacity) {
  json body = {{"Volumes",
                {{{"ID", id},
                  {"Name", id},
                  {"PluginID", "hostpath"},
                  {"RequestedCapacityMin", capacity},
                  {"RequestedCapabilities", {{{"AccessMode", access_mode}, {"AttachmentMode", "file-system"}}}},
                  {"Secrets", {{"token", "e2e-secret-" + id}}}}}}};
  auto r = request_retrying("PUT", "/v1/volume/csi/" + id + "/create", body.dump());
  if (r.status != 200) {
    ADD_FAILURE() << "create volume " << id << ": " << r.status << " " << r.body;
    return nullptr;
  }
  return json::parse(r.body, nullptr, false);
}

bool Cluster::create_namespace(const std::string& name, const json& spec) {
  auto r = request_retrying("PUT", "/v1/namespace/" + name, spec.dump());
  if (r.status != 200) ADD_FAILURE() << "create namespace " << name << ": " << r.status << " " << r.body;
  return r.status == 200;
}

std::string Cluster::run_alloc(const json& allocation) {
  auto r = request_retrying("POST", "/v1/allocations", json{{"Allocation", allocation}}.dump());
  if (r.status != 200) {
    ADD_FAILURE() << "submit allocation: " << r.status << " " << r.body;
    return "";
  }
  return json::parse(r.body).value("ID", "");
}

std::string Cluster::run_task(const std::string& name, const std::string& volume_id, const std::string& node,
                              const std::string& script) {
  const auto id = run_alloc(allocation(name, volume_id, node, script));
  if (id.empty()) return "refused";
  eventually([&] {
    const auto s = alloc_status(id);
    return s == "complete" || s == "failed";
  });
  const auto status = alloc_status(id);
  eventually([&] { return claim_count(volume_id) == 0; });
  return status;
}

json Cluster::plugin_task(const std::string& node_id, const json& csi_plugin) const {
  json plugin = {{"ID", "hostpath"}, {"Type", "monolith"}};
  for (const auto& [k, v] : csi_plugin.items()) plugin[k] = v;
  return {{"Command", test::binary_path("mooring-hostpath").string()},
          {"Args", plugin_args(node_id)},
          {"KillTimeout", "5s"},
          {"CSIPlugin", plugin}};
}

std::string Cluster::run_plugin_alloc(const std::string& node_id, const json& csi_plugin) {
  return run_alloc({{"Name", "hostpath-plugin-" + node_id}, {"NodeID", node_id}, {"Task", plugin_task(node_id, csi_plugin)}});
}

HttpResult Cluster::stop_alloc(const std::string& id) { return request("POST", "/v1/allocation/" + id + "/stop"); }

std::map<std::string, json> Cluster::system_copies(const std::string& group_id) {
  std::map<std::string, json> out;
  auto list = get("/v1/allocations?system_id=" + group_id);
  if (!list.is_array()) return out;
  for (const auto& c : list) {
    auto& slot = out[c.value("NodeID", "")];
    if (slot.is_null() || c.value("DesiredStatus", "") == "run") slot = c;
  }
  return out;
}

std::string Cluster::alloc_status(const std::string& id) {
  auto r = request("GET", "/v1/allocation/" + id);
  if (r.status != 200) return "";
  return json::parse(r.body, nullptr, false).value("ClientStatus", "");
}

std::size_t Cluster::claim_count(const std::string& volume_id) {
  auto r = request("GET", "/v1/volume/csi/" + volume_id);
  if (r.status != 200) return 0;
  auto j = json::parse(r.body, nullptr, false);
  return j.contains("Claims") && j["Claims"].is_array() ? j["Claims"].size() : 0;
}

std::vector<std::string> Cluster::mounts_of(const std::string& node_id) const {
  std::vector<std::string> out;
  for (const auto& m : test::mounts_under(node_dir(node_id))) out.push_back(m.mount_point);
  return out;
}

bool Cluster::eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return test::wait_until(done, timeout, 50ms);
}

std::string secrets_sha256(const std::map<std::string, std::string>& secrets) {
  if (secrets.empty()) return {};
  std::string lines;
  for (const auto& [k, v] : secrets) lines += k + "=" + v + "\n";
  return tls::sha256_hex(lines);
}

json allocation(const std::string& name, const std::string& volume_id, const std::string& node,
                const std::string& script, const std::string& access_mode, bool read_only) {
  json a = {{"Name", name},
            {"Volumes",
             {{"data",
               {{"Type", "csi"},
                {"Source", volume_id},
                {"ReadOnly", read_only},
                {"AccessMode", access_mode},
                {"AttachmentMode", "file-system"}}}}},
            {"Task", {{"Command", "/bin/sh"}, {"Args", {"-c", script}}, {"KillTimeout", "2s"}}}};
  if (!node.empty()) a["NodeID"] = node;
  return a;
}

}  // namespace mooring::e2e
