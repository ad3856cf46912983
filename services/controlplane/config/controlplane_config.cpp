#include "services/controlplane/config/controlplane_config.hpp"

#include <array>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "services/controlplane/http/query.hpp"
#include "services/controlplane/state/etcd/etcd_options.hpp"
#include "services/controlplane/state/open_backend.hpp"
#include "shared/config/host_port.hpp"
#include "shared/config/settings.hpp"

namespace mooring::controlplane {
namespace {

using json = nlohmann::json;

struct Fail {
  std::string message;
};

enum class Kind { string, list, duration, positive_duration, count, level, format, boolean };

using Config = ControlPlaneConfig;
using Text = std::string Config::*;
using Span = std::chrono::milliseconds Config::*;
using List = std::vector<std::string> Config::*;
using Count = std::size_t Config::*;
using Switch = bool Config::*;

// One row per setting: how --help shows it (flag, environment variable, file key), its kind and
// the field it sets (none for --config, which is read before everything else; level and format
// have fields of their own type).
struct Option : config::Doc {
  constexpr Option(std::string_view flag_, std::string_view env_, std::string_view key_, Kind kind_,
                   std::string_view value_name_, std::string_view help_, std::string_view default_value_,
                   Text text_ = nullptr, Span span_ = nullptr, List list_ = nullptr, Count count_ = nullptr,
                   Switch on_ = nullptr)
      : config::Doc{flag_, env_, key_, value_name_, help_, default_value_},
        kind(kind_),
        text(text_),
        span(span_),
        list(list_),
        count(count_),
        on(on_) {}
  Kind kind;
  Text text;
  Span span;
  List list;
  Count count;
  Switch on;
};

constexpr std::array kOptions{
    Option{"config", "MOORING_CP_CONFIG", "", Kind::string, "FILE", "JSON config file (keys as listed below)", ""},
    Option{"data-dir", "MOORING_CP_DATA_DIR", "data_dir", Kind::string, "DIR",
           "the state (SQLite state.db, created 0700/0600), the keyring and audit.log; one control plane per "
           "directory (flock)",
           "(required)", &Config::data_dir},
    Option{"state", "MOORING_CP_STATE", "state", Kind::string, "URL",
           "where the state lives: sqlite://DATA_DIR/state.db (embedded) or etcd://HOST:PORT[,HOST:PORT...][/PREFIX] "
           "(prefix /mooring by default; IP endpoints are tried in order; give every control plane the same "
           "--keyring-file)",
           "sqlite://DATA_DIR/state.db", &Config::state},
    Option{"etcd-cacert", "MOORING_CP_ETCD_CACERT", "etcd_cacert", Kind::string, "FILE",
           "TLS to etcd: the CA of etcd's certificate", "", &Config::etcd_ca_file},
    Option{"etcd-cert", "MOORING_CP_ETCD_CERT", "etcd_cert", Kind::string, "FILE",
           "TLS to etcd: our client certificate, when etcd asks for one (with --etcd-key)", "",
           &Config::etcd_cert_file},
    Option{"etcd-key", "MOORING_CP_ETCD_KEY", "etcd_key", Kind::string, "FILE", "the key of --etcd-cert", "",
           &Config::etcd_key_file},
    Option{"leader-lease", "MOORING_CP_LEADER_LEASE", "leader_lease", Kind::positive_duration, "DURATION",
           "etcd state: the leader's lease (whole seconds); a standby takes over within about twice this after the "
           "leader dies",
           "2s", nullptr, &Config::leader_lease},
    Option{"stale-reads-max", "MOORING_CP_STALE_READS_MAX", "stale_reads_max", Kind::duration, "DURATION",
           "etcd state: how long a leader that cannot reach a quorum of etcd keeps serving reads from memory "
           "(marked X-Mooring-Stale; writes are refused at once); 0 refuses reads too",
           "5m", nullptr, &Config::stale_reads_max},
    Option{"advertise-http-addr", "MOORING_CP_ADVERTISE_HTTP_ADDR", "advertise_http_addr", Kind::string, "URL",
           "etcd state: where other control planes reach this one's REST API (standbys forward to the leader's)",
           "http(s)://HTTP_ADDR", &Config::advertise_http_addr},
    Option{"advertise-grpc-addr", "MOORING_CP_ADVERTISE_GRPC_ADDR", "advertise_grpc_addr", Kind::string, "HOST:PORT",
           "etcd state: where node agents reach this one's gRPC service (a standby names the leader's)", "GRPC_ADDR",
           &Config::advertise_grpc_addr},
    Option{"keyring-file", "MOORING_CP_KEYRING_FILE", "keyring_file", Kind::string, "FILE",
           "the AES-256 root keys that wrap the data keys sealing secrets in the state; created 0600 with one random "
           "key on the first start, never written after (may be read-only). Back it up with state.db: without it the "
           "stored secrets cannot be read, and a start with a missing or other keyring fails naming the key id and the "
           "file",
           "DATA_DIR/keyring", &Config::keyring_file},
    Option{"http-addr", "MOORING_CP_HTTP_ADDR", "http_addr", Kind::string, "HOST:PORT",
           "REST API listen address (port 0: any)", "127.0.0.1:4700", &Config::http_addr},
    Option{"grpc-addr", "MOORING_CP_GRPC_ADDR", "grpc_addr", Kind::string, "HOST:PORT",
           "node agent RPC listen address (port 0: any)", "127.0.0.1:4701", &Config::grpc_addr},
    Option{"http-max-connections", "MOORING_CP_HTTP_MAX_CONNECTIONS", "http_max_connections", Kind::count, "N",
           "REST API connections in all; at the limit the oldest idle connection is closed to make room, and when none "
           "is idle the new one gets 503 with Retry-After: 1",
           "1024", nullptr, nullptr, nullptr, &Config::http_max_connections},
    Option{"http-max-connections-per-client", "MOORING_CP_HTTP_MAX_CONNECTIONS_PER_CLIENT",
           "http_max_connections_per_client", Kind::count, "N",
           "REST API connections per client address (its own oldest idle connection gives way); behind a proxy every "
           "client shares one address, so raise it there",
           "256", nullptr, nullptr, nullptr, &Config::http_max_connections_per_client},
    Option{"acl", "MOORING_CP_ACL", "acl", Kind::boolean, "",
           "require ACL tokens on the REST API (bootstrap with POST /v1/acl/bootstrap); --acl=false to open it", "true",
           nullptr, nullptr, nullptr, nullptr, &Config::acl},
    Option{"metrics", "MOORING_CP_METRICS", "metrics", Kind::boolean, "",
           "record Prometheus metrics and serve them at GET /v1/metrics (operator:read); --metrics=off records "
           "nothing and answers 404 there",
           "on", nullptr, nullptr, nullptr, nullptr, &Config::metrics},
    Option{"heartbeat-ttl", "MOORING_CP_HEARTBEAT_TTL", "heartbeat_ttl", Kind::positive_duration, "DURATION",
           "a node silent this long is marked down (longer for a fleet past --max-heartbeats-per-second)", "10s",
           nullptr, &Config::heartbeat_ttl},
    Option{"max-heartbeats-per-second", "MOORING_CP_MAX_HEARTBEATS_PER_SECOND", "max_heartbeats_per_second",
           Kind::count, "N",
           "the heartbeats all agents together may send per second. Agents heartbeat every third of the TTL while "
           "the fleet fits (3,333 nodes at the defaults); a larger fleet is asked to heartbeat every nodes/N and its "
           "TTL grows to three such intervals (10,000 nodes: every 10 s, down after 30 s of silence)",
           "1000", nullptr, nullptr, nullptr, &Config::max_heartbeats_per_second},
    Option{"log-level", "MOORING_CP_LOG_LEVEL", "log_level", Kind::level, "LEVEL", "debug|info|warn|error", "info"},
    Option{"log-format", "MOORING_CP_LOG_FORMAT", "log_format", Kind::format, "FORMAT", "text|json", "text"},
    Option{"cors-read-origin", "MOORING_CP_CORS_READ_ORIGINS", "cors_read_origins", Kind::list, "ORIGIN",
           "browser origin whose pages may read the API, for dashboards (flag repeatable; env comma-separated; file "
           "array; * for any)",
           "none", nullptr, nullptr, &Config::cors_read_origins},
    Option{"cors-write-origin", "MOORING_CP_CORS_WRITE_ORIGINS", "cors_write_origins", Kind::list, "ORIGIN",
           "browser origin allowed to write (as above)", "none", nullptr, nullptr, &Config::cors_write_origins},
    Option{"shutdown-grace", "MOORING_CP_SHUTDOWN_GRACE", "shutdown_grace", Kind::duration, "DURATION",
           "time in-flight requests get on SIGTERM", "10s", nullptr, &Config::shutdown_grace},
    Option{"gc-retry-max", "MOORING_CP_GC_RETRY_MAX", "gc_retry_max", Kind::positive_duration, "DURATION",
           "longest wait between attempts of a failing claim release (the first retry comes after 500 ms, then "
           "doubling)",
           "30s", nullptr, &Config::gc_retry_max},
    Option{"gc-sweep-period", "MOORING_CP_GC_SWEEP_PERIOD", "gc_sweep_period", Kind::positive_duration, "DURATION",
           "safety-net sweep for past claims without a worker; the normal path starts a release at the change that "
           "makes a claim past",
           "5m", nullptr, &Config::gc_sweep_period},
    Option{"alloc-gc-threshold", "MOORING_CP_ALLOC_GC_THRESHOLD", "alloc_gc_threshold", Kind::positive_duration,
           "DURATION",
           "a terminal allocation that no volume claim names is deleted after this long (counted from when this "
           "control plane first saw it so), in batches with one AllocationsCollected event each; a late status report "
           "for a deleted allocation is acknowledged and ignored",
           "1h", nullptr, &Config::alloc_gc_threshold},
    Option{"node-gc-threshold", "MOORING_CP_NODE_GC_THRESHOLD", "node_gc_threshold", Kind::positive_duration,
           "DURATION",
           "a node down this long (counted from its down event, so a restart does not reset it) and named by no "
           "volume claim is purged with its plugin instances; its allocations that are not terminal are marked lost "
           "(Nomad's node_gc_threshold)",
           "24h", nullptr, &Config::node_gc_threshold},
    Option{"tls-ca-file", "MOORING_CP_TLS_CA_FILE", "tls_ca_file", Kind::string, "FILE",
           "CA certificate for mutual TLS on the gRPC port (all three --tls-* files, or none): agents must present a "
           "certificate it signed",
           "", &Config::tls_ca_file},
    Option{"tls-cert-file", "MOORING_CP_TLS_CERT_FILE", "tls_cert_file", Kind::string, "FILE",
           "the control plane's certificate (mooring tls cert create -server), for gRPC (re-read when it "
           "changes) and the REST API's HTTPS (re-read on SIGHUP)",
           "", &Config::tls_cert_file},
    Option{"tls-key-file", "MOORING_CP_TLS_KEY_FILE", "tls_key_file", Kind::string, "FILE",
           "the key of --tls-cert-file", "", &Config::tls_key_file},
    Option{"tls-ca-key-file", "MOORING_CP_TLS_CA_KEY_FILE", "tls_ca_key_file", Kind::string, "FILE",
           "the key of --tls-ca-file: node enrollment (POST /v1/node/:id/enroll) and agents' renewals (gRPC "
           "RenewCertificate) sign nodes' CSRs with it, so the CA key never goes to the nodes; checked against the CA "
           "at start (optional; without it enrollment answers 501 and renewal FAILED_PRECONDITION; "
           "docs/node-enrollment.md)",
           "", &Config::tls_ca_key_file},
    Option{"node-cert-ttl", "MOORING_CP_NODE_CERT_TTL", "node_cert_ttl", Kind::positive_duration, "DURATION",
           "how long a node certificate signed by enrollment or renewal lasts; agents renew theirs two thirds in, "
           "over mutual TLS (at least 10s)",
           "168h", nullptr, &Config::node_cert_ttl},
    Option{"audit-log", "MOORING_CP_AUDIT_LOG", "audit_log", Kind::string, "FILE",
           "also append the audit log (one JSON line per write, REST and agent gRPC) here", "<data-dir>/audit.log only",
           &Config::audit_log},
    Option{"http-client-ca-file", "MOORING_CP_HTTP_CLIENT_CA_FILE", "http_client_ca_file", Kind::string, "FILE",
           "REST API clients must also present a certificate this CA signed (optional; needs the TLS files, with "
           "which the REST API serves HTTPS)",
           "", &Config::http_client_ca_file},
    Option{"insecure", "MOORING_CP_INSECURE", "insecure", Kind::boolean, "",
           "plaintext gRPC and HTTP on purpose (anyone who reaches the ports can act as any node); logs a warning. "
           "Without TLS files and without --insecure the control plane refuses to start",
           "false", nullptr, nullptr, nullptr, nullptr, &Config::insecure},
};

const Option* find_flag(std::string_view name) {
  for (const auto& o : kOptions)
    if (o.flag == name) return &o;
  return nullptr;
}

const Option* find_key(std::string_view key) {
  for (const auto& o : kOptions)
    if (!o.key.empty() && o.key == key) return &o;
  return nullptr;
}

std::string qt(std::string_view s) { return json(std::string(s)).dump(); }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

std::optional<std::uint64_t> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(text);
}

// Applies one value; `where` names its source ("--heartbeat-ttl", "MOORING_CP_…", "file key …").
void apply(ControlPlaneConfig& c, const Option& o, const json& value, const std::string& where) {
  if (o.kind == Kind::list) {
    std::vector<std::string> items;
    if (value.is_array()) {
      for (const auto& v : value) {
        if (!v.is_string()) throw Fail{where + ": expected an array of strings, got " + value.dump()};
        items.push_back(v.get<std::string>());
      }
    } else if (value.is_string()) {
      items = split_commas(value.get<std::string>());
    } else {
      throw Fail{where + ": expected a string or an array of strings, got " + value.dump()};
    }
    c.*o.list = std::move(items);
    return;
  }
  if (o.kind == Kind::count) {
    // A number in the file, text from flags and the environment.
    std::optional<std::uint64_t> n;
    if (value.is_number_unsigned()) n = value.get<std::uint64_t>();
    if (value.is_string()) n = parse_count(value.get<std::string>());
    if (!n || *n == 0) throw Fail{where + ": expected a positive integer, got " + value.dump()};
    c.*o.count = static_cast<std::size_t>(*n);
    return;
  }
  if (o.kind == Kind::boolean) {
    // true/false in the file, text from flags and the environment.
    c.*o.on = config::json_bool(value, where);
    return;
  }
  if (!value.is_string()) throw Fail{where + ": expected a string, got " + value.dump()};
  const auto text = value.get<std::string>();
  switch (o.kind) {
    case Kind::string:
      if (text.empty()) throw Fail{where + ": must not be empty"};
      c.*o.text = text;
      return;
    case Kind::duration:
    case Kind::positive_duration: {
      const auto d = http::parse_duration(text);
      if (!d || (o.kind == Kind::positive_duration && d->count() <= 0))
        throw Fail{where + ": expected a " + std::string(o.kind == Kind::positive_duration ? "positive " : "") +
                   "duration like 10s, got " + qt(text)};
      c.*o.span = *d;
      return;
    }
    case Kind::level:
      if (!log::parse_level(text, c.log_level)) throw Fail{where + ": expected debug|info|warn|error, got " + qt(text)};
      return;
    case Kind::format:
      if (!log::parse_format(text, c.log_format)) throw Fail{where + ": expected text|json, got " + qt(text)};
      return;
    case Kind::list:
    case Kind::count:
    case Kind::boolean: return;
  }
}

// The boolean flags: given bare ("--acl", "--insecure") they mean true.
std::set<std::string> switch_names() {
  std::set<std::string> out;
  for (const auto& o : kOptions)
    if (o.kind == Kind::boolean) out.emplace(o.flag);
  return out;
}

// What no single setting shows: the settings that need, or exclude, one another.
void check(const ControlPlaneConfig& c) {
  if (c.data_dir.empty()) throw Fail{"--data-dir (MOORING_CP_DATA_DIR, file key data_dir) is required"};
  const bool etcd = is_shared_state(c.state);
  if (!c.state.empty() && !etcd && c.state != "sqlite://" + c.data_dir + "/state.db" &&
      c.state != "sqlite://" + (std::filesystem::path(c.data_dir) / "state.db").string())
    throw Fail{"--state: expected sqlite://" + c.data_dir + "/state.db or etcd://HOST:PORT[,...][/PREFIX], got " +
               qt(c.state)};
  if (etcd) {
    if (auto o = parse_etcd_url(c.state); !o) throw Fail{"--state: " + o.error()};
  }
  const bool any_etcd_tls = !c.etcd_ca_file.empty() || !c.etcd_cert_file.empty() || !c.etcd_key_file.empty();
  if (any_etcd_tls && !etcd) throw Fail{"--etcd-cacert/--etcd-cert/--etcd-key need --state etcd://..."};
  if (any_etcd_tls && c.etcd_ca_file.empty()) throw Fail{"--etcd-cert/--etcd-key need --etcd-cacert"};
  if (c.etcd_cert_file.empty() != c.etcd_key_file.empty()) throw Fail{"--etcd-cert and --etcd-key go together"};
  if (!config::parse_host_port(c.http_addr)) throw Fail{"http_addr: expected HOST:PORT, got " + qt(c.http_addr)};
  if (!config::parse_host_port(c.grpc_addr)) throw Fail{"grpc_addr: expected HOST:PORT, got " + qt(c.grpc_addr)};
  if (!c.advertise_http_addr.empty() && !c.advertise_http_addr.starts_with("http://") &&
      !c.advertise_http_addr.starts_with("https://"))
    throw Fail{"advertise_http_addr: expected http://HOST:PORT or https://HOST:PORT, got " + qt(c.advertise_http_addr)};
  if (!c.advertise_grpc_addr.empty() && !config::parse_host_port(c.advertise_grpc_addr))
    throw Fail{"advertise_grpc_addr: expected HOST:PORT, got " + qt(c.advertise_grpc_addr)};
  const bool any_tls = !c.tls_ca_file.empty() || !c.tls_cert_file.empty() || !c.tls_key_file.empty();
  const bool all_tls = !c.tls_ca_file.empty() && !c.tls_cert_file.empty() && !c.tls_key_file.empty();
  if (any_tls && !all_tls) throw Fail{"mutual TLS needs all of --tls-ca-file, --tls-cert-file and --tls-key-file"};
  if (any_tls && c.insecure) throw Fail{"--insecure and the --tls-* files exclude each other: choose one"};
  if (!c.tls_ca_key_file.empty() && !all_tls)
    throw Fail{"--tls-ca-key-file needs the --tls-* files (it is the key of --tls-ca-file)"};
  if (c.node_cert_ttl < std::chrono::seconds(10))
    throw Fail{"node_cert_ttl: at least 10s (agents renew two thirds into a certificate's life)"};
  if (!c.http_client_ca_file.empty() && !all_tls)
    throw Fail{"--http-client-ca-file needs the --tls-* files (client certificates are checked over HTTPS)"};
}

}  // namespace

std::variant<ControlPlaneArgs, ControlPlaneConfigError> parse_controlplane_config(
    const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  try {
    ControlPlaneArgs out;
    if (config::wants_help(argv)) {
      out.help = true;
      return out;
    }
    if (config::wants_markdown(argv)) {
      out.help_markdown = true;
      return out;
    }
    // Flags are collected first (the config file they may name is read before they apply).
    std::vector<std::pair<const Option*, std::string>> flags;
    std::string config_file;
    std::map<const Option*, std::vector<std::string>> lists;
    for (auto& [name, value] : config::split_flags(argv, switch_names())) {
      const Option* o = find_flag(name);
      if (!o) throw Fail{"unknown flag --" + name + " (see --help)"};
      if (o->flag == "config")
        config_file = value;
      else if (o->kind == Kind::list)
        lists[o].push_back(value);
      else
        flags.emplace_back(o, value);
    }
    if (config_file.empty()) {
      if (const auto it = env.find("MOORING_CP_CONFIG"); it != env.end()) config_file = it->second;
    }

    ControlPlaneConfig& c = out.config;
    if (!config_file.empty()) {
      c.config_file = config_file;
      const json file = config::read_file(config_file);
      for (const auto& [key, value] : file.items()) {
        const Option* o = find_key(key);
        if (!o) throw Fail{"config file " + qt(config_file) + ": unknown key " + qt(key)};
        apply(c, *o, value, "config file " + qt(config_file) + ": " + key);
      }
    }
    for (const auto& o : kOptions) {
      if (o.flag == "config") continue;
      if (const auto it = env.find(std::string(o.env)); it != env.end()) apply(c, o, it->second, std::string(o.env));
    }
    for (const auto& [o, value] : flags) apply(c, *o, value, "--" + std::string(o->flag));
    for (const auto& [o, values] : lists) apply(c, *o, json(values), "--" + std::string(o->flag));

    check(c);
    return out;
  } catch (const Fail& f) {
    return ControlPlaneConfigError{f.message};
  } catch (const config::Error& e) {
    return ControlPlaneConfigError{e.message};
  }
}

std::string controlplane_config_help() {
  return config::help_text(
      "Usage: mooring-controlplane --data-dir DIR [flags]\n\n"
      "Keeps Mooring's state and serves the REST API and the node agents' gRPC service.\n"
      "Settings come from flags, then MOORING_CP_* environment variables, then the config file.\n",
      std::vector<config::Doc>(kOptions.begin(), kOptions.end()));
}

std::string controlplane_config_markdown() {
  return config::markdown_page(
      {.title = "mooring-controlplane",
       .generated_by = "mooring-controlplane --help-markdown",
       .intro = "The control plane keeps Mooring's state and serves the REST API and the node agents' gRPC service.\n"
                "Each setting is a flag, a `MOORING_CP_*` environment variable and a key of the JSON file named by\n"
                "`--config` (or `MOORING_CP_CONFIG`). Flags override the environment, which overrides the file. A bad\n"
                "or unknown value is an error that names the flag, variable or key. `mooring-controlplane --help`\n"
                "prints the same list. State in etcd and the leader's lease: "
                "[high-availability.md](../high-availability.md);\n"
                "TLS, ACLs and the keyring: [security.md](../security.md)."},
      std::vector<config::Doc>(kOptions.begin(), kOptions.end()));
}

}  // namespace mooring::controlplane
