// End-to-end harness: a whole Mooring cluster on this machine from the real binaries — one
// mooring-controlplane (real HTTP, gRPC and SQLite), node agents (mooring-nodeagent), each
// launching its own mooring-hostpath plugin. The plugins share one data dir, as nodes share a
// storage backend, so a volume written on one node is readable on another. Every plugin has a
// fault file and a call log, so a scenario can break a plugin and check the order of CSI calls.
// Everything lives in one temp dir that is unmounted and removed afterwards, even on failure, and
// no process of the cluster outlives it: the teardown fails the test naming any it had to kill.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::e2e {

using json = nlohmann::json;
using HttpResult = controlplane::HttpResult;

struct ClusterOptions {
  std::string heartbeat_ttl = "2s";  // the control plane marks a silent node down after this
  std::string gc_retry_max = "1s";   // failing releases are retried at least this often
  std::string alloc_gc_threshold = "1h";  // terminal, claim-free allocations are deleted after this
  std::string node_gc_threshold = "24h";  // down nodes named by no claim are purged after this
  // A CA and certificates (tests/support/test_pki) under dir()/pki; the control plane and every
  // agent run with --tls-ca-file/--tls-cert-file/--tls-key-file (each agent with its own node's).
  bool mutual_tls = false;
  // ACLs on (--acl): bootstrap_acl() makes and uses the management token.
  bool acl = false;
  // Node enrollment and renewal (mutual_tls only): the control plane holds the CA's key
  // (--tls-ca-key-file) and signs node certificates lasting `node_cert_ttl` ("": its default).
  bool enrollment = false;
  std::string node_cert_ttl;
  // High availability (issue 22): this many control planes on the etcd state `etcd`
  // ("etcd://127.0.0.1:PORT[,...]/prefix"), each with its own fixed ports and data dir and one
  // shared keyring; every agent is given all of their gRPC addresses. Empty: one on SQLite.
  std::string etcd;
  std::size_t controlplanes = 1;
  std::string leader_lease = "2s";
  // HA: member i's own --state where set and not empty (e.g. one etcd endpoint of three, to cut
  // that member off from etcd while the others keep the quorum).
  std::vector<std::string> member_etcd;
  // HA: the keyring file every member is given (empty: dir()/keyring, created by the first
  // leader), and member i's own where set and not empty (one lacking the state's root key).
  std::string keyring_file;
  std::vector<std::string> member_keyring;
};

struct NodeOptions {
  // monolith | node | controller | split: "split" runs hostpath twice under one plugin id, as a
  // controller (--mode controller) and as a node (--mode node), two processes on two sockets.
  std::string plugin_type = "monolith";
  std::string heartbeat_interval = "200ms";
  std::vector<std::string> plugin_args;  // extra mooring-hostpath flags
  // A launched plugin's full fingerprint period (its NodeGetInfo re-read); short so tests see changes.
  std::string fingerprint_interval = "2s";
  std::vector<std::string> agent_args;  // extra mooring-nodeagent flags
  // Run the agent (and so its plugin) in a network namespace of its own, joined to the host by a
  // veth pair, so partition() can cut it off from the control plane. Mounts stay in the host's
  // mount namespace (nsenter --net only), so the mount table checks still see them.
  bool own_network = false;
  // Run the plugin as its own process on a socket (the agent's `socket=` mode, with the agent's
  // default probe interval), as third-party plugins are deployed: kill_plugin / start_plugin.
  bool plugin_on_socket = false;
  // false: the agent is configured with no plugin at all; its plugins run as allocations
  // (plugin_task / run_plugin_alloc), and start_node waits only for the node to be ready.
  bool configured_plugin = true;
};

// One CSI call as the hostpath plugin logged it.
struct PluginCall {
  std::string rpc;
  std::string volume_id;
  std::string node_id;
  std::string code;  // "OK" or the status name (code_name)
  std::int64_t unix_ms = 0;
  std::string fault;
  std::int64_t pid = 0;  // the plugin process that answered
  std::int64_t held_ms = 0;  // how long a new copy held it before taking over from the old one
  // What the request carried (plugins/hostpath/README.md, "Call log"); secrets only as a digest.
  std::map<std::string, std::string> parameters;
  std::map<std::string, std::string> volume_context;
  std::map<std::string, std::string> publish_context;
  std::string secrets_sha256;
  std::string content_source;  // CreateVolume: "snapshot:<id>", "volume:<id>" or ""
};

// The digest the hostpath call log keeps of a request's secrets: SHA-256 of "key=value\n" lines
// sorted by key, "" for none. Spelled out here rather than taken from the plugin's code.
std::string secrets_sha256(const std::map<std::string, std::string>& secrets);

class Cluster {
 public:
  explicit Cluster(ClusterOptions options = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::filesystem::path& dir() const { return tmp_.path(); }

  // ---- control plane ----
  // Starts it (again, on the same ports and data dir after a stop or kill). With several (HA):
  // starts every one that is not running and waits until one of them leads.
  void start_controlplane();
  void kill_controlplane();  // SIGKILL
  void stop_controlplane();  // SIGTERM and wait
  std::uint16_t http_port() const { return members_.at(api_).http_port; }
  std::uint16_t grpc_port() const { return members_.at(api_).grpc_port; }
  // HA: one member `i` of ClusterOptions::controlplanes.
  void start_controlplane(std::size_t i);  // returns once it listens (as a standby or leader)
  void kill_controlplane(std::size_t i);   // SIGKILL
  void stop_controlplane(std::size_t i);   // SIGTERM and wait
  test::ChildProcess& controlplane(std::size_t i) { return *members_.at(i).process; }
  std::uint16_t http_port(std::size_t i) const { return members_.at(i).http_port; }
  std::string controlplane_log(std::size_t i) const;
  // The member whose /v1/status/ready answers 200 (the leader), waiting up to `timeout`.
  std::optional<std::size_t> leader(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // request() and friends go to member `i` (0 at first); a standby forwards them to the leader.
  void use_controlplane(std::size_t i) { api_ = i; }
  // The cluster's CA and certificates (ClusterOptions::mutual_tls only).
  test::TestPki& pki() { return *pki_; }
  std::string controlplane_log() const;
  pid_t controlplane_pid() const;  // 0 when not running

  // ---- nodes ----
  // Starts node `id` (agent + its hostpath plugin, CSI node id "csi-<id>") and waits until the
  // control plane sees its plugin healthy (unless `wait_healthy` is false: a restart whose first
  // moments are the test's subject). Starting a stopped node again keeps its data dir.
  void start_node(const std::string& id, NodeOptions options = {}, bool wait_healthy = true);
  void kill_node(const std::string& id);  // SIGKILL the agent (its plugin is left running, as after a crash)
  // SIGTERM the agent and wait for it to exit. Agents run with --drain-on-shutdown 10s (their
  // allocations end with them) unless agent_args says "--drain-on-shutdown", "0".
  void stop_node(const std::string& id);
  bool node_running(const std::string& id);
  pid_t agent_pid(const std::string& id) const;  // of its latest start; 0 before any
  // Cut a node started with own_network off from the control plane (both directions), and back.
  void partition(const std::string& id);
  void heal(const std::string& id);
  std::string node_log(const std::string& id) const;
  // Every log the cluster wrote: the control plane's, each agent's (with its plugin's output),
  // each socket plugin's, and the plugins' call logs.
  std::vector<std::filesystem::path> log_files() const;
  // The last `bytes` of the control plane's log and of every node's, headed by whose they are:
  // what a failed test prints.
  std::string log_tails(std::size_t bytes = 6000) const;
  // The node's directory (its agent's --data-dir is agent/ in it; mount roots live below).
  std::filesystem::path node_dir(const std::string& id) const;
  // plugin_on_socket nodes: SIGKILL the plugin process (its socket file stays), start it again.
  void kill_plugin(const std::string& id);
  void start_plugin(const std::string& id);
  // The pid of the node's hostpath plugin process (from its call log or process list), 0 if none.
  pid_t plugin_pid(const std::string& id) const;
  std::vector<pid_t> plugin_pids(const std::string& id) const;  // all of them (orphans of killed agents too)

  // Fault rules for the node's plugin (hostpath fault-file format); {} clears them.
  void set_faults(const std::string& id, const json& rules);
  std::vector<PluginCall> calls(const std::string& id) const;
  std::vector<PluginCall> calls(const std::string& id, const std::string& rpc) const;

  // ---- API ----
  HttpResult request(const std::string& method, const std::string& target, const std::string& body = {},
                     const std::map<std::string, std::string>& headers = {});
  // Called with "METHOD target" and every answer request() gets (also those of get,
  // create_volume, run_alloc...): a test can check each one, e.g. that no secret comes back.
  void on_response(std::function<void(const std::string& request, const HttpResult&)> check) {
    on_response_ = std::move(check);
  }
  // Every request() (and the helpers built on it) sends this ACL token from now on.
  void use_token(std::string secret) { token_ = std::move(secret); }
  // GET and parse; a failed or non-200 answer is a test failure and returns null.
  json get(const std::string& target);
  // The `mooring` CLI run to its end (60 s at most) against the member requests go to, with the
  // token in use as MOORING_TOKEN: its exit code (-1: did not exit) and its stdout and stderr.
  // Plain HTTP clusters only (not ClusterOptions::mutual_tls).
  struct CliRun {
    int code = -1;
    std::string output;
  };
  CliRun cli(const std::vector<std::string>& args);
  // request(), sent again while it answers 503 with Retry-After (up to 15 s), as a client does:
  // right after a control plane restart a plugin's health is unknown until its agent is heard from.
  HttpResult request_retrying(const std::string& method, const std::string& target, const std::string& body = {});
  // ACLs on: the one bootstrap; its management token is used from now on and returned ("" and a
  // test failure when refused).
  std::string bootstrap_acl();
  // ACLs on: a policy `name` with `rules` and a client token holding it (with the token in use);
  // its SecretID ("" and a test failure when refused).
  std::string client_token(const std::string& name, const json& rules);

  // A volume created through the hostpath controller (PUT /v1/volume/csi/:id/create).
  json create_volume(const std::string& id, const std::string& access_mode = "single-node-writer",
                     std::int64_t capacity = 10 << 20);
  // Makes namespace `name` (PUT /v1/namespace/:name with `spec`, e.g. {"Quota":{...}}): a write into a
  // namespace other than "default" is refused until it exists. False and a test failure when refused.
  bool create_namespace(const std::string& name, const json& spec = json::object());
  // Submits an allocation; returns its id ("" and a test failure when refused).
  std::string run_alloc(const json& allocation);
  // Runs `script` (as allocation() does) against `volume_id` on `node` to its end and waits for
  // the volume's claims to be released: the final ClientStatus, "refused" if not admitted.
  std::string run_task(const std::string& name, const std::string& volume_id, const std::string& node,
                       const std::string& script);
  // The Task of an allocation that runs node `node_id`'s hostpath plugin (the same flags, call log
  // and fault file as a configured one) as a CSI plugin task: {"ID":"hostpath","Type":type} plus
  // `csi_plugin` fields (e.g. HealthTimeout).
  json plugin_task(const std::string& node_id, const json& csi_plugin = json::object()) const;
  // Submits an allocation on `node_id` running plugin_task(node_id, csi_plugin); returns its id.
  std::string run_plugin_alloc(const std::string& node_id, const json& csi_plugin = json::object());
  HttpResult stop_alloc(const std::string& id);
  std::string alloc_status(const std::string& id);  // ClientStatus
  // The copies of a system allocation (GET /v1/allocations?system_id=), by node id; a node with a
  // stopped copy and a live one shows the live one.
  std::map<std::string, json> system_copies(const std::string& group_id);
  json volume(const std::string& id) { return get("/v1/volume/csi/" + id); }
  std::size_t claim_count(const std::string& volume_id);

  // Mounts below the node's agent data dir (staging and publish paths).
  std::vector<std::string> mounts_of(const std::string& node_id) const;

  // Polls `done` until true or `timeout`.
  static bool eventually(const std::function<bool()>& done,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  struct Node {
    NodeOptions options;
    std::unique_ptr<test::ChildProcess> agent;
    std::unique_ptr<test::ChildProcess> plugin;  // plugin_on_socket only
    std::string netns;      // own_network: the namespace and the host end of the veth pair
    std::string host_veth;
    std::string host_ip, node_ip;
    // Its agent's end leaves processes running by design (kill_node, or a stop without drain):
    // the teardown then stops them without failing the test.
    bool left_running = false;
  };
  void stop_leftovers();
  bool expected_leftover(const std::string& cmdline, pid_t pid) const;
  void make_network(const std::string& id, Node& n);
  std::vector<std::string> plugin_args(const std::string& id) const;  // data dir, node id, call log, faults
  std::string controlplane_addrs(const std::string& host) const;  // every member's gRPC address
  void wait_node_healthy(const std::string& id);
  HttpResult send(const std::string& method, const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers);

  ClusterOptions options_;
  test::TempDir tmp_{"mooring-e2e"};
  std::unique_ptr<test::TestPki> pki_;
  struct Member {
    std::unique_ptr<test::ChildProcess> process;
    std::uint16_t http_port = 0;
    std::uint16_t grpc_port = 0;
    unsigned runs = 0;
  };
  std::vector<Member> members_;
  std::size_t api_ = 0;
  std::map<std::string, Node> nodes_;
  std::function<void(const std::string&, const HttpResult&)> on_response_;
  std::string token_;
  int cli_runs_ = 0;  // names each cli() run's output file
};

// A JSON allocation for POST /v1/allocations: one CSI volume named "data" of `volume_id`,
// placed on `node` (empty: let the control plane place it), running `script` under /bin/sh with
// the volume's path in $MOORING_VOLUME_DATA.
json allocation(const std::string& name, const std::string& volume_id, const std::string& node,
                const std::string& script, const std::string& access_mode = "single-node-writer",
                bool read_only = false);

}  // namespace mooring::e2e
