// `mooring acl ...`: bootstrap, policies and tokens (Nomad's `nomad acl` shapes). A SecretID is
// printed only by the commands that create it.
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/json_file.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

void print_token(Context& ctx, const json& t) {
  ctx.out() << "Accessor ID  = " << field(t, "AccessorID") << "\n";
  if (t.contains("SecretID")) ctx.out() << "Secret ID    = " << field(t, "SecretID") << "\n";
  std::string policies;
  if (t.contains("Policies") && t["Policies"].is_array())
    for (const auto& p : t["Policies"]) policies += (policies.empty() ? "" : ", ") + p.get<std::string>();
  ctx.out() << "Name         = " << field(t, "Name") << "\n"
            << "Type         = " << field(t, "Type") << "\n"
            << "Policies     = " << (policies.empty() ? "n/a" : policies) << "\n"
            << "Create Time  = " << field(t, "CreateTime") << "\n"
            << "Expiry Time  = " << (field(t, "ExpirationTime").empty() ? "never" : field(t, "ExpirationTime")) << "\n";
}

int show_token(Context& ctx, const std::optional<ApiReply>& r) {
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  print_token(ctx, r->body);
  return kExitOk;
}

int bootstrap(Context& ctx, const Invocation&) { return show_token(ctx, ctx.call("POST", "/v1/acl/bootstrap")); }

int policy_apply(Context& ctx, const Invocation& inv) {
  const auto& name = inv.args[0];
  auto body = read_json_file(inv.args[1]);
  if (!body) return ctx.fail(body.error());
  if (!body->is_object()) return ctx.fail(inv.args[1] + ": expected a JSON object with Rules");
  // A file may hold the whole policy or just its Rules.
  json policy = body->contains("Rules") ? *body : json{{"Rules", *body}};
  policy["Name"] = name;
  if (auto d = inv.flag("description")) policy["Description"] = *d;
  auto r = ctx.call("PUT", "/v1/acl/policy/" + url_encode(name), policy);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Successfully wrote \"" << name << "\" ACL policy!\n";
  return kExitOk;
}

int policy_list(Context& ctx, const Invocation&) {
  auto r = ctx.call("GET", "/v1/acl/policies");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) return ctx.out() << "No policies found\n", kExitOk;
  Table t({"Name", "Description"});
  for (const auto& p : r->body) t.add_row({field(p, "Name"), field(p, "Description")});
  ctx.out() << t.render();
  return kExitOk;
}

int policy_info(Context& ctx, const Invocation& inv) {
  auto r = ctx.call("GET", "/v1/acl/policy/" + url_encode(inv.args[0]));
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Name        = " << field(r->body, "Name") << "\n"
            << "Description = " << field(r->body, "Description") << "\n"
            << "Rules       = " << r->body.value("Rules", json::object()).dump(2) << "\n";
  return kExitOk;
}

int policy_delete(Context& ctx, const Invocation& inv) {
  if (!ctx.call("DELETE", "/v1/acl/policy/" + url_encode(inv.args[0]))) return kExitError;
  ctx.out() << "Successfully deleted \"" << inv.args[0] << "\" ACL policy!\n";
  return kExitOk;
}

int token_create(Context& ctx, const Invocation& inv) {
  json body{{"Name", inv.flag("name").value_or("")}, {"Type", inv.flag("type").value_or("client")}};
  json policies = json::array();
  if (auto p = inv.flag("policy")) {
    std::size_t start = 0;
    while (start <= p->size()) {
      auto comma = p->find(',', start);
      auto one = p->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!one.empty()) policies.push_back(one);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  body["Policies"] = policies;
  if (auto ttl = inv.flag("ttl")) body["ExpirationTTL"] = *ttl;
  return show_token(ctx, ctx.call("PUT", "/v1/acl/token", body));
}

int token_list(Context& ctx, const Invocation&) {
  auto r = ctx.call("GET", "/v1/acl/tokens");
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) return ctx.out() << "No tokens found\n", kExitOk;
  Table t({"Name", "Type", "Accessor ID", "Expiry Time"});
  for (const auto& tok : r->body)
    t.add_row({field(tok, "Name"), field(tok, "Type"), field(tok, "AccessorID"),
               field(tok, "ExpirationTime").empty() ? "never" : field(tok, "ExpirationTime")});
  ctx.out() << t.render();
  return kExitOk;
}

int token_self(Context& ctx, const Invocation&) { return show_token(ctx, ctx.call("GET", "/v1/acl/token/self")); }

int token_info(Context& ctx, const Invocation& inv) {
  return show_token(ctx, ctx.call("GET", "/v1/acl/token/" + url_encode(inv.args[0])));
}

int token_delete(Context& ctx, const Invocation& inv) {
  if (!ctx.call("DELETE", "/v1/acl/token/" + url_encode(inv.args[0]))) return kExitError;
  ctx.out() << "Token " << inv.args[0] << " successfully deleted\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> acl_commands() {
  return {
      {.words = {"acl", "bootstrap"},
       .summary = "Create the first management token (once; prints its Secret ID)",
       .run = bootstrap},
      {.words = {"acl", "policy", "apply"},
       .arguments = "NAME FILE",
       .min_args = 2,
       .max_args = 2,
       .flags = {{"description", true, "TEXT", "the policy's description"}},
       .summary = "Create or update an ACL policy from a JSON file (the policy or just its Rules)",
       .run = policy_apply},
      {.words = {"acl", "policy", "list"}, .summary = "List ACL policies", .run = policy_list},
      {.words = {"acl", "policy", "info"},
       .arguments = "NAME",
       .min_args = 1,
       .max_args = 1,
       .summary = "Show an ACL policy and its rules",
       .run = policy_info},
      {.words = {"acl", "policy", "delete"},
       .arguments = "NAME",
       .min_args = 1,
       .max_args = 1,
       .summary = "Delete an ACL policy",
       .run = policy_delete},
      {.words = {"acl", "token", "create"},
       .flags = {{"name", true, "NAME", "the token's name"},
                 {"type", true, "TYPE", "client (default) or management"},
                 {"policy", true, "POLICY", "a policy of the token (repeatable, or comma-separated)", true},
                 {"ttl", true, "DURATION", "the token expires after DURATION (1h, 30m)"}},
       .summary = "Create an ACL token (prints its Secret ID once)",
       .run = token_create},
      {.words = {"acl", "token", "list"}, .summary = "List ACL tokens (never their secrets)", .run = token_list},
      {.words = {"acl", "token", "self"}, .summary = "Show the token this command runs with", .run = token_self},
      {.words = {"acl", "token", "info"},
       .arguments = "ACCESSOR",
       .min_args = 1,
       .max_args = 1,
       .summary = "Show an ACL token by its Accessor ID",
       .run = token_info},
      {.words = {"acl", "token", "delete"},
       .arguments = "ACCESSOR",
       .min_args = 1,
       .max_args = 1,
       .summary = "Delete an ACL token by its Accessor ID",
       .run = token_delete},
  };
}

}  // namespace mooring::cli
