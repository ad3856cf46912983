// `mooring volume claim list|delete`: claims as objects (GET /v1/volumes/claims, DELETE
// /v1/volumes/claim/:id), each with the step its release is at.
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

int claim_list(Context& ctx, const Invocation& inv) {
  std::string query;
  for (const char* name : {"volume", "node", "allocation", "state"})
    if (auto v = inv.flag(name)) query += std::string(query.empty() ? "?" : "&") + name + "=" + url_encode(*v);
  auto r = ctx.call("GET", "/v1/volumes/claims" + query);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  Table t({"ID", "Namespace", "Node ID", "Mode", "State", "Release Step", "Last Error"});
  for (const auto& c : r->body)
    t.add_row({field(c, "ID"), field(c, "Namespace"), field(c, "NodeID"), field(c, "Mode"), field(c, "State"),
               field(c, "ReleaseStep"), field(c, "LastError")});
  ctx.out() << (t.empty() ? std::string("No claims\n") : t.render());
  return kExitOk;
}

int claim_delete(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  auto r = ctx.call("DELETE", "/v1/volumes/claim/" + url_encode(id));
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const json c = r->body.value("Claim", json());
  if (!c.is_object()) {
    ctx.out() << "Claim \"" << id << "\" is released\n";
    return kExitOk;
  }
  ctx.out() << "Release of claim \"" << id << "\" requested (" << field(c, "State") << ", next "
            << field(c, "ReleaseStep") << "); `mooring volume claim list -volume " << field(c, "VolumeID")
            << "` shows its progress\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> claim_commands() {
  return {
      {.words = {"volume", "claim", "list"},
       .flags = {{"volume", true, "ID", "only the claims of this volume"},
                 {"node", true, "ID", "only the claims on this node"},
                 {"allocation", true, "ID", "only the claims of this allocation"},
                 {"state", true, "STATE", "taken, unpublishing, node-detached, controller-detached or ready-to-free"}},
       .summary = "List volume claims with the step each release is at",
       .help = "A claim's ID is VOLUME:ALLOCATION. -namespace '*' lists every namespace the token may list.",
       .run = claim_list},
      {.words = {"volume", "claim", "delete"},
       .arguments = "ID",
       .min_args = 1,
       .max_args = 1,
       .summary = "Release one claim: node unpublish/unstage, then controller unpublish (operator:write)",
       .help = "ID is VOLUME:ALLOCATION (from `mooring volume claim list`). Refused while the allocation\n"
               "still runs on a live node; on a down node the node step is skipped and the allocation is lost.",
       .run = claim_delete},
  };
}

}  // namespace mooring::cli
