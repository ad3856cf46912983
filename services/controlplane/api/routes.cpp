#include "services/controlplane/api/routes.hpp"

#include <initializer_list>
#include <string_view>

#include "services/controlplane/api/openapi_document.hpp"

namespace mooring::controlplane::api {

namespace {

// What a few routes add to their need.
struct Extra {
  ExtraNeeds needs = nullptr;
  bool keep_answer = true;
  AuditObject object = nullptr;  // the audit line's object when the path names none
};

bool forced(const http::Request& req) { return query_flag_set(req, "force") || query_flag_set(req, "purge"); }

// A forced volume deregistration: operator:write too.
std::vector<ExtraNeed> forced_operator(const StateStore&, const http::Request& req) {
  if (!forced(req)) return {};
  return {{acl::Need::on(acl::Area::operator_, acl::Level::write), ""}};
}

// A forced purge of a live node: a management token too.
std::vector<ExtraNeed> forced_management(const StateStore&, const http::Request& req) {
  if (!forced(req)) return {};
  return {{acl::Need::management(), ""}};
}

// Plugins belong to the cluster: a plugin instance serves every namespace's volumes and receives
// their secrets, so running one is a plugin-level right, not a namespace's.
constexpr std::string_view kDeploysPlugin = "Task.CSIPlugin runs a plugin that serves every namespace";
const ExtraNeed kPluginWrite{acl::Need::on(acl::Area::plugin, acl::Level::write), kDeploysPlugin};

std::vector<ExtraNeed> submit_needs(const StateStore&, const http::Request& req) {
  std::vector<ExtraNeed> out;
  if (requests_volumes(req)) out.push_back({acl::Need::cap(acl::Capability::csi_mount_volume), ""});
  if (deploys_plugin(req)) out.push_back(kPluginWrite);
  return out;
}

// Only plugin allocations update in place: the one named, or the body's task, makes it a plugin's.
std::vector<ExtraNeed> update_needs(const StateStore& store, const http::Request& req) {
  if (!deploys_plugin(req) && !names_plugin_allocation(store, req)) return {};
  return {kPluginWrite};
}

std::vector<ExtraNeed> stop_needs(const StateStore& store, const http::Request& req) {
  if (!names_plugin_allocation(store, req)) return {};
  return {{acl::Need::on(acl::Area::plugin, acl::Level::write), "it runs a plugin that serves every namespace"}};
}

// The route table. Each route is registered once and names what it needs; a namespace
// capability is checked in the namespace the request acts in.
class RouteTable {
 public:
  using Need = acl::Need;
  using Cap = acl::Capability;
  using Area = acl::Area;
  using Level = acl::Level;

  RouteTable() {
    add_volume_routes();
    add_cluster_routes();
    add_acl_routes();
    add_namespace_routes();
  }
  std::vector<RouteEntry> entries;

 private:
  void get(std::string_view path, Need need, Endpoint e, std::optional<Table> watch = std::nullopt) {
    entries.push_back({"GET", std::string(path), Route{e, watch, need}});
    entries.back().route.pattern = path;
  }
  // A list that may span namespaces (?namespace=*).
  void list(std::string_view path, Need need, Endpoint e, Table watch) {
    get(path, need, e, watch);
    entries.back().route.any_namespace = true;
  }
  // A plugin's own listing: it may span namespaces too, and the volumes room keeps the items the
  // caller may see (acl/plugin_objects.hpp). No blocking queries: the answer is the plugin's.
  void plugin_list(std::string_view path, Endpoint e) {
    get(path, Need::cap(Cap::csi_list_volume), e);
    entries.back().route.any_namespace = true;
  }
  void write(std::initializer_list<const char*> methods, std::string_view path, Need need, Endpoint e, Extra x = {}) {
    for (const char* m : methods) {
      entries.push_back({m, std::string(path), Route{e, {}, need, x.needs, x.keep_answer}});
      entries.back().route.pattern = path;
      entries.back().route.object = x.object;
    }
  }

  void add_volume_routes() {
    list("/v1/volumes", Need::cap(Cap::csi_list_volume), at_once<list_volumes>, Table::volumes);
    write({"PUT", "POST"}, "/v1/volumes", Need::cap(Cap::csi_write_volume), register_volumes,
          {.object = answered_volumes});
    get("/v1/volume/csi/:id", Need::cap(Cap::csi_read_volume), get_volume, Table::volumes);
    entries.back().route.watch_index = volume_watch_index;
    write({"PUT", "POST"}, "/v1/volume/csi/:id", Need::cap(Cap::csi_write_volume), register_volume);
    write({"DELETE"}, "/v1/volume/csi/:id", Need::cap(Cap::csi_write_volume), deregister_volume,
          {.needs = forced_operator});
    write({"PUT", "POST"}, "/v1/volume/csi/:id/create", Need::cap(Cap::csi_write_volume), create_volume);
    write({"DELETE"}, "/v1/volume/csi/:id/delete", Need::cap(Cap::csi_write_volume), delete_volume);
    write({"PUT", "POST"}, "/v1/volume/csi/:id/modify", Need::cap(Cap::csi_write_volume), modify_volume);
    write({"DELETE"}, "/v1/volume/csi/:id/detach", Need::on(Area::operator_, Level::write), detach_volume);
    list("/v1/volumes/claims", Need::cap(Cap::csi_list_volume), at_once<list_claims>, Table::volumes);
    get("/v1/volumes/claim/:id", Need::cap(Cap::csi_read_volume), at_once<get_claim>, Table::volumes);
    write({"DELETE"}, "/v1/volumes/claim/:id", Need::on(Area::operator_, Level::write), at_once<release_claim>);
    plugin_list("/v1/volumes/external", list_external_volumes);
    plugin_list("/v1/volumes/snapshot", list_snapshots);
    write({"PUT", "POST"}, "/v1/volumes/snapshot", Need::cap(Cap::csi_write_volume), create_snapshots,
          {.object = answered_snapshots});
    write({"DELETE"}, "/v1/volumes/snapshot", Need::cap(Cap::csi_write_volume), delete_snapshot,
          {.object = queried_snapshot});
    plugin_list("/v1/volumes/group-snapshot", list_group_snapshots);
    get("/v1/volumes/group-snapshot/:id", Need::cap(Cap::csi_read_volume), get_group_snapshot);
    write({"PUT", "POST"}, "/v1/volumes/group-snapshot", Need::cap(Cap::csi_write_volume), create_group_snapshot,
          {.object = answered_group_snapshot});
    write({"DELETE"}, "/v1/volumes/group-snapshot", Need::cap(Cap::csi_write_volume), delete_group_snapshot,
          {.object = queried_group_snapshot});
  }

  void add_cluster_routes() {
    get("/v1/plugins", Need::on(Area::plugin, Level::list), at_once<list_plugins>, Table::plugins);
    get("/v1/plugin/csi/:id", Need::on(Area::plugin, Level::read), at_once<get_plugin>, Table::plugins);
    get("/v1/nodes", Need::on(Area::node, Level::read), at_once<list_nodes>, Table::nodes);
    get("/v1/node/:id", Need::on(Area::node, Level::read), at_once<get_node>, Table::nodes);
    // Purging a live node (?force=true) also needs a management token (nodes/node_purge.hpp).
    write({"DELETE"}, "/v1/node/:id", Need::on(Area::node, Level::write), at_once<purge_node>,
          {.needs = forced_management});
    write({"PUT", "POST"}, "/v1/node/:id/eligibility", Need::on(Area::node, Level::write),
          at_once<set_node_eligibility>);
    write({"PUT", "POST"}, "/v1/node/:id/drain", Need::on(Area::node, Level::write), at_once<drain_node>);
    get("/v1/node/:id/identity", Need::on(Area::node, Level::read), at_once<get_node_identity>, Table::node_identities);
    // One-time introduction tokens: the answer carries the SecretID, so it is never kept for a retry.
    write({"POST", "PUT"}, "/v1/node/:id/intro", Need::on(Area::node, Level::write), at_once<create_node_introduction>,
          {.keep_answer = false});
    // Node enrollment: the credential is the body's introduction token, or a management token;
    // the endpoint checks either (nodes/enrollment.hpp), so no ACL token is asked for here.
    write({"POST", "PUT"}, "/v1/node/:id/enroll", Need::anyone(), at_once<enroll_node>, {.object = enrolled_node});
    list("/v1/allocations", Need::cap(Cap::list_allocs), at_once<list_allocations>, Table::allocations);
    // Volumes need csi-mount-volume too; a Task.CSIPlugin (a plugin serves every namespace) plugin:write.
    write({"POST", "PUT"}, "/v1/allocations", Need::cap(Cap::submit_alloc), at_once<submit_allocation>,
          {.needs = submit_needs, .object = answered_id});
    get("/v1/allocation/:id", Need::cap(Cap::read_alloc), at_once<get_allocation>, Table::allocations);
    entries.back().route.watch_index = allocation_watch_index;
    // Stopping or updating a plugin allocation changes a plugin that serves every namespace: plugin:write too.
    write({"POST", "PUT"}, "/v1/allocation/:id/stop", Need::cap(Cap::alloc_lifecycle), at_once<stop_allocation>,
          {.needs = stop_needs});
    write({"PUT"}, "/v1/allocation/:id", Need::cap(Cap::submit_alloc), at_once<update_allocation>,
          {.needs = update_needs});
    list("/v1/events", Need::filtered(), at_once<list_events>, Table::events);
    // The same events as one long-lived response; each event is filtered as /v1/events filters.
    entries.push_back({"GET", "/v1/event/stream",
                       Route{.endpoint = nullptr,
                             .need = Need::filtered(),
                             .any_namespace = true,
                             .pattern = "/v1/event/stream",
                             .event_stream = true}});
    get("/v1/status/health", Need::anyone(), at_once<health>);
    get("/v1/status/ready", Need::anyone(), at_once<ready>);
    // The dashboard's static files: no data, so no capability (its API calls carry the token).
    get("/", Need::anyone(), at_once<serve_ui>);
    get("/ui", Need::anyone(), at_once<serve_ui>);
    get("/ui/:file", Need::anyone(), at_once<serve_ui>);
    // The API's contract (docs/api/openapi.yaml) is public, as the dashboard's files are.
    get("/v1/openapi.json", Need::anyone(), at_once<serve_openapi>);
    // Rotating the key that seals every stored secret is for management tokens only.
    write({"PUT", "POST"}, "/v1/operator/keyring/rotate", Need::management(), rotate_keyring, {.object = answered_key});
    // Prometheus scrapes: operator:read (the anonymous policy may grant it to a scraper without a token).
    get("/v1/metrics", Need::on(Area::operator_, Level::read), at_once<get_metrics>);
  }

  // Listed and read by whoever may act in them (api.cpp keeps the list's items the caller may
  // read); applying and deleting one is the operator's.
  void add_namespace_routes() {
    get("/v1/namespaces", Need::filtered(), at_once<list_namespaces>, Table::namespaces);
    get("/v1/namespace/:name", Need::filtered(), at_once<get_namespace>);
    write({"PUT", "POST"}, "/v1/namespace/:name", Need::on(Area::operator_, Level::write), at_once<put_namespace>);
    write({"DELETE"}, "/v1/namespace/:name", Need::on(Area::operator_, Level::write), at_once<delete_namespace>);
  }

  void add_acl_routes() {
    // Bootstrap needs no token (there is none yet) and works once.
    write({"POST", "PUT"}, "/v1/acl/bootstrap", Need::anyone(), at_once<acl_bootstrap>,
          {.keep_answer = false, .object = answered_accessor});
    get("/v1/acl/policies", Need::management(), at_once<list_acl_policies>, Table::acl_policies);
    get("/v1/acl/policy/:name", Need::management(), at_once<get_acl_policy>, Table::acl_policies);
    write({"PUT", "POST"}, "/v1/acl/policy/:name", Need::management(), at_once<put_acl_policy>);
    write({"DELETE"}, "/v1/acl/policy/:name", Need::management(), at_once<delete_acl_policy>);
    write({"PUT", "POST"}, "/v1/acl/token", Need::management(), at_once<create_acl_token>,
          {.keep_answer = false, .object = answered_accessor});
    get("/v1/acl/tokens", Need::management(), at_once<list_acl_tokens>, Table::acl_tokens);
    get("/v1/acl/token/self", Need::any_token(), at_once<acl_token_self>);  // before :accessor
    get("/v1/acl/token/:accessor", Need::management(), at_once<get_acl_token>, Table::acl_tokens);
    write({"DELETE"}, "/v1/acl/token/:accessor", Need::management(), at_once<delete_acl_token>);
  }
};

}  // namespace

const std::vector<RouteEntry>& route_entries() {
  static const std::vector<RouteEntry> entries = RouteTable().entries;
  return entries;
}

}  // namespace mooring::controlplane::api
