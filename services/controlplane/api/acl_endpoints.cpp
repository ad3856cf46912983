// The ACL endpoints: bootstrap, policies and tokens (Nomad's /v1/acl shapes). Translation only:
// the rules are the acl room's, the records the state store's. A SecretID leaves the control
// plane once, in the answer that created it; nothing here logs one.
#include "services/controlplane/acl/secret.hpp"
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/volumes/results.hpp"

namespace mooring::controlplane::api {

namespace {

using nlohmann::json;

std::optional<http::Response> acl_disabled(const Context& ctx) {
  if (ctx.acl_enabled) return std::nullopt;
  return bad_request("ACLs are disabled (start the control plane with --acl)");
}

// A fresh AccessorID and SecretID for `t`; the SecretID is returned, its hash kept in `t`.
std::string issue(const Context& ctx, acl::Token& t) {
  do t.accessor_id = acl::random_uuid();
  while (ctx.store.acl_token(t.accessor_id));
  auto secret = acl::random_uuid();
  t.secret_hash = acl::secret_hash(secret);
  return secret;
}

http::Response created(Context& ctx, acl::Token t, const std::string& secret, const char* what) {
  Batch batch;
  batch.put(t);
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed(what, index.error());
  const auto* kept = ctx.store.acl_token(t.accessor_id);
  ctx.log.info(what, {{"accessor_id", t.accessor_id}, {"name", t.name}});
  auto res = json_ok(acl::to_api_json(kept ? *kept : t, secret));
  res.index = *index;
  return res;
}

// A deletion's answer: an empty object at the index of its commit.
http::Response erased(Context& ctx, Batch batch, const std::string& what) {
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed(what, index.error());
  auto res = json_ok(json::object());
  res.index = *index;
  return res;
}

}  // namespace

std::string request_secret(const http::Request& req) {
  for (const char* name : {"x-mooring-token", "x-nomad-token"})
    if (auto v = req.header(name); !v.empty()) return std::string(v);
  auto auth = req.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() > kBearer.size() && auth.substr(0, kBearer.size()) == kBearer)
    return std::string(auth.substr(kBearer.size()));
  return {};
}

bool is_management_request(Context& ctx, const http::Request& req) {
  if (!ctx.acl_enabled) return false;
  const auto c = request_caller(ctx, req);
  return c && c->acl.is_management();
}

domain::Expected<Caller> request_caller(Context& ctx, const http::Request& req) {
  const auto secret = request_secret(req);
  Caller c;
  if (secret.empty()) {
    const auto* anonymous = ctx.store.acl_policy("anonymous");
    c.name = "anonymous";
    c.acl = acl::Acl::from_policies(anonymous ? std::vector{anonymous} : std::vector<const acl::Policy*>{});
    return c;
  }
  const auto* t = ctx.store.acl_token_by_secret_hash(acl::secret_hash(secret));
  if (!t) return domain::error("ACL token not found");
  if (acl::expired(*t, domain::now())) return domain::error("ACL token expired");
  c.name = t->name;
  c.accessor = t->accessor_id;
  if (t->type == acl::TokenType::management) {
    c.acl = acl::Acl::management();
    return c;
  }
  std::vector<const acl::Policy*> policies;
  for (const auto& name : t->policies)
    if (const auto* p = ctx.store.acl_policy(name)) policies.push_back(p);
  c.acl = acl::Acl::from_policies(policies);
  return c;
}

volumes::Asker request_asker(Context& ctx, const http::Request& req) {
  if (!ctx.acl_enabled) return volumes::Asker::unrestricted(request_namespace(req));
  auto c = request_caller(ctx, req);  // the route's check found it valid: an error here grants nothing
  if (!c) return {.acl = {}, .token = "unknown", .ns = request_namespace(req)};
  return {.acl = std::move(c->acl), .token = std::move(c->name), .ns = request_namespace(req)};
}

http::Response acl_bootstrap(Context& ctx, const http::Request&) {
  if (auto off = acl_disabled(ctx)) return *off;
  if (ctx.store.acl_bootstrapped())
    return bad_request("ACL bootstrap already done: the first management token was issued (create more with it)");
  acl::Token t;
  t.name = "Bootstrap Token";
  t.type = acl::TokenType::management;
  t.create_time = domain::now();
  auto secret = issue(ctx, t);
  return created(ctx, std::move(t), secret, "acl bootstrap token created");
}

http::Response put_acl_policy(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  const auto name = req.params.at("name");
  auto policy = acl::parse_policy(body, name);
  if (!policy) return bad_request(policy.error());
  // A rule for one namespace (not a glob) names one that exists: a typo would grant nothing, silently.
  for (const auto& [pattern, rule] : policy->namespaces)
    if (pattern.find('*') == std::string::npos)
      if (auto no = namespaces::unknown(ctx.store, pattern))
        return bad_request("ACL policy \"" + name + "\": field \"Rules.Namespace." + pattern + "\": " + *no);
  Batch batch;
  batch.put(std::move(*policy));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("put ACL policy \"" + name + "\"", index.error());
  auto res = json_ok(acl::to_json(*ctx.store.acl_policy(name)));
  res.index = *index;
  return res;
}

http::Response list_acl_policies(Context& ctx, const http::Request&) {
  if (auto off = acl_disabled(ctx)) return *off;
  json out = json::array();
  for (const auto& [name, p] : ctx.store.acl_policies())
    out.push_back({{"Name", p.name},
                   {"Description", p.description},
                   {"CreateIndex", p.create_index},
                   {"ModifyIndex", p.modify_index}});
  return json_ok(out);
}

http::Response get_acl_policy(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  const auto name = req.params.at("name");
  const auto* p = ctx.store.acl_policy(name);
  if (!p) return not_found("ACL policy", name);
  return json_ok(acl::to_json(*p));
}

http::Response delete_acl_policy(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  const auto name = req.params.at("name");
  if (!ctx.store.acl_policy(name)) return not_found("ACL policy", name);
  Batch batch;
  batch.erase_acl_policy(name);
  return erased(ctx, std::move(batch), "delete ACL policy \"" + name + "\"");
}

http::Response create_acl_token(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  auto t = acl::parse_token_request(body, domain::now());
  if (!t) return bad_request(t.error());
  for (const auto& p : t->policies)
    if (!ctx.store.acl_policy(p))
      return bad_request("token " + json(t->name).dump() + ": Policies: no such policy \"" + p + "\"");
  auto secret = issue(ctx, *t);
  return created(ctx, std::move(*t), secret, "acl token created");
}

http::Response list_acl_tokens(Context& ctx, const http::Request&) {
  if (auto off = acl_disabled(ctx)) return *off;
  json out = json::array();
  for (const auto& [accessor, t] : ctx.store.acl_tokens()) out.push_back(acl::to_api_json(t));
  return json_ok(out);
}

http::Response acl_token_self(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  const auto secret = request_secret(req);
  const auto* t = secret.empty() ? nullptr : ctx.store.acl_token_by_secret_hash(acl::secret_hash(secret));
  if (!t) return http::error_response(404, "ACL token not found");
  return json_ok(acl::to_api_json(*t));
}

http::Response get_acl_token(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  const auto accessor = req.params.at("accessor");
  const auto* t = ctx.store.acl_token(accessor);
  if (!t) return not_found("ACL token", accessor);
  return json_ok(acl::to_api_json(*t));
}

http::Response delete_acl_token(Context& ctx, const http::Request& req) {
  if (auto off = acl_disabled(ctx)) return *off;
  const auto accessor = req.params.at("accessor");
  if (!ctx.store.acl_token(accessor)) return not_found("ACL token", accessor);
  Batch batch;
  batch.erase_acl_token(accessor);
  auto res = erased(ctx, std::move(batch), "delete ACL token \"" + accessor + "\"");
  if (res.status == 200) ctx.log.info("acl token deleted", {{"accessor_id", accessor}});
  return res;
}

}  // namespace mooring::controlplane::api
