// Namespaces: list, read, apply (create or update its description and quota), delete. Reads show
// a namespace to a caller who may act in it or read the operator area; writes need operator:write
// (routes.cpp). A delete is refused while the namespace holds volumes or live allocations.
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

using domain::in_quotes;
using json = nlohmann::json;

namespace {

// "default" is listed and read even before it has a record.
NamespaceRecord shown(const StateStore& store, const std::string& name) {
  if (const auto* r = store.namespace_record(name)) return *r;
  return NamespaceRecord{.name = name, .description = "the default namespace"};
}

bool path_namespace(const http::Request& req, std::string& name, http::Response& err) {
  name = std::string(req.params.at("name"));
  if (auto st = domain::validate_namespace(name); !st) {
    err = bad_request("path parameter \"name\": " + st.error());
    return false;
  }
  return true;
}

json usage_json(const namespaces::Usage& u) {
  return {{"Volumes", u.volumes}, {"CapacityBytes", u.capacity_bytes}, {"RunningAllocations", u.running_allocations}};
}

}  // namespace

bool may_read_namespace(const acl::Acl& acl, std::string_view name) {
  return acl.is_management() || acl.level(acl::Area::operator_) >= acl::Level::read || !acl.capabilities(name).empty();
}

http::Response list_namespaces(Context& ctx, const http::Request&) {
  json out = json::array();
  if (!ctx.store.namespace_record(std::string(domain::kDefaultNamespace)))
    out.push_back(to_json(shown(ctx.store, std::string(domain::kDefaultNamespace))));
  for (const auto& [name, r] : ctx.store.namespace_records()) out.push_back(to_json(r));
  return json_ok(out);  // the API keeps what the caller may read (api.cpp, may_read_namespace)
}

http::Response get_namespace(Context& ctx, const http::Request& req) {
  std::string name;
  http::Response err;
  if (!path_namespace(req, name, err)) return err;
  if (ctx.acl_enabled) {
    auto caller = request_caller(ctx, req);
    if (!caller) return http::error_response(401, caller.error());
    if (!may_read_namespace(caller->acl, name))
      return http::error_response(403, "permission denied: token " + json(caller->name).dump() +
                                           " lacks a capability in namespace " + in_quotes(name) +
                                           " (or operator:read) to read it");
  }
  if (!namespaces::exists(ctx.store, name)) return http::error_response(404, "namespace not found: " + name);
  auto out = to_json(shown(ctx.store, name));
  out["Usage"] = usage_json(namespaces::usage(ctx.store, name));
  return json_ok(out);
}

http::Response put_namespace(Context& ctx, const http::Request& req) {
  std::string name;
  http::Response err;
  if (!path_namespace(req, name, err)) return err;
  json body;
  if (req.body.empty())
    body = json::object();  // `mooring namespace apply NAME`: a namespace with no quota
  else if (!parse_body(req, body, err))
    return err;
  auto record = namespace_record_from_request(name, body);
  if (!record) return bad_request("namespace " + in_quotes(name) + ": " + record.error());
  const bool existed = ctx.store.namespace_record(name) != nullptr;
  Batch batch;
  batch.add_event({.topic = "Namespace",
                   .type = existed ? "NamespaceUpdated" : "NamespaceCreated",
                   .ns = name,
                   .key = name,
                   .message = std::string(existed ? "updated" : "created") + " namespace " + in_quotes(name)});
  batch.put(std::move(*record));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("apply namespace " + in_quotes(name), index.error());
  auto res = json_ok(to_json(*ctx.store.namespace_record(name)));
  res.index = *index;
  return res;
}

http::Response delete_namespace(Context& ctx, const http::Request& req) {
  std::string name;
  http::Response err;
  if (!path_namespace(req, name, err)) return err;
  if (auto refusal = namespaces::delete_refusal(ctx.store, name)) return http::error_response(409, *refusal);
  if (!ctx.store.namespace_record(name)) return http::error_response(404, "namespace not found: " + name);
  Batch batch;
  batch.add_event({.topic = "Namespace",
                   .type = "NamespaceDeleted",
                   .ns = name,
                   .key = name,
                   .message = "deleted namespace " + in_quotes(name)});
  batch.erase_namespace(name);
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("delete namespace " + in_quotes(name), index.error());
  auto res = json_ok(json{{"Name", name}, {"Deleted", true}});
  res.index = *index;
  return res;
}

}  // namespace mooring::controlplane::api
