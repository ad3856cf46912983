// `mooring plugin status` and `mooring node status`: read-only views of what node agents report;
// `mooring node purge`, and `mooring node intro create` (a one-time introduction token that
// enrolls one node: `mooring tls cert request -intro-token-file`).
#include <algorithm>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/lookup.hpp"
#include "cli/table.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

std::string ratio(const json& obj, const char* a, const char* b) { return field(obj, a) + "/" + field(obj, b); }

// Controllers/Nodes: node id -> instance (Nomad's map shape); an array of instances also works.
std::string instances_table(const json& instances, bool node_side, std::chrono::system_clock::time_point now) {
  std::vector<std::string> headers = {"Node ID", "Healthy", "Description"};
  if (node_side) headers.insert(headers.end(), {"Max Volumes", "Stages", "Topology"});
  headers.push_back("Updated");
  Table t(headers);
  for (auto it = instances.begin(); it != instances.end(); ++it) {
    const json& i = *it;
    std::string node = instances.is_object() ? it.key() : field(i, "NodeID");
    std::vector<std::string> row = {node, field(i, "Healthy"), field(i, "HealthDescription")};
    if (node_side) {
      json info = i.value("NodeInfo", json());
      std::int64_t max = field_int(info, "MaxVolumes");
      json topo = info.is_object() ? info.value("AccessibleTopology", json()) : json();
      row.insert(row.end(), {max > 0 ? std::to_string(max) : "unlimited", field(info, "RequiresNodeStageVolume"),
                             topo.is_object() ? map_text(topo.value("Segments", json())) : "<none>"});
    }
    row.push_back(time_text(field(i, "UpdateTime"), now));
    t.add_row(std::move(row));
  }
  return t.empty() ? "None\n" : t.render();
}

std::string plugin_table(const json& plugins) {
  Table t({"ID", "Provider", "Controllers Healthy/Expected", "Nodes Healthy/Expected"});
  for (const auto& p : plugins)
    t.add_row({field(p, "ID"), field(p, "Provider"), ratio(p, "ControllersHealthy", "ControllersExpected"),
               ratio(p, "NodesHealthy", "NodesExpected")});
  return t.render();
}

std::string node_table(const json& nodes) {
  auto now = std::chrono::system_clock::now();
  Table t({"ID", "Name", "Address", "Status", "Eligibility", "Drain", "Last Heartbeat"});
  for (const auto& n : nodes)
    t.add_row({field(n, "ID"), field(n, "Name"), field(n, "Address"), field(n, "Status"),
               field(n, "SchedulingEligibility"), field(n, "Drain"), time_text(field(n, "LastHeartbeat"), now)});
  return t.render();
}

const ObjectKind kPlugin{"plugin", "plugins", "/v1/plugin/csi/", "/v1/plugins", "mooring plugin status", plugin_table};
const ObjectKind kNode{"node", "nodes", "/v1/node/", "/v1/nodes", "mooring node status", node_table};

int plugin_status(Context& ctx, const Invocation& inv) {
  if (inv.args.empty()) {
    auto r = ctx.call("GET", "/v1/plugins");
    if (!r) return kExitError;
    if (ctx.json()) return ctx.print_json(r->body), kExitOk;
    if (!r->body.is_array() || r->body.empty()) {
      ctx.out() << "No CSI plugins\n";
      return kExitOk;
    }
    ctx.out() << plugin_table(r->body);
    return kExitOk;
  }
  auto r = get_by_id_or_prefix(ctx, kPlugin, inv.args[0]);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const json& p = r->body;
  KeyValues kv;
  kv.add("ID", field(p, "ID"));
  kv.add("Provider", field(p, "Provider"));
  kv.add("Version", field(p, "Version"));
  kv.add("Controller Required", field(p, "ControllerRequired"));
  kv.add("Controllers Healthy", ratio(p, "ControllersHealthy", "ControllersExpected"));
  kv.add("Nodes Healthy", ratio(p, "NodesHealthy", "NodesExpected"));
  auto now = std::chrono::system_clock::now();
  ctx.out() << kv.render() << "\nControllers\n"
            << instances_table(p.value("Controllers", json::object()), false, now) << "\nNodes\n"
            << instances_table(p.value("Nodes", json::object()), true, now);
  return kExitOk;
}

int node_status(Context& ctx, const Invocation& inv) {
  auto now = std::chrono::system_clock::now();
  if (inv.args.empty()) {
    auto r = ctx.call("GET", "/v1/nodes");
    if (!r) return kExitError;
    if (ctx.json()) return ctx.print_json(r->body), kExitOk;
    if (!r->body.is_array() || r->body.empty()) {
      ctx.out() << "No nodes\n";
      return kExitOk;
    }
    ctx.out() << node_table(r->body);
    return kExitOk;
  }
  auto r = get_by_id_or_prefix(ctx, kNode, inv.args[0]);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const json& n = r->body;
  KeyValues kv;
  kv.add("ID", field(n, "ID"));
  kv.add("Name", field(n, "Name"));
  kv.add("Address", field(n, "Address"));
  kv.add("Status", field(n, "Status"));
  kv.add("Last Heartbeat", time_text(field(n, "LastHeartbeat"), now));
  kv.add("Eligibility", field(n, "SchedulingEligibility"));
  if (const json drain = n.value("LastDrain", json()); drain.is_object())
    kv.add("Drain", field(drain, "Status") + ", " + field(drain, "AllocationsLeft") + " allocation(s) left" +
                        (field(drain, "Message").empty() ? "" : ": " + field(drain, "Message")));
  if (const auto expires = field(n, "CertificateExpires"); !expires.empty()) {
    // The agent's mutual-TLS certificate: a warning a month ahead, as the services log it.
    auto when = parse_rfc3339(expires);
    const bool soon = when && *when - now < std::chrono::hours(24 * 30);
    kv.add("Certificate Expires",
           time_text(expires, now) + (soon ? "  (renew it: mooring tls cert create -agent)" : ""));
  }
  kv.add("Attributes", map_text(n.value("Attributes", json())));
  ctx.out() << kv.render();

  ctx.out() << "\nCSI Plugins\n";
  Table plugins({"Plugin ID", "Type", "Healthy", "Description", "Provider", "Version"});
  // A split plugin's controller instance (SplitControllers) is a row of its own beside its node instance.
  for (const char* key : {"Plugins", "SplitControllers"}) {
    json ps = n.value(key, json::object());
    for (auto it = ps.begin(); it != ps.end(); ++it)
      plugins.add_row({ps.is_object() ? it.key() : field(*it, "PluginID"), field(*it, "Type"), field(*it, "Healthy"),
                       field(*it, "HealthDescription"), field(*it, "Provider"), field(*it, "Version")});
  }
  ctx.out() << (plugins.empty() ? std::string("None\n") : plugins.render());

  json events = n.value("Events", json::array());
  if (events.is_array() && !events.empty()) {
    ctx.out() << "\nRecent Events\n";
    Table t({"Time", "Subsystem", "Message"});
    // Newest first and at most ten, as `nomad node status` does.
    std::size_t shown = 0;
    for (auto it = events.rbegin(); it != events.rend() && shown < 10; ++it, ++shown)
      t.add_row({field(*it, "Timestamp"), field(*it, "Subsystem"), field(*it, "Message")});
    ctx.out() << t.render();
  }
  return kExitOk;
}

int node_purge(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  auto r = ctx.call("DELETE", "/v1/node/" + url_encode(id) + (inv.enabled("force") ? "?force=true" : ""));
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Node \"" << id << "\" purged";
  if (const auto lost = r->body.is_object() ? r->body.value("LostAllocations", 0) : 0; lost > 0)
    ctx.out() << "; " << lost << " of its allocations marked lost";
  ctx.out() << "\n";
  return kExitOk;
}

int node_intro_create(Context& ctx, const Invocation& inv) {
  const auto node_id = inv.flag("node-id");
  if (!node_id || node_id->empty()) {
    ctx.err() << "Error: -node-id ID is required (the node the token may enroll)\n";
    return kExitUsage;
  }
  json body = json::object();
  if (auto ttl = inv.flag("ttl")) body["TTL"] = *ttl;
  auto r = ctx.call("POST", "/v1/node/" + url_encode(*node_id) + "/intro", body);
  if (!r) return kExitError;
  const auto secret = r->body.value("SecretID", std::string());
  // -out: the secret goes to a 0600 file only, never to the terminal or a log.
  if (auto out = inv.flag("out")) {
    if (auto w = tls::replace_file(*out, secret + "\n"); !w) return ctx.fail(w.error());
    r->body.erase("SecretID");
  }
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Introduction token " << field(r->body, "AccessorID") << " for node \"" << *node_id << "\", expires "
            << field(r->body, "ExpirationTime") << "; it enrolls the node once\n";
  if (auto out = inv.flag("out"))
    ctx.out() << "Written to " << *out << "\n";
  else
    ctx.out() << secret << "\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> plugin_commands() {
  return {{.words = {"plugin", "status"},
           .arguments = "[ID]",
           .min_args = 0,
           .max_args = 1,
           .summary = "List CSI plugins, or show one plugin's controller and node instances",
           .help = "ID may be a unique prefix of the ID; one that matches several plugins lists them.",
           .run = plugin_status}};
}

std::vector<CommandSpec> node_commands() {
  return {{.words = {"node", "status"},
           .arguments = "[ID]",
           .min_args = 0,
           .max_args = 1,
           .summary = "List nodes, or show one node with its plugins and recent events",
           .help = "ID may be a unique prefix of the ID; one that matches several nodes lists them.",
           .run = node_status},
          {.words = {"node", "purge"},
           .arguments = "ID",
           .min_args = 1,
           .max_args = 1,
           .flags = {{.name = "force", .help = "a live node too (needs a management token)"}},
           .summary = "Remove a node with its plugin instances and revoke its certificates",
           .help = "Removes the node record and its plugin instances, marks its allocations lost, and\n"
                   "revokes the node's identity: certificates issued until now stop acting, so the node\n"
                   "enrolls again. Refused while a volume claim names the node, and while the node is\n"
                   "live unless -force (with a management token).",
           .run = node_purge},
          {.words = {"node", "intro", "create"},
           .flags = {{.name = "node-id", .takes_value = true, .value_name = "ID", .help = "the node it may enroll"},
                     {.name = "ttl",
                      .takes_value = true,
                      .value_name = "DURATION",
                      .help = "how long it may be used (default 1h, at most 168h)"},
                     {.name = "out",
                      .takes_value = true,
                      .value_name = "FILE",
                      .help = "write the token to FILE (0600) instead of printing it"}},
           .summary = "Make a one-time introduction token that enrolls one node",
           .help = "POST /v1/node/ID/intro (node:write): a token that enrolls node ID once, before it\n"
                   "expires (mooring tls cert request -intro-token-file). Kept only as its hash.",
           .run = node_intro_create}};
}

}  // namespace mooring::cli
